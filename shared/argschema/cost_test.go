package argschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// nestedRefs is the schema of issue 30: levels $defs, each an anyOf of two
// $refs to the level below, so that args failing the bottom level (an
// object, or an empty string) make a plain validator try 2^levels paths.
// 21 levels are about 1.6 KB.
func nestedRefs(levels int) string {
	return nestedRefsAt(levels, `"$ref": "#/$defs/top"`)
}

// nestedRefsAt is nestedRefs with root as the rest of the root schema, in
// which "#/$defs/top" names the top level.
func nestedRefsAt(levels int, root string) string {
	defs := []string{`"l0": {"type": "string", "minLength": 1}`}
	for i := 1; i < levels; i++ {
		defs = append(defs, fmt.Sprintf(`"l%d": {"anyOf": [{"$ref": "#/$defs/l%d"}, {"$ref": "#/$defs/l%d"}]}`, i, i-1, i-1))
	}
	root = strings.ReplaceAll(root, "#/$defs/top", fmt.Sprintf("#/$defs/l%d", levels-1))
	return fmt.Sprintf(`{"$defs": {%s}, %s}`, strings.Join(defs, ", "), root)
}

// wideSchema is a schema of n subschemas with no $ref at all: an anyOf of
// n-1 empty schemas.
func wideSchema(n int) string {
	return `{"anyOf": [` + strings.Repeat(`{},`, n-2) + `{}]}`
}

func TestCompileRefusesAnExponentialSchema(t *testing.T) {
	t.Parallel()
	text := nestedRefs(21)
	if n := len(text); n < 1400 || n > 1800 {
		t.Fatalf("the schema of the issue is about 1.6 KB, this one %d bytes", n)
	}
	raw, err := Decode(text)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(raw)
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrTooCostly) {
		t.Fatalf("Compile = %v, want ErrInvalid and ErrTooCostly", err)
	}
	if !strings.Contains(err.Error(), "$ref") {
		t.Fatalf("%q does not say why", err)
	}
}

func TestCompileRefusesSchemasPastTheShapeLimits(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"not": `, MaxNesting) + `{}` + strings.Repeat(`}`, MaxNesting)
	for _, tc := range []struct{ name, text, says string }{
		{"nested past the limit", deep, "nested"},
		{"expanding past the limit", nestedRefs(13), "$ref"},
		{"a $ref cycle", `{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}`, "refers to itself"},
		{"a recursive schema", `{"properties": {"child": {"$ref": "#"}}}`, "refers to itself"},
		{"a dynamic ref", `{"$dynamicAnchor": "a", "items": {"$dynamicRef": "#a"}}`, "$dynamicRef"},
		{"a recursive ref", `{"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveAnchor": true, "items": {"$recursiveRef": "#"}}`, "$recursiveRef"},
		{"too many subschemas", wideSchema(MaxExpansion + 2), "subschemas"},
		{"a pattern too large", `{"pattern": "^(?:[a-z0-9]{1,30}\\.){1,30}$"}`, "pattern"},
		{"patterns too large in all", patterns(9), "patterns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw, err := Decode(tc.text)
			if err == nil {
				_, err = Compile(raw)
			}
			if !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrTooCostly) {
				t.Fatalf("got %v, want ErrInvalid and ErrTooCostly", err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%q does not say %q", err, tc.says)
			}
		})
	}
}

// patterns is a schema of n patterns of about 900 instructions.
func patterns(n int) string {
	props := make([]string, n)
	for i := range props {
		props[i] = fmt.Sprintf(`"p%d": {"pattern": "^p%d(?:[a-z]{1,9}[0-9]{0,9}-){1,24}$"}`, i, i)
	}
	return `{"properties": {` + strings.Join(props, ", ") + `}}`
}

func TestCompileTakesSchemasWithinTheLimits(t *testing.T) {
	t.Parallel()
	within := strings.Repeat(`{"not": `, MaxNesting-1) + `{}` + strings.Repeat(`}`, MaxNesting-1)
	for _, text := range []string{upgradeSchema, within, patterns(8), nestedRefs(9), wideSchema(MaxExpansion),
		`{"$defs": {"v": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/v"}, "b": {"$ref": "#/$defs/v"}}}`,
		`{"pattern": "^v?(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$"}`} {
		raw, err := Decode(text)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Compile(raw); err != nil {
			t.Fatalf("Compile(%.80s…) = %v", text, err)
		}
	}
}

// bigArgs is an object whose list holds n strings.
func bigArgs(n int) json.RawMessage {
	items := make([]string, n)
	for i := range items {
		items[i] = `""`
	}
	return json.RawMessage(`{"list": [` + strings.Join(items, ",") + `]}`)
}

func TestValidationStopsWhenItsBudgetIsSpent(t *testing.T) {
	t.Parallel()
	// Accepted: every limit of the schema's shape holds. But each of the
	// list's items costs the whole anyOf.
	s := setup(t, nestedRefsAt(8, `"properties": {"list": {"items": {"$ref": "#/$defs/top"}}}`))
	err := s.Validate(bigArgs(2000), nil)
	if !errors.Is(err, ErrTooCostly) || !errors.Is(err, ErrArgs) {
		t.Fatalf("Validate = %v, want ErrTooCostly", err)
	}
	if !strings.Contains(err.Error(), "schema too costly") {
		t.Fatalf("%q does not say the schema is too costly", err)
	}
	// The same schema with few items is checked as usual.
	if err := s.Validate(bigArgs(3), nil); !errors.Is(err, ErrArgs) || errors.Is(err, ErrTooCostly) {
		t.Fatalf("Validate of 3 items = %v, want a field error", err)
	}
}

// FuzzCompile: any JSON either compiles or is refused with ErrInvalid, and
// a schema that compiles checks args with nil, a field error or
// ErrTooCostly, never past MaxWork (the seeds hold the costly shapes).
func FuzzCompile(f *testing.F) {
	for _, s := range []string{nestedRefs(21), nestedRefs(9), wideSchema(MaxExpansion + 1), upgradeSchema,
		nestedRefsAt(8, `"properties": {"list": {"items": {"$ref": "#/$defs/top"}}}`),
		`{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}`, `{"properties": {"c": {"$ref": "#"}}}`,
		`{"$dynamicAnchor": "a", "items": {"$dynamicRef": "#a"}}`, `{"patternProperties": {"^(?:a{1,30}b){1,30}$": {}}}`,
		`{"$schema": "http://json-schema.org/draft-04/schema#", "items": [{"$ref": "#/definitions/x"}], "definitions": {"x": {"type": "string"}}}`,
		`{"dependentSchemas": {"a": {"not": {"$ref": "#"}}}}`, `{"if": {"$ref": "#/$defs/x"}, "then": false, "$defs": {"x": {"const": {"a": [1, 2]}}}}`} {
		f.Add(s, `{"list": ["", "a", {}], "c": {"c": {}}, "a": 1}`)
	}
	f.Fuzz(func(t *testing.T, schema, args string) {
		if !json.Valid([]byte(schema)) {
			return
		}
		s, err := Compile(json.RawMessage(schema))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Compile error not ErrInvalid: %v", err)
			}
			return
		}
		if !json.Valid([]byte(args)) {
			return
		}
		if err := s.Validate(json.RawMessage(args), nil); err != nil && !errors.Is(err, ErrArgs) {
			t.Fatalf("Validate error not ErrArgs: %v", err)
		}
	})
}
