// Package limit reads the limits of runs and budgets: a count ("2") or a
// percentage of a total ("10%"), given in JSON as a number or a string.
package limit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalid is a limit that is neither a count nor a percentage from 0 to 100.
var ErrInvalid = errors.New("invalid limit")

// MaxCount bounds a count, so that no arithmetic on it overflows.
const MaxCount = 1_000_000

// Limit is a count, or a percentage of a total when Percent is set.
type Limit struct {
	N       int
	Percent bool
}

// Parse reads "3" or "25%".
func Parse(s string) (Limit, error) {
	s = strings.TrimSpace(s)
	pct := strings.HasSuffix(s, "%")
	num := strings.TrimSuffix(s, "%")
	n, err := strconv.Atoi(num)
	switch {
	case err != nil || num == "" || num[0] == '+':
		return Limit{}, fmt.Errorf("%w: %q is not a count or a percentage", ErrInvalid, s)
	case n < 0 || num[0] == '-':
		return Limit{}, fmt.Errorf("%w: %q is negative", ErrInvalid, s)
	case pct && n > 100:
		return Limit{}, fmt.Errorf("%w: %q is over 100%%", ErrInvalid, s)
	case n > MaxCount:
		return Limit{}, fmt.Errorf("%w: %q is over %d", ErrInvalid, s, MaxCount)
	}
	return Limit{N: n, Percent: pct}, nil
}

// MustParse is Parse for constants.
func MustParse(s string) Limit {
	l, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return l
}

// String is the form Parse reads.
func (l Limit) String() string {
	if l.Percent {
		return strconv.Itoa(l.N) + "%"
	}
	return strconv.Itoa(l.N)
}

// IsZero reports whether the limit was never set.
func (l Limit) IsZero() bool { return l == Limit{} }

// Floor is the limit over total, a percentage rounded down: 10% of 15 is 1.
func (l Limit) Floor(total int) int {
	if !l.Percent {
		return l.N
	}
	return total * l.N / 100
}

// Ceil is the limit over total, a percentage rounded up, and never below 1
// when total is not 0: 10% of 15 is 2, 1% of 5 is 1.
func (l Limit) Ceil(total int) int {
	if !l.Percent {
		return l.N
	}
	n := (total*l.N + 99) / 100
	if n < 1 && total > 0 && l.N > 0 {
		n = 1
	}
	return n
}

// MarshalJSON writes the string form.
func (l Limit) MarshalJSON() ([]byte, error) { return json.Marshal(l.String()) }

// UnmarshalJSON reads a number (a count) or a string ("3", "10%").
func (l *Limit) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := Parse(s)
		if err != nil {
			return err
		}
		*l = v
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("%w: %s is not a count or a percentage", ErrInvalid, b)
	}
	v, err := Parse(n.String())
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// UnmarshalText lets configuration decoders read a limit from a string.
func (l *Limit) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}
