//go:build !race

package doccheck

// buildFlags: the flags the tests were built with, for go list -export.
var buildFlags []string
