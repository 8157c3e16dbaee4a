package labels

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	ok := Set{"role": "replica", "zone": "eu-1", "rack_2.b": "A-9"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	too := Set{}
	for i := range MaxLabels + 1 {
		too[strings.Repeat("k", i+1)] = "v"
	}
	for name, s := range map[string]Set{
		"empty key":   {"": "x"},
		"empty value": {"role": ""},
		"space":       {"ro le": "x"},
		"slash":       {"a/b": "x"},
		"html":        {"role": "<b>"},
		"long key":    {strings.Repeat("k", MaxKeyLen+1): "x"},
		"long value":  {"k": strings.Repeat("v", MaxValueLen+1)},
		"too many":    too,
		"unicode":     {"rôle": "x"},
	} {
		if err := s.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate(%v) = %v, want ErrInvalid", name, s, err)
		}
	}
}

func TestMatchesAndMerge(t *testing.T) {
	t.Parallel()
	s := Set{"role": "replica", "zone": "eu-1"}
	for sel, want := range map[string]bool{"role=replica": true, "role=replica,zone=eu-1": true, "role=primary": false, "dc=x": false} {
		p, err := ParseSelector([]string{sel})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Matches(p); got != want {
			t.Errorf("%v matches %s = %v, want %v", s, sel, got, want)
		}
	}
	m := Merge(Set{"role": "replica", "dc": "a"}, Set{"role": "primary"})
	if !Equal(m, Set{"role": "primary", "dc": "a"}) {
		t.Fatalf("Merge = %v: the second set must win key by key", m)
	}
	if m.String() != "dc=a,role=primary" {
		t.Fatalf("String = %q", m.String())
	}
	if Merge(nil, nil) == nil {
		t.Fatal("Merge of nothing is nil")
	}
}

func TestParseSelectorRefuses(t *testing.T) {
	t.Parallel()
	for _, terms := range [][]string{{"role"}, {"=x"}, {"role="}, {"role=a", "role=b"}, {"ro le=x"}, {"a=b,,c=d"}} {
		if sel, err := ParseSelector(terms); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseSelector(%q) = %v, %v; want ErrInvalid", terms, sel, err)
		}
	}
	sel, err := ParseSelector([]string{"role=a", "zone=b,dc=c", "role=a"})
	if err != nil || len(sel) != 3 {
		t.Fatalf("ParseSelector = %v, %v", sel, err)
	}
}

// FuzzParseSelector checks that no query term makes the selector parser
// panic, and that what it accepts is within bounds and prints back to
// itself.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"role=replica", "role=replica,zone=eu-1", "role", "=x", "a=b,a=c", "", ",", "k=v=w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseSelector([]string{s})
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseSelector(%q): %v is not ErrInvalid", s, err)
			}
			return
		}
		if err := sel.Validate(); err != nil {
			t.Fatalf("ParseSelector(%q) accepted %v: %v", s, sel, err)
		}
		again, err := ParseSelector([]string{sel.String()})
		if err != nil || !Equal(again, sel) {
			t.Fatalf("%v prints as %q, which reads back as %v, %v", sel, sel.String(), again, err)
		}
	})
}
