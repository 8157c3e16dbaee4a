package core

import (
	"errors"
	"testing"

	"github.com/musterhq/muster/core/nodes"
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

// Issue 33, item 3: a cluster's expect block reloads (it is not a section
// that needs a restart), and the reloaded configuration declares it.
func TestExpectReloadsWithoutARestart(t *testing.T) {
	t.Parallel()
	old := validConfig()
	next := validConfig()
	next.Clusters[0].Expect = &nodes.Expect{Count: 2, Selector: map[string]string{"role": "replica"}}
	if got := needsRestart(old, next); len(got) != 0 {
		t.Fatalf("an expect change needs a restart of %v", got)
	}
	kept := withBudgets(old.Clusters, next)
	if kept[0].Expect == nil || kept[0].Expect.Count != 2 {
		t.Fatalf("the reloaded clusters lost expect: %+v", kept[0])
	}
	if m := next.Membership(); m[next.Clusters[0].ID].Count != 2 || len(old.Membership()) != 0 {
		t.Fatalf("membership %v / %v", m, old.Membership())
	}
	next.Clusters[0].Nodes = next.Clusters[0].Nodes[:1]
	if got := needsRestart(old, next); len(got) != 1 || got[0] != "clusters" {
		t.Fatalf("a node list change needs a restart of %v", got)
	}
}
