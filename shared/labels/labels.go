// Package labels holds node labels (docs/architecture.md, "Labels, targets and
// the disruption budget"): a small flat map of names to values that an agent
// announces and a target selects on. Keys and values follow the project's name
// rule (letters, digits, '.', '_' and '-'), with bounds small enough for the
// gossip metadata.
package labels

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Bounds of a label set.
const (
	// MaxLabels is the most labels one node may carry.
	MaxLabels = 16
	// MaxKeyLen and MaxValueLen bound one key and one value, in bytes.
	MaxKeyLen   = 63
	MaxValueLen = 63
)

// ErrInvalid is returned (wrapped) for a bad label or selector.
var ErrInvalid = errors.New("invalid label")

// Set is a node's labels.
type Set map[string]string

// validPart reports whether s follows the name rule and is at most max bytes.
func validPart(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidatePair checks one key and value.
func ValidatePair(k, v string) error {
	if !validPart(k, MaxKeyLen) {
		return fmt.Errorf("%w: key %q: 1 to %d letters, digits, '.', '_' or '-'", ErrInvalid, k, MaxKeyLen)
	}
	if !validPart(v, MaxValueLen) {
		return fmt.Errorf("%w: value %q of %s: 1 to %d letters, digits, '.', '_' or '-'", ErrInvalid, v, k, MaxValueLen)
	}
	return nil
}

// Validate checks every pair and the count, returning the first problem in
// key order.
func (s Set) Validate() error {
	if len(s) > MaxLabels {
		return fmt.Errorf("%w: %d labels, at most %d", ErrInvalid, len(s), MaxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(s)) {
		if err := ValidatePair(k, s[k]); err != nil {
			return err
		}
	}
	return nil
}

// Matches reports whether s holds every pair of sel (an empty selector
// matches every set).
func (s Set) Matches(sel Set) bool {
	for k, v := range sel {
		if got, ok := s[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Merge returns base with over laid on top, key by key (over wins). Either
// may be nil; the result is never nil.
func Merge(base, over Set) Set {
	out := make(Set, len(base)+len(over))
	maps.Copy(out, base)
	maps.Copy(out, over)
	return out
}

// Equal reports whether a and b hold the same pairs (nil equals empty).
func Equal(a, b Set) bool { return maps.Equal(a, b) }

// String renders s as k=v pairs in key order, comma-separated.
func (s Set) String() string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(s)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(s[k])
	}
	return b.String()
}

// ParsePair reads one "k=v" selector term.
func ParsePair(s string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("%w: %q is not key=value", ErrInvalid, s)
	}
	if err := ValidatePair(k, v); err != nil {
		return "", "", err
	}
	return k, v, nil
}

// ParseSelector reads "k=v" terms (each may also be a comma list) into a
// selector: a node matches when it holds every pair. The same key twice
// with two values is an error (no node could match).
func ParseSelector(terms []string) (Set, error) {
	sel := Set{}
	for _, t := range terms {
		for _, p := range strings.Split(t, ",") {
			k, v, err := ParsePair(strings.TrimSpace(p))
			if err != nil {
				return nil, err
			}
			if old, ok := sel[k]; ok && old != v {
				return nil, fmt.Errorf("%w: %s=%s and %s=%s cannot both match", ErrInvalid, k, old, k, v)
			}
			sel[k] = v
		}
	}
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	return sel, nil
}
