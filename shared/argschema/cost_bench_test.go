package argschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// worstCases are schemas within every bound with the args that cost them
// the most without passing MaxWork: the figures of the threat model
// (docs/security.md) come from BenchmarkWorstAcceptedSchema.
func worstCases(tb testing.TB) map[string]struct {
	s    *Schema
	args json.RawMessage
} {
	list := func(n int, item string) json.RawMessage {
		return json.RawMessage(`{"list": [` + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + `]}`)
	}
	longPattern := `^(?:[a-z]{1,9}[0-9]{0,9}-){1,26}$` // 965 instructions
	enum := make([]string, 700)
	for i := range enum {
		enum[i] = fmt.Sprintf(`"value-%04d"`, i)
	}
	cases := map[string]struct{ schema, args string }{
		// anyOf of $refs expanded to about MaxExpansion/2 per item; every
		// path fails, so every one is tried and reported.
		"expansion": {nestedRefsAt(9, `"properties": {"list": {"items": {"$ref": "#/$defs/top"}}}`), ""},
		// a large pattern against long strings.
		"pattern": {`{"properties": {"list": {"items": {"pattern": "` + strings.ReplaceAll(longPattern, `\`, `\\`) + `"}}}}`, ""},
		// an enum of 700 values (about 10 KB) against many values.
		"enum": {`{"properties": {"list": {"items": {"enum": [` + strings.Join(enum, ",") + `]}}}}`, ""},
	}
	out := map[string]struct {
		s    *Schema
		args json.RawMessage
	}{}
	for name, c := range cases {
		raw, err := Decode(c.schema)
		if err != nil {
			tb.Fatal(err)
		}
		s, err := Compile(raw)
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		item := map[string]string{"expansion": `""`, "pattern": `"` + strings.Repeat("a1-", 40) + `!"`, "enum": `"nope"`}[name]
		// The most items that pass the budget.
		n := 1
		for hi := 1 << 16; n < hi; {
			mid := (n + hi + 1) / 2
			if errors.Is(s.Validate(list(mid, item), nil), ErrTooCostly) {
				hi = mid - 1
			} else {
				n = mid
			}
		}
		args := list(n, item)
		if len(args) > 64<<10 {
			args = list((64<<10)/(len(item)+1)-4, item)
		}
		out[name] = struct {
			s    *Schema
			args json.RawMessage
		}{s, args}
	}
	return out
}

func BenchmarkWorstAcceptedSchema(b *testing.B) {
	for name, c := range worstCases(b) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.args)))
			for b.Loop() {
				if err := c.s.Validate(c.args, nil); err == nil || errors.Is(err, ErrTooCostly) {
					b.Fatalf("Validate = %v, want a field error", err)
				}
			}
		})
	}
}

// BenchmarkCompileLargest: compiling the largest schemas, the work of a
// node announcing a new one.
func BenchmarkCompileLargest(b *testing.B) {
	props := make([]string, 0, 400)
	for i := 0; i < MaxExpansion-2 && len(strings.Join(props, ",")) < MaxBytes-200; i++ {
		props = append(props, fmt.Sprintf(`"p%d": {"type": "string", "pattern": "^[a-z]{1,%d}$"}`, i, i%60+1))
	}
	for name, text := range map[string]string{
		"properties": `{"properties": {` + strings.Join(props, ",") + `}}`,
		"wide":       wideSchema(MaxExpansion),
		"issue30":    nestedRefs(21),
	} {
		b.Run(name, func(b *testing.B) {
			raw, err := Decode(text)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				_, _ = Compile(raw)
			}
		})
	}
}
