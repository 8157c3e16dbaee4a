package action

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNormalizeArgs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
		wantErr        bool
	}{
		{"empty", "", "{}", false},
		{"null", "null", "{}", false},
		{"sorted", `{"b":1, "a":"x"}`, `{"a":"x","b":1}`, false},
		{"big number kept", `{"n":12345678901234567890}`, `{"n":12345678901234567890}`, false},
		{"array", `[1,2]`, "", true},
		{"string", `"x"`, "", true},
		{"number", `3`, "", true},
		{"garbage", `{`, "", true},
		{"too big", `{"a":"` + strings.Repeat("x", MaxArgs) + `"}`, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := NormalizeArgs(json.RawMessage(c.in))
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, c.wantErr)
			}
			if !c.wantErr && string(got) != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

func TestSameContent(t *testing.T) {
	t.Parallel()
	a := &Action{Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1,"x":2}`)}
	b := &Action{Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"x":2, "seconds":1}`)}
	c := &Action{Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":2}`)}
	d := &Action{Kind: "muster.io/debug.ping", Args: json.RawMessage(`{"seconds":1,"x":2}`)}
	if !SameContent(a, b) {
		t.Error("same args in another key order are not the same content")
	}
	if SameContent(a, c) || SameContent(a, d) {
		t.Error("different args or kind reported as the same content")
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	if !ValidID(NewID()) {
		t.Fatal("NewID is not valid")
	}
	for _, bad := range []string{"", "abc", "3F0C8A52-7E4E-4A8E-9A4E-4F5A3B0F2C11", "{3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11}", "3f0c8a527e4e4a8e9a4e4f5a3b0f2c11"} {
		if ValidID(bad) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
}

func TestValidKind(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"muster.io/debug.ping", "example.com/db.backup", "a/b"} {
		if !ValidKind(ok) {
			t.Errorf("ValidKind(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "ping", "/x", "Muster.io/x", "a/b c", "a/"} {
		if ValidKind(bad) {
			t.Errorf("ValidKind(%q) = true", bad)
		}
	}
}

func TestClipOutput(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("é", MaxOutput) // 2 bytes each
	got := ClipOutput(s)
	if len(got) > MaxOutput || !utf8.ValidString(got) {
		t.Fatalf("clipped output is %d bytes, valid utf8 %v", len(got), utf8.ValidString(got))
	}
	if ClipOutput("short") != "short" {
		t.Fatal("short output changed")
	}
}

func TestNormalizeArgsRefusesDeepNesting(t *testing.T) {
	t.Parallel()
	nest := func(n int) string {
		return `{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`
	}
	if _, err := NormalizeArgs(json.RawMessage(nest(MaxArgsDepth))); err != nil {
		t.Fatalf("%d levels: %v", MaxArgsDepth, err)
	}
	if _, err := NormalizeArgs(json.RawMessage(nest(MaxArgsDepth + 1))); !errors.Is(err, ErrInvalid) {
		t.Fatalf("%d levels: %v, want ErrInvalid", MaxArgsDepth+1, err)
	}
}
