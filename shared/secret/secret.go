// Package secret is the one rule of secrets in args (docs/architecture.md,
// "Secrets"): the reference {{ secret "NAME" }} that args carry in place of
// a value, the files a secret is read from (owned by the reader, mode 0600
// or stricter), the resolution of every reference in args just before a
// command runs, and the Redactor that replaces the values resolved by
// [redacted:NAME] in whatever is kept or shown afterwards.
//
// The reference, never the value, is what is stored, digested, approved
// and shown: the agent resolves it for its commands, the core for its own
// steps.
package secret

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/musterhq/muster/shared/config"
)

// Bounds.
const (
	// MaxName is the longest secret name.
	MaxName = 64
	// MaxValue is the largest secret file read.
	MaxValue = 64 << 10
	// MaxNames is how many secret names a node announces at most.
	MaxNames = 256
)

// nameRE is a plain name: lower case (configuration keys lose their case),
// no dot (a configuration key's separator), no slash (never a path).
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// ValidName reports whether name is a secret's name.
func ValidName(name string) bool { return len(name) <= MaxName && nameRE.MatchString(name) }

// CheckName returns why name is not a secret's name, or nil.
func CheckName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("secret name %.80q is not a plain name (lower-case letters, digits, - and _, at most %d, starting with a letter or digit)", name, MaxName)
	}
	return nil
}

// Ref is the canonical reference to the secret name, as it stands in args
// once rendered.
func Ref(name string) string { return `{{ secret "` + name + `" }}` }

// candidateRE finds what looks like a reference; refRE says whether it is one.
var (
	candidateRE = regexp.MustCompile(`\{\{-?\s*secret\b[^}]*\}\}`)
	refRE       = regexp.MustCompile(`^\{\{-?\s*secret\s+"([^"\\]*)"\s*-?\}\}$`)
)

// openRE is the opening of what could be read as a reference.
var openRE = regexp.MustCompile(`\{\{(-?\s*secret\b)`)

// Defuse returns s with every opening of a reference ({{ secret) broken
// ("{ {secret"), so that it cannot be read as one: for values that come
// from a command (a step's outputs) and are rendered into a later step's
// args, which must not name a secret their author did not write.
func Defuse(s string) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	return openRE.ReplaceAllString(s, "{ {$1")
}

// ErrBadRef is a string that looks like a reference to a secret but is not
// one (a name that is not plain, no quotes, more than the name).
var ErrBadRef = errors.New("bad secret reference")

// Find returns the names s refers to, in order, each once. Something that
// looks like a reference ({{ secret ... }}) but is not exactly
// {{ secret "NAME" }} with a plain name (trim markers aside: {{- and -}}
// are a template's, the core renders them) is an error.
func Find(s string) ([]string, error) {
	if !strings.Contains(s, "{{") {
		return nil, nil
	}
	var out []string
	for _, c := range candidateRE.FindAllString(s, -1) {
		m := refRE.FindStringSubmatch(c)
		if m == nil {
			return nil, fmt.Errorf("%w: %.100q is not {{ secret \"NAME\" }}", ErrBadRef, c)
		}
		if err := CheckName(m[1]); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadRef, err)
		}
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out, nil
}

// FindArgs returns the names the strings of args (a JSON object) refer to,
// sorted, each once.
func FindArgs(args json.RawMessage) ([]string, error) {
	if len(args) == 0 || !strings.Contains(string(args), "secret") {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return nil, err
	}
	var out []string
	var ferr error
	walk(v, func(s string) string {
		names, err := Find(s)
		if err != nil && ferr == nil {
			ferr = err
		}
		for _, n := range names {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return s
	})
	if ferr != nil {
		return nil, ferr
	}
	sort.Strings(out)
	return out, nil
}

// walk replaces every string of v (decoded JSON) by fn's result.
func walk(v any, fn func(string) string) any {
	switch x := v.(type) {
	case string:
		return fn(x)
	case map[string]any:
		for k, e := range x {
			x[k] = walk(e, fn)
		}
	case []any:
		for i, e := range x {
			x[i] = walk(e, fn)
		}
	}
	return v
}

// Config names the files secrets are read from: every file of Dir whose
// name is a secret's name, and Files, name → file (which win over Dir's).
type Config struct {
	Dir   string            `mapstructure:"dir" yaml:"dir,omitempty"`
	Files map[string]string `mapstructure:"files" yaml:"files,omitempty"`
}

// Validate returns one error per bad field, under key (e.g. "secrets").
func (c Config) Validate(key string) config.Errors {
	var errs config.Errors
	if c.Dir != "" && !filepath.IsAbs(c.Dir) {
		errs.Add(key+".dir", "%q is not an absolute path", c.Dir)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Files)) {
		if err := CheckName(name); err != nil {
			errs.Add(key+".files", "%v", err)
		}
		if p := c.Files[name]; !filepath.IsAbs(p) {
			errs.Add(key+".files."+name, "%q is not an absolute path", p)
		}
	}
	if len(c.Files) > MaxNames {
		errs.Add(key+".files", "%d secrets, at most %d", len(c.Files), MaxNames)
	}
	return errs
}

// Empty reports whether c names no secret at all.
func (c Config) Empty() bool { return c.Dir == "" && len(c.Files) == 0 }

// ErrUnknown is a reference to a secret the configuration does not name.
var ErrUnknown = errors.New("no such secret")

// path returns the file of the secret name.
func (c Config) path(name string) (string, error) {
	if p, ok := c.Files[name]; ok {
		return p, nil
	}
	if c.Dir != "" && ValidName(name) {
		p := filepath.Join(c.Dir, name)
		if _, err := os.Lstat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w %q on this node", ErrUnknown, name)
}

// Names lists the secrets c names, sorted, at most MaxNames: the entries
// of Files, and the files of Dir whose names are secret names (whatever
// their mode: reading one says what is wrong with it).
func (c Config) Names() []string {
	seen := map[string]bool{}
	for n := range c.Files {
		seen[n] = true
	}
	if c.Dir != "" {
		if ents, err := os.ReadDir(c.Dir); err == nil {
			for _, e := range ents {
				if ValidName(e.Name()) && !e.IsDir() {
					seen[e.Name()] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	if len(out) > MaxNames {
		out = out[:MaxNames]
	}
	return out
}

// Read reads the secret name: its file must be a regular file of at most
// MaxValue bytes, owned by the reading process's user, readable by no one
// else (no group or other permission bits). One trailing newline is not
// part of the value; an empty value is refused.
func (c Config) Read(name string) (string, error) {
	p, err := c.path(name)
	if err != nil {
		return "", err
	}
	return ReadFile(name, p)
}

// ReadFile reads the secret name from path with Read's checks. The checks
// are made on the open file, so that the file read is the file checked.
func ReadFile(name, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("secret %s: %s is not a regular file", name, path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("secret %s: %s has mode %04o, readable or writable by others: it must be 0600 (chmod 600)", name, path, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("secret %s: %s is owned by uid %d, not by uid %d that reads it", name, path, st.Uid, os.Geteuid())
	}
	if fi.Size() > MaxValue {
		return "", fmt.Errorf("secret %s: %s is %d bytes, at most %d", name, path, fi.Size(), MaxValue)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxValue+1))
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", name, err)
	}
	if len(b) > MaxValue {
		return "", fmt.Errorf("secret %s: %s is more than %d bytes", name, path, MaxValue)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("secret %s: %s is empty", name, path)
	}
	return v, nil
}

// Reader reads one secret's value by name (Config.Read).
type Reader func(name string) (string, error)

// Resolve replaces every reference in the strings of args by the secret's
// value, read through read, and returns the args resolved with the
// Redactor of the values it read. Args without a reference come back as
// they are, with an empty Redactor.
func Resolve(args json.RawMessage, read Reader) (json.RawMessage, *Redactor, error) {
	r := &Redactor{}
	names, err := FindArgs(args)
	if err != nil || len(names) == 0 {
		return args, r, err
	}
	values, err := readAll(names, read, r)
	if err != nil {
		return nil, r, err
	}
	v, err := decodeNumbers(args)
	if err != nil {
		return nil, r, err
	}
	v = walk(v, func(s string) string { return replace(s, values) })
	out, err := json.Marshal(v)
	if err != nil {
		return nil, r, err
	}
	return out, r, nil
}

// ResolveString replaces every reference in s by the secret's value, read
// through read, and adds the values it read to r, to redact what comes
// back (a core-side call's headers and body, core/probe).
func ResolveString(s string, read Reader, r *Redactor) (string, error) {
	names, err := Find(s)
	if err != nil || len(names) == 0 {
		return s, err
	}
	values, err := readAll(names, read, r)
	if err != nil {
		return "", err
	}
	return replace(s, values), nil
}

// readAll reads the secrets of names, adding each value to r.
func readAll(names []string, read Reader, r *Redactor) (map[string]string, error) {
	values := map[string]string{}
	for _, n := range names {
		v, err := read(n)
		if err != nil {
			return nil, err
		}
		values[n] = v
		r.Add(n, v)
	}
	return values, nil
}

// replace replaces every reference in s to a secret of values by its value.
func replace(s string, values map[string]string) string {
	return candidateRE.ReplaceAllStringFunc(s, func(c string) string {
		if m := refRE.FindStringSubmatch(c); m != nil {
			if v, ok := values[m[1]]; ok {
				return v
			}
		}
		return c
	})
}

// Redactor replaces the values of secrets by [redacted:NAME]. The zero
// value redacts nothing; a nil one too.
type Redactor struct {
	pairs []pair // longest value first, so that a value holding another is replaced whole
	max   int
}

type pair struct{ value, name string }

// Add makes r redact value as name's, in its raw and its JSON-escaped
// forms (a command may print the record it got on stdin).
func (r *Redactor) Add(name, value string) {
	if value == "" {
		return
	}
	forms := []string{value}
	if b, err := json.Marshal(value); err == nil {
		if j := string(b[1 : len(b)-1]); j != value {
			forms = append(forms, j)
		}
	}
	for _, f := range forms {
		r.pairs = append(r.pairs, pair{f, name})
		r.max = max(r.max, len(f))
	}
	sort.SliceStable(r.pairs, func(i, j int) bool { return len(r.pairs[i].value) > len(r.pairs[j].value) })
}

// Merge makes r redact o's values too.
func (r *Redactor) Merge(o *Redactor) {
	if o.Empty() {
		return
	}
	for _, p := range o.pairs {
		if !slices.Contains(r.pairs, p) {
			r.pairs = append(r.pairs, p)
		}
	}
	r.max = max(r.max, o.max)
	sort.SliceStable(r.pairs, func(i, j int) bool { return len(r.pairs[i].value) > len(r.pairs[j].value) })
}

// Empty reports whether r redacts nothing.
func (r *Redactor) Empty() bool { return r == nil || len(r.pairs) == 0 }

// Longest is the length of the longest value r redacts: a stream redacted
// piece by piece must look this far back (less one byte) for a value cut
// between two pieces.
func (r *Redactor) Longest() int {
	if r == nil {
		return 0
	}
	return r.max
}

// Redact returns s with every value replaced by [redacted:NAME].
func (r *Redactor) Redact(s string) string {
	if r.Empty() {
		return s
	}
	for _, p := range r.pairs {
		if strings.Contains(s, p.value) {
			s = strings.ReplaceAll(s, p.value, Redacted(p.name))
		}
	}
	return s
}

// Pending returns how many bytes at the end of s could be the beginning
// of a value r redacts: a value being written in pieces, held back from
// what is shown while more may come.
func (r *Redactor) Pending(s string) int {
	if r.Empty() {
		return 0
	}
	best := 0
	for _, p := range r.pairs {
		for i := max(0, len(s)-len(p.value)+1); i < len(s)-best; i++ {
			if strings.HasPrefix(p.value, s[i:]) {
				best = len(s) - i
				break
			}
		}
	}
	return best
}

// Redacted is what a secret's value is replaced by.
func Redacted(name string) string { return "[redacted:" + name + "]" }

// decodeNumbers decodes a JSON document keeping its numbers as written
// (json.Number), so that what is encoded again changes only strings.
func decodeNumbers(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// RedactJSON redacts every string of a JSON document (keys too), and
// returns it compact; raw that is not JSON is redacted as text.
func (r *Redactor) RedactJSON(raw json.RawMessage) json.RawMessage {
	if r.Empty() || len(raw) == 0 {
		return raw
	}
	v, err := decodeNumbers(raw)
	if err != nil {
		return json.RawMessage(r.Redact(string(raw)))
	}
	v = walk(v, r.Redact)
	if m, ok := v.(map[string]any); ok {
		out := make(map[string]any, len(m))
		for k, e := range m {
			out[r.Redact(k)] = e
		}
		v = out
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(r.Redact(string(raw)))
	}
	return b
}
