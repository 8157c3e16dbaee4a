package argschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const upgradeSchema = `
type: object
required: [version]
additionalProperties: false
properties:
  version: {type: string, minLength: 1}
  hosts: {type: array, items: {type: string, pattern: "^[a-z]+$"}}
`

func setup(t *testing.T, text string) *Schema {
	t.Helper()
	raw, err := Decode(text)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	s, err := Compile(raw)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return s
}

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	s := setup(t, upgradeSchema)
	for _, tc := range []struct {
		name, args, field string
	}{
		{"missing required", `{}`, "args.version"},
		{"empty args are an empty object", ``, "args.version"},
		{"wrong type", `{"version": 2}`, "args.version"},
		{"too short", `{"version": ""}`, "args.version"},
		{"unknown property", `{"version": "2", "verison": "x"}`, "args.verison"},
		{"array item", `{"version": "2", "hosts": ["ok", "NO"]}`, "args.hosts[1]"},
		{"not an object", `[1]`, "args"},
		{"a number past the bounds", `{"version": "2", "n": 1e1000000000}`, "args"},
		{"a tiny number past the bounds", `{"version": "2", "n": 1e-1000000000}`, "args"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := s.Validate(json.RawMessage(tc.args), nil)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrArgs) {
				t.Fatalf("Validate(%s) = %v, want an *Error", tc.args, err)
			}
			if e.Fields[0].Field != tc.field {
				t.Fatalf("field %q, want %q (%v)", e.Fields[0].Field, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.field+": ") {
				t.Fatalf("message %q does not name %s", err, tc.field)
			}
		})
	}
	if err := s.Validate(json.RawMessage(`{"version": "2.0", "hosts": ["a"]}`), nil); err != nil {
		t.Fatalf("good args refused: %v", err)
	}
}

func TestValidateIgnoresFieldsNotKnownYet(t *testing.T) {
	t.Parallel()
	s := setup(t, `{"type": "object", "required": ["n"], "properties": {"n": {"type": "string", "pattern": "^[0-9]+$"}}}`)
	ignore := func(f string) bool { return f == "args.n" }
	if err := s.Validate(json.RawMessage(`{"n": "{{ .steps.a.outputs.x }}"}`), ignore); err != nil {
		t.Fatalf("an ignored field was refused: %v", err)
	}
	// Ignoring a value does not excuse a missing one.
	if err := s.Validate(json.RawMessage(`{}`), ignore); err == nil {
		t.Fatal("a missing required field passed")
	}
}

func TestDecodeAndCompileRefuse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, text string }{
		{"not yaml", "{: ["},
		{"a string", `"hello"`},
		{"a list", "[1, 2]"},
		{"bad keyword value", `{"type": "banana"}`},
		{"bad pattern", `{"type": "string", "pattern": "("}`},
		{"a file ref", `{"$ref": "file:///etc/passwd"}`},
		{"a remote ref", `{"$ref": "https://example.com/s.json"}`},
		{"non-string key", "{1: {type: string}}"},
		{"too large", `{"description": "` + strings.Repeat("x", MaxBytes) + `"}`},
		{"a huge number in the schema", `{"minimum": 1e1000000000}`},
		{"too deep", strings.Repeat(`{"not": `, 100) + `{}` + strings.Repeat(`}`, 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw, err := Decode(tc.text)
			if err == nil {
				_, err = Compile(raw)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
}

func TestDecodeKeepsCaseAndTakesJSON(t *testing.T) {
	t.Parallel()
	raw, err := Decode(`{"type": "object", "properties": {"Version": {"type": "string", "maxLength": 3}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"maxLength":3`) || !strings.Contains(string(raw), `"Version"`) {
		t.Fatalf("case lost: %s", raw)
	}
	s, err := Compile(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(json.RawMessage(`{"Version": "1234"}`), nil); err == nil {
		t.Fatal("maxLength not applied")
	}
}

func TestCacheIsBounded(t *testing.T) {
	t.Parallel()
	c := NewCache(3)
	first, err := c.Get(json.RawMessage(`{"type": "object"}`))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := c.Get(json.RawMessage(`{"type": "object"}`))
	if first != again {
		t.Fatal("the same schema was compiled twice")
	}
	for i := range 10 {
		_, _ = c.Get(json.RawMessage(fmt.Sprintf(`{"maxProperties": %d}`, i)))
	}
	if n := c.Len(); n != 3 {
		t.Fatalf("cache holds %d, want 3", n)
	}
	if _, err := c.Get(json.RawMessage(`{"type": 1}`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad schema from the cache: %v", err)
	}
}

// FuzzDecode: any text either fails to decode or compile with ErrInvalid,
// or gives a schema within MaxBytes that validates any args without panic.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{upgradeSchema, `true`, `{}`, `{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}`,
		"a: &a [*a]", `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"}`, "{1: 2}", "- 1", `{"pattern": "("}`,
		`{"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 0.0001}}}`, "x: 2001-12-14t21:59:43.10-05:00"} {
		f.Add(s, `{"version": "1"}`)
	}
	f.Add(`{"multipleOf": 0.001}`, `1e10000000`)
	f.Add(`{"maximum": 3}`, `[1e-1000000000]`)
	f.Fuzz(func(t *testing.T, text, args string) {
		raw, err := Decode(text)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode error not ErrInvalid: %v", err)
			}
			return
		}
		if len(raw) > MaxBytes || !json.Valid(raw) {
			t.Fatalf("Decode gave %d bytes, valid %v", len(raw), json.Valid(raw))
		}
		s, err := Compile(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Compile error not ErrInvalid: %v", err)
			}
			return
		}
		if err := s.Validate(json.RawMessage(args), nil); err != nil && !errors.Is(err, ErrArgs) {
			t.Fatalf("Validate error not ErrArgs: %v", err)
		}
	})
}

func TestCompileRefusesHugeNumbers(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`{"minimum": 1e1000000000}`, `{"multipleOf": 1e-1000000000}`, `{"maximum": 1` + strings.Repeat("0", 100) + `}`} {
		if _, err := Compile(json.RawMessage(raw)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Compile(%s) = %v, want ErrInvalid", raw, err)
		}
	}
}
