// Package glob is the one glob rule of the core's configuration: every
// pattern over kinds (approval rules, the disruption budget's kinds), over
// cluster ids and over node ids (a playbook run's limit) is matched here, by
// doublestar's syntax (docs/architecture.md, "Labels, targets and the
// disruption budget").
package glob

import "github.com/bmatcuk/doublestar/v4"

// Match reports whether s (a kind or a cluster id) matches pattern. "*" and
// "?" stay within one "/" segment, "**" as a whole segment crosses "/" (so
// example.com/** covers example.com/os/reboot), and [class] and {a,b} are
// supported. An empty pattern, or a lone "*", matches everything. A pattern
// Valid refuses matches nothing.
func Match(pattern, s string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	ok, err := doublestar.Match(pattern, s)
	return err == nil && ok
}

// Valid reports whether Match can read pattern: no unclosed [ or {, no
// trailing backslash.
func Valid(pattern string) bool { return doublestar.ValidatePattern(pattern) }
