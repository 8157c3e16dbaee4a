package tmpl

import (
	"strings"
	"testing"
)

// The worst templates the grammar accepts, for the figures of
// docs/security.md: the most comparisons a template may hold, and a long
// text with the most fields (each printing a 4 KiB value).
var (
	worstWhen = "{{ or" + strings.Repeat(` (eq .node.labels.x "y")`, MaxNodes/3-1) + " }}"
	worstArgs = strings.Repeat("x", 60<<10) + strings.Repeat("{{ .v }}", MaxNodes/2)
)

func BenchmarkWorstWhen(b *testing.B) {
	t, err := Parse(worstWhen, MissingZero, nil)
	if err != nil {
		b.Fatal(err)
	}
	data := map[string]any{"node": map[string]any{"id": "n1", "labels": map[string]string{"x": "z"}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewBudget(1<<10).Render(t, data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWorstArgs(b *testing.B) {
	t, err := Parse(worstArgs, MissingZero, nil)
	if err != nil {
		b.Fatal(err)
	}
	data := map[string]any{"v": strings.Repeat("y", 4<<10)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewBudget(64<<10).Render(t, data); err == nil {
			b.Fatal("rendered past 64 KiB")
		}
	}
}

func BenchmarkWorstParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(worstWhen, MissingZero, nil); err != nil {
			b.Fatal(err)
		}
	}
}
