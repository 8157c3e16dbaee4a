//go:build race

package e2e

// raceEnabled: the tests run with -race, so the binary is built with it too
// (the same flags reuse the compiled SQLite).
const raceEnabled = true
