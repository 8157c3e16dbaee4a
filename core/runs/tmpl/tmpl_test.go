package tmpl

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTheGrammarRefusesEveryConstructOutsideIt: loops, definitions,
// variables and every function but the allowed ones are refused at parse,
// naming the construct.
func TestTheGrammarRefusesEveryConstructOutsideIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ tmpl, want string }{
		{`{{range 40000}}{{range 40000}}{{end}}{{end}}true`, "range is not allowed"},
		{`{{range 300}}{{printf "%01000000d" 0}}{{end}}`, "range is not allowed"},
		{`{{printf "%01000000d" 0}}`, `function "printf" is not allowed`},
		{`{{with .a}}x{{end}}`, "with is not allowed"},
		{`{{define "x"}}y{{end}}`, "define and block are not allowed"},
		{`{{block "x" .}}y{{end}}`, "define and block are not allowed"},
		{`{{template "x"}}`, "template and block are not allowed"},
		{`{{index .a "b"}}`, `function "index" is not allowed`},
		{`{{len .a}}`, `function "len" is not allowed`},
		{`{{slice .a 0 1}}`, `function "slice" is not allowed`},
		{`{{call .a}}`, `function "call" is not allowed`},
		{`{{print .a}}`, `function "print" is not allowed`},
		{`{{println .a}}`, `function "println" is not allowed`},
		{`{{js .a}}`, `function "js" is not allowed`},
		{`{{urlquery .a}}`, `function "urlquery" is not allowed`},
		{`{{$x := .a}}{{$x}}`, "variables are not allowed"},
		{`{{$}}`, "variables are not allowed"},
		{`{{if eq .a "b"}}{{range .c}}{{end}}{{end}}`, "range is not allowed"},
		{`{{(.a).b}}`, "is not allowed"},
		{`{{` + strings.Repeat(".a ", MaxNodes) + `}}`, "more than 64"},
	} {
		if _, err := Parse(tc.tmpl, MissingZero, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want %q", tc.tmpl, err, tc.want)
		}
	}
	for _, ok := range []string{
		`{{ .a }}`, `{{ eq .steps.x.state "DONE" }}`, `{{ if and (ne .a "b") (not .c) }}x{{ else }}y{{ end }}`,
		`{{ if .a }}x{{ end }}`, `{{ lower .a | upper }}`, `{{/* a comment */}}true`, `{{ lt 1 2 }}`, `{{ . }}`,
	} {
		if _, err := Parse(ok, MissingZero, nil); err != nil {
			t.Errorf("Parse(%q) = %v, want it accepted", ok, err)
		}
	}
}

// TestAFieldCheckRefusesWithItsOwnReason: the caller decides which fields
// exist.
func TestAFieldCheckRefusesWithItsOwnReason(t *testing.T) {
	t.Parallel()
	_, err := Parse(`{{ if .a }}{{ .b.c }}{{ end }}`, MissingZero, func(ident []string) error {
		if ident[0] == "b" {
			return errors.New("no b")
		}
		return nil
	})
	if err == nil || err.Error() != "template: no b" {
		t.Fatalf("got %v, want the field's own error", err)
	}
}

// TestARenderStopsAtTheFirstWritePastItsBudget: the writer refuses the
// write that passes the bytes left, and a budget is shared by the renders
// that use it.
func TestARenderStopsAtTheFirstWritePastItsBudget(t *testing.T) {
	t.Parallel()
	tp, err := Parse(strings.Repeat("{{ .a }}", 25)+strings.Repeat("x", 750), MissingZero, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{"a": strings.Repeat("x", 10)}
	b := NewBudget(1500)
	if s, err := b.Render(tp, data); err != nil || len(s) != 1000 {
		t.Fatalf("first render: %d bytes, %v", len(s), err)
	}
	if _, err := b.Render(tp, data); !errors.Is(err, ErrBound) || !strings.Contains(err.Error(), "more than 1500 bytes") {
		t.Fatalf("second render past the budget: %v", err)
	}
	if err := NewBudget(999).Try(tp, data); !errors.Is(err, ErrBound) {
		t.Fatalf("Try past the budget: %v", err)
	}
	if err := NewBudget(1000).Try(tp, data); err != nil {
		t.Fatalf("Try within the budget: %v", err)
	}
}

// TestARenderPastItsTimeStops: the budget's clock is read at every write.
func TestARenderPastItsTimeStops(t *testing.T) {
	t.Parallel()
	tp, err := Parse(strings.Repeat("x{{ .a }}", 10), MissingZero, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	calls := 0
	b := NewBudget(1 << 20)
	b.now = func() time.Time { // each read of the clock is ten seconds later
		calls++
		return start.Add(time.Duration(calls) * 10 * time.Second)
	}
	if _, err := b.Render(tp, map[string]any{"a": "y"}); !errors.Is(err, ErrBound) || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("got %v, want the time budget's error", err)
	}
	if calls != 2 {
		t.Fatalf("the clock was read %d times: the render went on past its deadline", calls)
	}
}

// TestReadsListsEachFieldOnceAndTheWholeData: what a template reads, each
// field once, and whether it reads its data whole.
func TestReadsListsEachFieldOnceAndTheWholeData(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s      string
		fields []string
		whole  bool
	}{
		{`{{ or (eq .node.labels.x "a") (eq .node.labels.x "b") (eq .params.p "c") }}`, []string{"node.labels.x", "params.p"}, false},
		{`{{ if .a }}{{ . }}{{ end }}`, []string{"a"}, true},
		{`plain`, nil, false},
	} {
		tp, err := Parse(c.s, MissingZero, nil)
		if err != nil {
			t.Fatal(err)
		}
		fields, whole := Reads(tp)
		var got []string
		for _, f := range fields {
			got = append(got, strings.Join(f, "."))
		}
		if !slices.Equal(got, c.fields) || whole != c.whole {
			t.Errorf("%s reads %v (whole: %t); want %v (whole: %t)", c.s, got, whole, c.fields, c.whole)
		}
	}
}

// TestASecretRendersAsItsReference: {{ secret "NAME" }} renders as the
// reference itself, whatever its spacing, so that the core never holds a
// value; a name that is not plain, or a secret that does not stand alone,
// is refused at parse.
func TestASecretRendersAsItsReference(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`{{ secret "db-password" }}`, `{{secret "db-password"}}`, `{{- secret "db-password" -}}`} {
		tp, err := Parse("user:"+s+"@"+`{{ if .a }}{{ secret "other" }}{{ end }}`, MissingZero, nil)
		if err != nil {
			t.Fatalf("Parse(%s): %v", s, err)
		}
		got, err := NewBudget(1<<10).Render(tp, map[string]any{"a": true})
		if want := `user:{{ secret "db-password" }}@{{ secret "other" }}`; err != nil || got != want {
			t.Fatalf("Render(%s) = %q, %v; want %q", s, got, err, want)
		}
		// Rendered again (a playbook's render, then the run's), it stays.
		tp, err = Parse(got, MissingZero, nil)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := NewBudget(1<<10).Render(tp, nil); again != got {
			t.Fatalf("a second render gave %q, not %q", again, got)
		}
	}
	for _, tc := range []struct{ tmpl, want string }{
		{`{{ secret "../etc/shadow" }}`, "not a plain name"},
		{`{{ secret "DB" }}`, "not a plain name"},
		{`{{ secret "db.password" }}`, "not a plain name"},
		{`{{ secret .name }}`, "a name in quotes"},
		{`{{ secret "a" "b" }}`, "one name"},
		{`{{ secret }}`, "one name"},
		{`{{ "a" | secret }}`, "stands alone"},
		{`{{ secret "a" | upper }}`, "stands alone"},
		{`{{ upper (secret "a") }}`, "stands alone"},
		{`{{ if eq (secret "a") "x" }}y{{ end }}`, "stands alone"},
	} {
		_, err := Parse(tc.tmpl, MissingZero, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v; want an error saying %q", tc.tmpl, err, tc.want)
		}
	}
}
