package jsonbody

import (
	"bytes"
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
	for _, s := range []string{`{}`, `{"a":"x"}`, `{"a":1}`, `{"b":1}`, `[]`, `null`, ``, `{"a":"x"}x`, "\x00", `{"a":"\ud800"}`} {
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
