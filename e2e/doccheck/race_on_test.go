//go:build race

package doccheck

// buildFlags: the tests run with -race, so go list asks for the export data
// of the race build, which the tests' own build left in the cache.
var buildFlags = []string{"-race"}
