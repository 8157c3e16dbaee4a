// Package argschema checks an action's args against the JSON Schema an
// external kind declares (args_schema in the agent's configuration;
// docs/architecture.md, "Runs and playbooks"). The agent refuses bad args
// with it, and the core checks every action and every rendered step of a
// run against the schema each target node announced, before any approval.
//
// Schemas are JSON Schema draft 2020-12 unless they name another draft in
// $schema. A schema stands alone: it may refer to its own parts ($ref "#/…")
// but never loads anything from a file or the network.
package argschema

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// MaxBytes bounds a schema in its canonical JSON form: what an agent may
// declare and announce, and what the core keeps per node and kind.
const MaxBytes = 16 << 10

// maxErrors bounds the fields one refusal lists.
const maxErrors = 5

// ErrInvalid is a schema that cannot be used (not JSON or YAML, too large,
// not a valid schema, or referring outside itself).
var ErrInvalid = errors.New("invalid args_schema")

// ErrArgs is args a schema refuses; the error names the fields.
var ErrArgs = errors.New("args do not match the kind's args_schema")

// schemaURL is the name every schema is compiled under.
const schemaURL = "urn:muster:args-schema"

// Decode reads a schema written as JSON or YAML text (the agent's
// configuration holds it as a block of text so that its keys keep their
// case) and returns its canonical JSON, within MaxBytes. It does not
// compile it: Compile does.
func Decode(text string) (json.RawMessage, error) {
	if len(text) > 4*MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalid, len(text), MaxBytes)
	}
	var v any
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		return nil, fmt.Errorf("%w: not JSON or YAML: %v", ErrInvalid, oneLine(err.Error()))
	}
	v, err := jsonValue(v, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	switch v.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("%w: a schema is an object (or true or false)", ErrInvalid)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes as JSON, the limit is %d", ErrInvalid, len(b), MaxBytes)
	}
	return b, nil
}

// maxDepth bounds the nesting of a decoded schema.
const maxDepth = 64

// jsonValue turns a decoded YAML value into one encoding/json takes: maps
// with string keys only, no NaN or infinities.
func jsonValue(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			ev, err := jsonValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			x[k] = ev
		}
		return x, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("key %v is not a string", k)
			}
			ev, err := jsonValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[ks] = ev
		}
		return out, nil
	case []any:
		for i, e := range x {
			ev, err := jsonValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			x[i] = ev
		}
		return x, nil
	case float64:
		if x != x || x > 1e308 || x < -1e308 {
			return nil, fmt.Errorf("%v is not a JSON number", x)
		}
		return x, nil
	case nil, string, bool, int, int64, uint64:
		return x, nil
	default:
		return nil, fmt.Errorf("a value of type %T is not JSON (write dates and times as strings)", v)
	}
}

// maxNumber bounds the text of a number and its exponent: the validator
// works on exact rationals, and 1e1000000000 would take it minutes (or
// more than it can hold).
const (
	maxNumberLen = 64
	maxExponent  = 400
)

// checkNumbers refuses, in a decoded JSON value, numbers the validator
// could not work on in bounded time and memory, and nesting past maxDepth.
func checkNumbers(v any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if err := checkNumbers(e, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := checkNumbers(e, depth+1); err != nil {
				return err
			}
		}
	case json.Number:
		s := string(x)
		if len(s) > maxNumberLen {
			return fmt.Errorf("a number of %d digits, the limit is %d", len(s), maxNumberLen)
		}
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
			if err != nil || e > maxExponent || e < -maxExponent {
				return fmt.Errorf("the number %s is out of range (exponent at most %d)", s, maxExponent)
			}
		}
	}
	return nil
}

// Schema is a compiled schema.
type Schema struct {
	s     *jsonschema.Schema
	local shape
}

// refuseLoader loads nothing: a schema may not reach a file or the network.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("a schema may refer only to itself, not to %s", url)
}

// Compile compiles a schema in canonical JSON (as Decode returns it, or as
// an agent announced it). A schema past the bounds of its cost (MaxNesting,
// MaxExpansion, MaxPatternSize) is refused with ErrInvalid and
// ErrTooCostly, saying which.
func Compile(raw json.RawMessage) (*Schema, error) {
	if len(raw) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalid, len(raw), MaxBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("%w: a schema is an object (or true or false)", ErrInvalid)
	}
	if err := checkNumbers(doc, 0); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := checkObjects(doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	var costly error // the compiler does not wrap its engine's errors
	sizes := map[string]int{}
	c.UseRegexpEngine(func(expr string) (jsonschema.Regexp, error) {
		r, err := compilePattern(expr)
		if p, ok := r.(*pattern); ok {
			sizes[expr] = p.size
			if n := sum(sizes); n > MaxPatternsSize {
				err = fmt.Errorf("%w: patterns of %d instructions in all, the limit is %d", ErrTooCostly, n, MaxPatternsSize)
			}
		}
		if errors.Is(err, ErrTooCostly) && costly == nil {
			costly = err
		}
		return r, err
	})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, oneLine(err.Error()))
	}
	s, err := c.Compile(schemaURL)
	if costly != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, costly)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, oneLine(err.Error()))
	}
	local, err := checkShape(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &Schema{s: s, local: local}, nil
}

// FieldError is one field args break.
type FieldError struct {
	// Field names the value: args, args.version, args.hosts[0].
	Field   string
	Message string
}

// Error is the refusal of args: every field that breaks the schema (the
// first few), in a stable order.
type Error struct {
	Fields []FieldError
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return ErrArgs.Error() + ": " + strings.Join(parts, "; ")
}

// Unwrap makes errors.Is(err, ErrArgs) hold.
func (e *Error) Unwrap() error { return ErrArgs }

// costlyError refuses args whose check would pass MaxWork.
type costlyError struct{}

// errCostly is the one costlyError.
var errCostly error = costlyError{}

func (costlyError) Error() string {
	return fmt.Sprintf("%v: checking these args against the kind's args_schema takes more than %d units of work", ErrTooCostly, MaxWork)
}

// Unwrap makes errors.Is hold for ErrArgs and ErrTooCostly.
func (costlyError) Unwrap() []error { return []error{ErrArgs, ErrTooCostly} }

var printer = message.NewPrinter(language.English)

// Validate checks args (a JSON object, or empty for {}) and returns nil or
// an *Error naming the fields. ignore, when not nil, drops the errors at
// the fields it reports true for (values not known yet). Args that would
// cost more than MaxWork to check are refused unchecked, with ErrArgs and
// ErrTooCostly.
func (s *Schema) Validate(args json.RawMessage, ignore func(field string) bool) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return &Error{Fields: []FieldError{{Field: "args", Message: "not JSON: " + err.Error()}}}
	}
	if err := checkNumbers(v, 0); err != nil {
		return &Error{Fields: []FieldError{{Field: "args", Message: err.Error()}}}
	}
	if m := (meter{local: s.local, left: MaxWork}); !m.walk(s.s, v) {
		return errCostly
	}
	err = s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Error{Fields: []FieldError{{Field: "args", Message: oneLine(err.Error())}}}
	}
	// The leaves of the error's tree, each with its field: a refusal lists
	// the first few fields in order, and only those few are put in words
	// (an enum's message names all of its values).
	type leaf struct {
		field string
		e     *jsonschema.ValidationError
	}
	var leaves []leaf
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		if ignore != nil && ignore(fieldName(e.InstanceLocation)) {
			return
		}
		leaves = append(leaves, leaf{fieldOf(e), e})
	}
	walk(ve)
	slices.SortStableFunc(leaves, func(a, b leaf) int { return strings.Compare(a.field, b.field) })
	var out []FieldError
	seen := map[string]bool{}
	for i, l := range leaves {
		if len(out) == maxErrors || i == maxWorded {
			break
		}
		f := FieldError{Field: l.field, Message: wording(l.e)}
		if key := f.Field + "\x00" + f.Message; !seen[key] {
			seen[key] = true
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &Error{Fields: out}
}

// maxWorded bounds the errors Validate puts in words to find the first
// maxErrors different ones.
const maxWorded = 64

// fieldOf is the field an error names: a missing or unexpected property is
// named as the field itself.
func fieldOf(e *jsonschema.ValidationError) string {
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		if len(k.Missing) > 0 {
			return fieldName(append(slices.Clone(e.InstanceLocation), k.Missing[0]))
		}
	case *kind.AdditionalProperties:
		if len(k.Properties) > 0 {
			return fieldName(append(slices.Clone(e.InstanceLocation), k.Properties[0]))
		}
	}
	return fieldName(e.InstanceLocation)
}

// wording puts an error in words.
func wording(e *jsonschema.ValidationError) string {
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		if len(k.Missing) > 0 {
			return "required"
		}
	case *kind.AdditionalProperties:
		if len(k.Properties) > 0 {
			return "not allowed by the kind's args_schema"
		}
	}
	return oneLine(e.ErrorKind.LocalizedString(printer))
}

// fieldName names an instance location: args, args.version, args.list[2];
// a key that is not a plain name is quoted: args["a b"].
func fieldName(loc []string) string {
	var b strings.Builder
	b.WriteString("args")
	for _, p := range loc {
		if _, err := strconv.Atoi(p); err == nil {
			b.WriteString("[" + p + "]")
			continue
		}
		if plain(p) {
			b.WriteString("." + p)
		} else {
			b.WriteString("[" + strconv.Quote(p) + "]")
		}
	}
	return b.String()
}

func plain(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// FieldOf is the field name of a path of keys and indexes in args, as
// Validate names it (for callers that mark fields to ignore).
func FieldOf(path []string) string { return fieldName(path) }

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// Cache compiles each distinct schema once and keeps at most its limit of
// them (and of the failures), forgetting the oldest first. It is safe for
// concurrent use.
type Cache struct {
	mu    sync.Mutex
	limit int
	order [][32]byte
	m     map[[32]byte]cached
}

type cached struct {
	s   *Schema
	err error
}

// NewCache returns a cache of at most limit schemas (at least 1).
func NewCache(limit int) *Cache {
	return &Cache{limit: max(limit, 1), m: map[[32]byte]cached{}}
}

// Get returns the compiled schema raw, compiling it the first time.
func (c *Cache) Get(raw json.RawMessage) (*Schema, error) {
	key := sha256.Sum256(raw)
	c.mu.Lock()
	if e, ok := c.m[key]; ok {
		c.mu.Unlock()
		return e.s, e.err
	}
	c.mu.Unlock()
	s, err := Compile(raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok {
		for len(c.order) >= c.limit {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, key)
		c.m[key] = cached{s, err}
	}
	return s, err
}

// Len is how many schemas the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
