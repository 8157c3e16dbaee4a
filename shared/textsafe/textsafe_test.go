package textsafe

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"plain text, ünïcødé and 日本語", "plain text, ünïcødé and 日本語"},
		{`a\b`, `a\b`},
		{"bob\x1b[31mFORGED", `bob\x1b[31mFORGED`},
		{"done\rFAILED", `done\rFAILED`},
		{"two\nlines\tand a tab", `two\nlines\tand a tab`},
		{"\x00\x07\x08\x1f", `\x00\x07\x08\x1f`},
		{"del\x7f", `del\x7f`},
		{"c1 \u009b31m csi", `c1 \u009b31m csi`},
		{"\u0080\u009f", `\u0080\u009f`},
		{"admin\u202egnp.exe", `admin\u202egnp.exe`},
		{"\u2066\u2067\u2068\u2069\u200e\u200f\u061c", `\u2066\u2067\u2068\u2069\u200e\u200f\u061c`},
		{"raw 8-bit \x9b31m", `raw 8-bit \x9b31m`},
		{"cut \xe2\x82", `cut \xe2\x82`},
		{"\u00a0 no-break space stays", "\u00a0 no-break space stays"},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestJSONEscapesWhatEncodingJSONLeaves(t *testing.T) {
	t.Parallel()
	v := map[string]string{"approved_by": "bob\x1b[31m\r\u009b\x7f\u202eFORGED", "output": "ok\n"}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got := JSON(raw)
	if firstUnsafe(string(got)) >= 0 {
		t.Fatalf("JSON left a control character in %q", got)
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, v) {
		t.Fatalf("escaped document decodes to %q, %v; want %q", back, err, v)
	}
	plain := []byte(`{"a":"b"}`)
	if g := JSON(plain); string(g) != string(plain) {
		t.Fatalf("JSON changed a safe document: %s", g)
	}
}

// FuzzEscape: whatever the input, the result holds nothing a terminal acts
// on, is valid UTF-8, and safe input comes back unchanged. JSON of any value's
// encoding decodes to the same value.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[31m", "\r\n\t", "\u009b", "\u202e", "\xff\xfe", "é\x80", `\x1b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if !utf8.ValidString(e) || firstUnsafe(e) >= 0 {
			t.Fatalf("Escape(%q) = %q still holds something unsafe", s, e)
		}
		if firstUnsafe(s) < 0 && e != s {
			t.Fatalf("Escape changed safe text %q to %q", s, e)
		}
		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		j := JSON(raw)
		var back string
		if err := json.Unmarshal(j, &back); err != nil || firstUnsafe(string(j)) >= 0 {
			t.Fatalf("JSON(%s) = %s: %v", raw, j, err)
		}
		var want string
		_ = json.Unmarshal(raw, &want)
		if back != want {
			t.Fatalf("JSON changed the value: %q, want %q", back, want)
		}
	})
}
