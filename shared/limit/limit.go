// Package limit reads the bounds people write as a count or a percentage
// ("2", "10%"): a disruption budget's max_unavailable, a run's
// max_concurrency and max_errors. One parser, one rounding rule.
package limit

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalid is returned (wrapped) for a limit that is neither a count nor a
// percentage from 0 to 100.
var ErrInvalid = errors.New("invalid limit")

// MaxCount bounds a count, so that arithmetic on it never overflows.
const MaxCount = 1_000_000

// Limit is a count or a percentage of a total. The zero Limit is unset.
type Limit struct {
	n       int
	percent bool
	set     bool
}

// Count returns the limit of n (0 ≤ n ≤ MaxCount).
func Count(n int) (Limit, error) {
	if n < 0 || n > MaxCount {
		return Limit{}, fmt.Errorf("%w: %d is not a count from 0 to %d", ErrInvalid, n, MaxCount)
	}
	return Limit{n: n, set: true}, nil
}

// Percent returns the limit of p percent (0 ≤ p ≤ 100).
func Percent(p int) (Limit, error) {
	if p < 0 || p > 100 {
		return Limit{}, fmt.Errorf("%w: %d%% is not a percentage from 0%% to 100%%", ErrInvalid, p)
	}
	return Limit{n: p, percent: true, set: true}, nil
}

// Parse reads "N" (a count) or "N%" (a percentage, 0 to 100). Spaces around
// are ignored; anything else is an error.
func Parse(s string) (Limit, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	num := strings.TrimSuffix(t, "%")
	if num == "" || strings.ContainsAny(num, "+- ") {
		return Limit{}, fmt.Errorf("%w: %q is not a count (2) or a percentage (10%%)", ErrInvalid, s)
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return Limit{}, fmt.Errorf("%w: %q is not a count (2) or a percentage (10%%)", ErrInvalid, s)
	}
	if pct {
		return Percent(n)
	}
	return Count(n)
}

// IsSet reports whether the limit was given.
func (l Limit) IsSet() bool { return l.set }

// IsPercent reports whether the limit is a percentage.
func (l Limit) IsPercent() bool { return l.percent }

// Resolve returns the limit as a count of total: a count as is, a
// percentage of total rounded down, but never below 1 when the percentage
// and total are above zero (10% of 5 nodes is 1, so that a small cluster
// can still make progress). A count is not capped by total.
func (l Limit) Resolve(total int) int {
	if !l.percent {
		return l.n
	}
	if total <= 0 || l.n == 0 {
		return 0
	}
	return max(1, total*l.n/100)
}

// String is the form Parse reads ("" when unset).
func (l Limit) String() string {
	switch {
	case !l.set:
		return ""
	case l.percent:
		return strconv.Itoa(l.n) + "%"
	}
	return strconv.Itoa(l.n)
}

// MarshalText writes the form Parse reads.
func (l Limit) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads what Parse reads; empty text is the unset Limit.
func (l *Limit) UnmarshalText(b []byte) error {
	if strings.TrimSpace(string(b)) == "" {
		*l = Limit{}
		return nil
	}
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// UnmarshalJSON accepts a JSON number (a count) or a string ("2", "10%").
func (l *Limit) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		return l.UnmarshalText([]byte(s))
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("%w: %s is not a count or a percentage string", ErrInvalid, b)
	}
	return l.UnmarshalText([]byte(n.String()))
}
