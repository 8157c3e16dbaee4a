package core

import (
	"errors"
	"testing"
)

// TestRejectedReloadIsOneReadableLine: a configuration report of several
// lines becomes the core.config_rejected event's one line, each field
// separated by "; " (it once read "invalid configuration:; clusters…").
func TestRejectedReloadIsOneReadableLine(t *testing.T) {
	t.Parallel()
	err := errors.New("invalid configuration:\n  clusters[0].windows[0].duration: \"9d\" is not a duration\n  clusters[0].windows[0].timezone: bad")
	want := `invalid configuration: clusters[0].windows[0].duration: "9d" is not a duration; clusters[0].windows[0].timezone: bad`
	if got := oneLine(err); got != want {
		t.Fatalf("oneLine = %q, want %q", got, want)
	}
	if got := oneLine(errors.New("store: gone")); got != "store: gone" {
		t.Fatalf("oneLine of one line = %q", got)
	}
}
