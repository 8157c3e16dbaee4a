package limit

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestParseAndResolve(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		total   int
		want    int
		percent bool
	}{
		{"0", 10, 0, false},
		{"1", 10, 1, false},
		{" 3 ", 2, 3, false}, // a count is not capped by the total
		{"10%", 100, 10, true},
		{"10%", 1000, 100, true},
		{"10%", 5, 1, true}, // rounded down, but at least 1
		{"25%", 10, 2, true},
		{"100%", 7, 7, true},
		{"0%", 50, 0, true},
		{"50%", 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			t.Parallel()
			l, err := Parse(c.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", c.in, err)
			}
			if !l.IsSet() || l.IsPercent() != c.percent {
				t.Fatalf("Parse(%q) = %+v", c.in, l)
			}
			if got := l.Resolve(c.total); got != c.want {
				t.Errorf("Parse(%q).Resolve(%d) = %d, want %d", c.in, c.total, got, c.want)
			}
		})
	}
}

func TestParseRefusesBadLimits(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "%", "-1", "+1", "101%", "-5%", "1.5", "ten", "10 %", "1e3", "10%%", "1000001"} {
		if l, err := Parse(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %+v, %v; want ErrInvalid", in, l, err)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	var v struct {
		A Limit `json:"a"`
		B Limit `json:"b"`
		C Limit `json:"c"`
	}
	if err := json.Unmarshal([]byte(`{"a": 2, "b": "10%", "c": "3"}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A.String() != "2" || v.B.String() != "10%" || v.C.String() != "3" {
		t.Fatalf("decoded %s %s %s", v.A, v.B, v.C)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"a":"2","b":"10%","c":"3"}` {
		t.Fatalf("encoded %s", b)
	}
	for _, bad := range []string{`{"a": "101%"}`, `{"a": -1}`, `{"a": true}`, `{"a": 1.5}`} {
		if err := json.Unmarshal([]byte(bad), &v); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", bad, err)
		}
	}
}

// FuzzParse checks that Parse never panics, that what it accepts prints back
// to itself, and that Resolve stays within [0, max(count, total)].
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "1", "10%", "100%", "101%", "-1", "", "%", " 7 ", "99999999999999999999"} {
		f.Add(s, 10)
	}
	f.Fuzz(func(t *testing.T, s string, total int) {
		l, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(l.String())
		if err != nil || again != l {
			t.Fatalf("Parse(%q) = %v, which reads back as %v, %v", s, l, again, err)
		}
		if total < 0 || total > MaxCount {
			return
		}
		r := l.Resolve(total)
		if r < 0 || (l.IsPercent() && r > total) || (!l.IsPercent() && r != l.n) {
			t.Fatalf("Parse(%q).Resolve(%d) = %d", s, total, r)
		}
	})
}
