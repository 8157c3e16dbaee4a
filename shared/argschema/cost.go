package argschema

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/musterhq/muster/shared/jsonbody"
)

// Bounds on what checking args against a schema may cost
// (docs/agent.md#argument-schemas). A schema's author (any agent, or a
// machine enrolled with a join token) chooses the schema, and an operator,
// a viewer's plan or a schedule chooses the args: neither may make one
// check cost more than MaxWork.
const (
	// MaxNesting bounds how deep subschemas nest in one another, counting
	// through every $ref: the validator's recursion.
	MaxNesting = 32
	// MaxExpansion bounds the subschemas of a schema with every $ref
	// replaced by what it names: the work of checking one value. Two
	// $refs to a part count it twice, so 21 levels of an anyOf of two
	// $refs to the level below (1.6 KB) count 2^21.
	MaxExpansion = 1024
	// MaxPatternSize bounds the program of one pattern (instructions of
	// Go's regexp): the work of matching it is that times the text.
	MaxPatternSize = 1000
	// MaxPatternsSize bounds the programs of all of a schema's patterns:
	// the work of compiling them.
	MaxPatternsSize = 8 * MaxPatternSize
	// MaxWork bounds the work of one check: about a subschema applied to
	// a value, plus a unit per 64 bytes of schema text or pattern work.
	MaxWork = 25_000
)

// ErrTooCostly is a schema (or a schema and args) past the bounds above. A
// schema refused at compile carries ErrInvalid too; a check that would
// spend more than MaxWork carries ErrArgs too.
var ErrTooCostly = errors.New("schema too costly")

// pattern is a compiled pattern with the size of its program.
type pattern struct {
	*regexp.Regexp
	size int
}

// compilePattern is the compiler's regexp engine: Go's regexp (linear in
// the text), refusing programs past MaxPatternSize.
func compilePattern(expr string) (jsonschema.Regexp, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, err
	}
	if len(prog.Inst) > MaxPatternSize {
		return nil, fmt.Errorf("%w: pattern %.40q compiles to %d instructions, the limit is %d", ErrTooCostly, expr, len(prog.Inst), MaxPatternSize)
	}
	r, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	return &pattern{Regexp: r, size: len(prog.Inst)}, nil
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// shape is what checkShape learnt of each subschema: the work of the
// keywords that look at the value itself (enum, const, pattern).
type shape map[*jsonschema.Schema]int

// children calls f with every subschema s applies, to the value itself
// (in place) or to a part of it.
func children(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	one := func(c *jsonschema.Schema) {
		if c != nil {
			f(c)
		}
	}
	anySchema := func(v any) {
		switch x := v.(type) {
		case *jsonschema.Schema:
			one(x)
		case []*jsonschema.Schema:
			for _, c := range x {
				one(c)
			}
		}
	}
	one(s.Ref)
	one(s.RecursiveRef)
	if s.DynamicRef != nil {
		one(s.DynamicRef.Ref)
	}
	one(s.Not)
	for _, l := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
		for _, c := range l {
			one(c)
		}
	}
	one(s.If)
	one(s.Then)
	one(s.Else)
	one(s.PropertyNames)
	for _, c := range s.Properties {
		one(c)
	}
	for _, c := range s.PatternProperties {
		one(c)
	}
	anySchema(s.AdditionalProperties)
	for _, d := range s.Dependencies {
		anySchema(d)
	}
	for _, c := range s.DependentSchemas {
		one(c)
	}
	one(s.UnevaluatedProperties)
	one(s.Contains)
	anySchema(s.Items)
	anySchema(s.AdditionalItems)
	one(s.Items2020)
	one(s.UnevaluatedItems)
	one(s.ContentSchema)
}

// checkShape refuses a compiled schema that refers to itself (a $ref
// cycle), uses $dynamicRef or $recursiveRef, nests deeper than MaxNesting
// or expands past MaxExpansion; it returns the work of each subschema's
// own keywords.
func checkShape(root *jsonschema.Schema) (shape, error) {
	type facts struct {
		done          bool
		depth, expand int
	}
	seen := map[*jsonschema.Schema]*facts{}
	local := shape{}
	var visit func(s *jsonschema.Schema) (*facts, error)
	visit = func(s *jsonschema.Schema) (*facts, error) {
		if f, ok := seen[s]; ok {
			if !f.done {
				return nil, fmt.Errorf("%w: %s refers to itself (a schema may not be recursive)", ErrTooCostly, s.Location)
			}
			return f, nil
		}
		if s.DynamicRef != nil {
			return nil, fmt.Errorf("%w: %s uses $dynamicRef, which a schema may not", ErrTooCostly, s.Location)
		}
		if s.RecursiveRef != nil {
			return nil, fmt.Errorf("%w: %s uses $recursiveRef, which a schema may not", ErrTooCostly, s.Location)
		}
		f := &facts{depth: 1, expand: 1}
		seen[s] = f
		var err error
		children(s, func(c *jsonschema.Schema) {
			if err != nil {
				return
			}
			var cf *facts
			if cf, err = visit(c); err != nil {
				return
			}
			f.depth = max(f.depth, cf.depth+1)
			f.expand = min(f.expand+cf.expand, MaxExpansion+1) // saturates: no overflow
		})
		if err != nil {
			return nil, err
		}
		f.done = true
		local[s] = ownWork(s)
		return f, nil
	}
	f, err := visit(root)
	if err != nil {
		return nil, err
	}
	if f.depth > MaxNesting {
		return nil, fmt.Errorf("%w: subschemas nested %d deep (following $ref), the limit is %d", ErrTooCostly, f.depth, MaxNesting)
	}
	if f.expand > MaxExpansion {
		return nil, fmt.Errorf("%w: more than %d subschemas with every $ref expanded, the limit is %d", ErrTooCostly, MaxExpansion, MaxExpansion)
	}
	return local, nil
}

// checkObjects refuses a decoded schema document with more objects than
// MaxExpansion (every subschema is one): before the compiler, whose work
// grows with the square of the subschemas.
func checkObjects(doc any) error {
	n := 0
	var count func(v any) bool
	count = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			if n++; n > MaxExpansion {
				return false
			}
			for _, e := range x {
				if !count(e) {
					return false
				}
			}
		case []any:
			for _, e := range x {
				if !count(e) {
					return false
				}
			}
		}
		return true
	}
	if !count(doc) {
		return fmt.Errorf("%w: more than %d objects, the limit of subschemas is %d", ErrTooCostly, MaxExpansion, MaxExpansion)
	}
	return nil
}

// ownWork is the work of s's keywords that compare the value with schema
// text (enum and const, also printed whole in a refusal): a unit per 64
// bytes of that text.
func ownWork(s *jsonschema.Schema) int {
	n := 0
	if s.Enum != nil {
		n += jsonbody.TextSize(s.Enum.Values)
	}
	if s.Const != nil {
		n += jsonbody.TextSize(*s.Const)
	}
	return n / 64
}

// meter counts the work of one check against MaxWork.
type meter struct {
	local shape
	left  int
}

// spend takes n units; false when the budget is spent.
func (m *meter) spend(n int) bool {
	m.left -= n
	return m.left >= 0
}

// match is the work of matching p against text.
func match(p jsonschema.Regexp, text string) int {
	if q, ok := p.(*pattern); ok {
		return len(text) * q.size / 64
	}
	return len(text) / 64
}

// walk charges the work of checking v against s as the validator does it,
// or more: every subschema that may apply is counted as applied (all of an
// anyOf, then and else, every pattern property). False when it passes the
// budget; it stops there, so the walk itself costs at most MaxWork.
func (m *meter) walk(s *jsonschema.Schema, v any) bool {
	if !m.spend(1 + m.local[s]) {
		return false
	}
	if s.Bool != nil {
		return true
	}
	in := func(cs ...*jsonschema.Schema) bool {
		for _, c := range cs {
			if c != nil && !m.walk(c, v) {
				return false
			}
		}
		return true
	}
	if !in(s.Ref, s.Not, s.If, s.Then, s.Else) || !in(s.AllOf...) || !in(s.AnyOf...) || !in(s.OneOf...) {
		return false
	}
	for _, c := range s.DependentSchemas {
		if !in(c) {
			return false
		}
	}
	for _, d := range s.Dependencies {
		if c, ok := d.(*jsonschema.Schema); ok && !in(c) {
			return false
		}
	}
	switch x := v.(type) {
	case string:
		if s.Pattern != nil && !m.spend(match(s.Pattern, x)) {
			return false
		}
		if s.Format != nil && !m.spend(len(x)/64) {
			return false
		}
	case map[string]any:
		return m.object(s, x)
	case []any:
		return m.array(s, x)
	}
	return true
}

func (m *meter) object(s *jsonschema.Schema, obj map[string]any) bool {
	if !m.spend(len(obj)) { // the validator goes through every member
		return false
	}
	additional, _ := s.AdditionalProperties.(*jsonschema.Schema)
	for k, e := range obj {
		if c, ok := s.Properties[k]; ok && !m.walk(c, e) {
			return false
		}
		for p, c := range s.PatternProperties {
			if !m.spend(match(p, k)) || !m.walk(c, e) {
				return false
			}
		}
		for _, c := range []*jsonschema.Schema{additional, s.UnevaluatedProperties} {
			if c != nil && !m.walk(c, e) {
				return false
			}
		}
		if s.PropertyNames != nil && !m.walk(s.PropertyNames, k) {
			return false
		}
	}
	return true
}

func (m *meter) array(s *jsonschema.Schema, arr []any) bool {
	if !m.spend(len(arr)) {
		return false
	}
	items, _ := s.Items.(*jsonschema.Schema)
	tuple, _ := s.Items.([]*jsonschema.Schema)
	additional, _ := s.AdditionalItems.(*jsonschema.Schema)
	for i, e := range arr {
		for _, c := range []*jsonschema.Schema{items, additional, s.Items2020, s.Contains, s.UnevaluatedItems} {
			if c != nil && !m.walk(c, e) {
				return false
			}
		}
		for _, l := range [][]*jsonschema.Schema{tuple, s.PrefixItems} {
			if i < len(l) && !m.walk(l[i], e) {
				return false
			}
		}
	}
	return true
}
