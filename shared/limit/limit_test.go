package limit

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    Limit
		wantErr bool
	}{
		{in: "0", want: Limit{}},
		{in: "3", want: Limit{N: 3}},
		{in: " 10% ", want: Limit{N: 10, Percent: true}},
		{in: "100%", want: Limit{N: 100, Percent: true}},
		{in: "101%", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "-0", wantErr: true},
		{in: "-5%", wantErr: true},
		{in: "+3", wantErr: true},
		{in: "", wantErr: true},
		{in: "%", wantErr: true},
		{in: "1.5", wantErr: true},
		{in: "ten", wantErr: true},
		{in: "2000000", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("Parse(%q) = %v, %v; want ErrInvalid", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestCeilAndFloor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		l           string
		total       int
		ceil, floor int
	}{
		{"10%", 1000, 100, 100},
		{"10%", 15, 2, 1},
		{"1%", 5, 1, 0},
		{"0%", 5, 0, 0},
		{"50%", 0, 0, 0},
		{"3", 2, 3, 3},
		{"100%", 7, 7, 7},
	}
	for _, tc := range cases {
		l := MustParse(tc.l)
		if got := l.Ceil(tc.total); got != tc.ceil {
			t.Errorf("%s.Ceil(%d) = %d, want %d", tc.l, tc.total, got, tc.ceil)
		}
		if got := l.Floor(tc.total); got != tc.floor {
			t.Errorf("%s.Floor(%d) = %d, want %d", tc.l, tc.total, got, tc.floor)
		}
	}
}

func TestJSONReadsNumbersAndStrings(t *testing.T) {
	t.Parallel()
	var v struct{ A, B Limit }
	if err := json.Unmarshal([]byte(`{"A": 2, "B": "25%"}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != (Limit{N: 2}) || v.B != (Limit{N: 25, Percent: true}) {
		t.Fatalf("got %+v", v)
	}
	for _, bad := range []string{`{"A": 2.5}`, `{"A": "200%"}`, `{"A": -1}`, `{"A": true}`} {
		if err := json.Unmarshal([]byte(bad), &v); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
	out, _ := json.Marshal(v)
	if string(out) != `{"A":"2","B":"25%"}` {
		t.Fatalf("marshal: %s", out)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "3", "10%", "100%", "101%", "-1", "", "%", "1e3", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := Parse(s)
		if err != nil {
			return
		}
		if l.N < 0 || l.N > MaxCount || (l.Percent && l.N > 100) {
			t.Fatalf("Parse(%q) accepted %+v", s, l)
		}
		back, err := Parse(l.String())
		if err != nil || back != l {
			t.Fatalf("round trip of %q: %+v, %v", s, back, err)
		}
		if c := l.Ceil(10000); c < l.Floor(10000) {
			t.Fatalf("ceil %d < floor", c)
		}
	})
}
