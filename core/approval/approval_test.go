package approval

import (
	"encoding/json"
	"testing"

	"github.com/musterhq/muster/shared/action"
)

func TestNeedsApproval(t *testing.T) {
	t.Parallel()
	p := DefaultPolicy()
	p.Rules = []Rule{
		{Kind: "muster.io/debug.*", Cluster: "dev-*", Approval: None},
		{Kind: "example.com/*", Approval: Required},
	}
	cases := []struct {
		kind, cluster string
		want          bool
	}{
		{"muster.io/debug.ping", "dev-1", false},
		{"muster.io/debug.ping", "prod", true},
		{"example.com/db.backup", "dev-1", true},
		{"other.io/x", "any", true},
	}
	for _, c := range cases {
		if got := p.NeedsApproval(c.kind, c.cluster); got != c.want {
			t.Errorf("NeedsApproval(%s, %s) = %v, want %v", c.kind, c.cluster, got, c.want)
		}
	}
	p.Default = None
	if p.NeedsApproval("other.io/x", "any") {
		t.Error("default none still requires approval")
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	if errs := DefaultPolicy().Validate(); len(errs) != 0 {
		t.Fatalf("default policy invalid: %v", errs)
	}
	bad := Policy{Default: "maybe", TTL: 0, Rules: []Rule{{Kind: "[", Approval: "x"}}}
	if errs := bad.Validate(); len(errs) != 4 {
		t.Fatalf("want 4 errors, got %d: %v", len(errs), errs)
	}
}

func TestSamePersonIgnoresCase(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		requester, approver string
		want                bool
	}{
		{"alice", "alice", true},
		{"alice", "Alice", true},
		{"ALICE", "alice", true},
		{"alice", "bob", false},
		{"alice", "alice2", false},
		{"db-1/alice", "alice", false},
	} {
		if got := SamePerson(c.requester, c.approver); got != c.want {
			t.Errorf("SamePerson(%q, %q) = %v, want %v", c.requester, c.approver, got, c.want)
		}
	}
}

func TestDigestBindsContent(t *testing.T) {
	t.Parallel()
	a := &action.Action{Kind: "k.io/x", Args: json.RawMessage(`{"a":1,"b":2}`), ClusterID: "c", NodeID: "n"}
	same := *a
	same.Args = json.RawMessage(`{"b":2, "a":1}`)
	if Digest(a) != Digest(&same) {
		t.Error("key order changed the digest")
	}
	for name, mut := range map[string]func(x *action.Action){
		"kind":    func(x *action.Action) { x.Kind = "k.io/y" },
		"args":    func(x *action.Action) { x.Args = json.RawMessage(`{"a":1}`) },
		"cluster": func(x *action.Action) { x.ClusterID = "c2" },
		"node":    func(x *action.Action) { x.NodeID = "n2" },
	} {
		b := *a
		mut(&b)
		if Digest(a) == Digest(&b) {
			t.Errorf("changing %s kept the digest", name)
		}
	}
}
