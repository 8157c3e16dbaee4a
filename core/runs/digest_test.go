package runs_test

import (
	"encoding/json"
	"testing"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
)

// TestNodesThatCannotBeDigestedNeverMatch: two different sets of nodes
// never share a digest; nodes whose schema cannot be encoded give an
// error, not a digest equal to that of any other such set.
func TestNodesThatCannotBeDigestedNeverMatch(t *testing.T) {
	t.Parallel()
	a := []store.Node{{ID: "n1", ArgsSchemas: map[string]json.RawMessage{"k": json.RawMessage(`{`)}}}
	b := []store.Node{{ID: "n2", Kinds: []string{"k"}, ArgsSchemas: map[string]json.RawMessage{"k": json.RawMessage(`[`)}}}
	for _, nodes := range [][]store.Node{a, b} {
		if d, err := runs.NodesDigest(nodes); err == nil {
			t.Fatalf("nodes %s with a schema that is not JSON got the digest %q", nodes[0].ID, d)
		}
	}
	good := []store.Node{{ID: "n1", ArgsSchemas: map[string]json.RawMessage{"k": json.RawMessage(`{}`)}}}
	if _, err := runs.NodesDigest(good); err != nil {
		t.Fatal(err)
	}
}
