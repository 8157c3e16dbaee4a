package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeIsStrict(t *testing.T) {
	t.Parallel()
	type body struct {
		A string `json:"a"`
	}
	for name, tc := range map[string]struct {
		in   string
		want string
	}{
		"empty":          {"", "empty body"},
		"unknown field":  {`{"a":"x","b":1}`, `"b"`},
		"trailing data":  {`{"a":"x"} {}`, "trailing data"},
		"not an object":  {`[1]`, ""},
		"malformed JSON": {`{"a":`, ""},
	} {
		var b body
		err := Decode([]byte(tc.in), &b)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Decode(%q) = %v, want ErrInvalid mentioning %q", name, tc.in, err, tc.want)
		}
	}
	var b body
	if err := Decode([]byte(` {"a":"x"} `), &b); err != nil || b.A != "x" {
		t.Fatalf("a good body: %+v, %v", b, err)
	}
}

// Issue 17, hardening: a key given twice, or one that names a field only
// when case is ignored, is refused, at any depth; free-form objects (a map,
// a json.RawMessage) are checked for duplicates too.
func TestJSONBodiesRefuseDuplicateAndCaseFoldedKeys(t *testing.T) {
	t.Parallel()
	type inner struct {
		N int `json:"n"`
	}
	type embedded struct {
		E string `json:"e"`
	}
	type body struct {
		embedded
		A     string           `json:"a"`
		In    *inner           `json:"in"`
		List  []inner          `json:"list"`
		M     map[string]inner `json:"m"`
		Raw   json.RawMessage  `json:"raw"`
		Plain string
	}
	for name, tc := range map[string]struct{ in, want string }{
		"duplicate":               {`{"a":"x","a":"y"}`, `key "a" appears twice in the body`},
		"case folded":             {`{"A":"x"}`, `key "A" in the body: the field is "a"`},
		"case folded embedded":    {`{"E":"x"}`, `the field is "e"`},
		"case folded untagged":    {`{"plain":"x"}`, `the field is "Plain"`},
		"case folded nested":      {`{"in":{"N":1}}`, `key "N" in in: the field is "n"`},
		"case folded in a list":   {`{"list":[{"n":1},{"N":2}]}`, `in list[1]`},
		"case folded in a map":    {`{"m":{"k":{"N":2}}}`, `in m.k`},
		"duplicate in a map":      {`{"m":{"k":{},"k":{}}}`, `key "k" appears twice in m`},
		"duplicate in free-form":  {`{"raw":{"x":1,"x":2}}`, `key "x" appears twice in raw`},
		"duplicate, escaped form": {`{"a":"x","\u0061":"y"}`, `appears twice`},
	} {
		var b body
		err := Decode([]byte(tc.in), &b)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Decode(%s) = %v, want ErrInvalid mentioning %q", name, tc.in, err, tc.want)
		}
	}
	var b body
	if err := Decode([]byte(`{"a":"x","e":"y","Plain":"z","in":{"n":1},"list":[{"n":2}],"m":{"K":{"n":3},"k":{"n":4}},"raw":{"X":1,"x":2}}`), &b); err != nil {
		t.Fatalf("a good body: %v", err)
	}
}

func TestReadStopsAtTheLimit(t *testing.T) {
	t.Parallel()
	if _, err := Read(bytes.NewReader(make([]byte, 11)), 10); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("11 bytes over a limit of 10: %v", err)
	}
	if b, err := Read(bytes.NewReader(make([]byte, 10)), 10); err != nil || len(b) != 10 {
		t.Fatalf("10 bytes within a limit of 10: %d, %v", len(b), err)
	}
}

// FuzzDecode: any input either decodes or is ErrInvalid, never a panic or
// another error.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"x"}`, `{"a":1}`, `{"b":1}`, `[]`, `null`, ``, `{"a":"x"}x`, "\x00", `{"a":"\ud800"}`,
		`{"a":"x","a":"y"}`, `{"A":"x"}`, `{"a":"x","\u0041":"y"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var v struct {
			A string `json:"a"`
		}
		if err := Decode(in, &v); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("Decode(%q) = %v", in, err)
		}
	})
}

// TextSize is the length of the value's JSON encoding for strings without
// escapes, objects and arrays (give or take a space a key), and counts
// every other value by its printed length.
func TestTextSizeIsAboutTheEncodedLength(t *testing.T) {
	t.Parallel()
	for _, text := range []string{`"abc"`, `{"a":"b","c":["d","e"]}`, `[1,true,null,"x"]`, `{"n":12345}`} {
		var v any
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			t.Fatal(err)
		}
		if got := TextSize(v); got < len(text) || got > len(text)+8 {
			t.Errorf("TextSize(%s) = %d, want about %d", text, got, len(text))
		}
	}
}
