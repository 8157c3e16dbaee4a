package approval

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestRequiredRuleWithDoubleStarCoversNestedKinds: with path.Match, "*"
// never crosses "/", so a required rule for example.com/* left
// example.com/db/backup to default: none, and it skipped approval. "**"
// crosses "/"; "*" still does not (documented).
func TestRequiredRuleWithDoubleStarCoversNestedKinds(t *testing.T) {
	t.Parallel()
	deep := Policy{Default: None, TTL: time.Hour, Rules: []Rule{{Kind: "example.com/**", Approval: Required}}}
	shallow := Policy{Default: None, TTL: time.Hour, Rules: []Rule{{Kind: "example.com/*", Approval: Required}}}
	for _, p := range []Policy{deep, shallow} {
		if errs := p.Validate(); len(errs) != 0 {
			t.Fatalf("%+v: %v", p.Rules, errs)
		}
	}
	cases := []struct {
		p    Policy
		kind string
		want bool
	}{
		{deep, "example.com/db/backup", true},
		{deep, "example.com/db.backup", true},
		{deep, "example.com/a/b/c/d", true},
		{deep, "example.org/db/backup", false},
		{deep, "other.io/example.com/db", false},
		{shallow, "example.com/db.backup", true},
		{shallow, "example.com/db/backup", false},
	}
	for _, c := range cases {
		if got := c.p.NeedsApproval(c.kind, "prod"); got != c.want {
			t.Errorf("rule %q: NeedsApproval(%s) = %v, want %v", c.p.Rules[0].Kind, c.kind, got, c.want)
		}
	}
	// Braces and classes are glob syntax too.
	p := Policy{Default: None, TTL: time.Hour, Rules: []Rule{{Kind: "{example.com,example.org}/db/**", Cluster: "prod-[0-9]", Approval: Required}}}
	if !p.NeedsApproval("example.org/db/backup", "prod-1") || p.NeedsApproval("example.org/db/backup", "prod-x") {
		t.Error("alternatives and classes do not match as documented")
	}
}

// TestValidateRefusesBadGlobsWithOneClearError: a pattern the matcher cannot
// read is refused at load, one error naming the rule, the field and the
// pattern, instead of a rule that silently never matches.
func TestValidateRefusesBadGlobsWithOneClearError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ kind, cluster, field string }{
		{"example.com/[db", "", "approval.rules[0].kind"},
		{"example.com/{db", "", "approval.rules[0].kind"},
		{"example.com/**", "prod-[", "approval.rules[0].cluster"},
		{`example.com/db\`, "", "approval.rules[0].kind"},
	} {
		p := Policy{Default: Required, TTL: time.Hour, Rules: []Rule{{Kind: c.kind, Cluster: c.cluster, Approval: Required}}}
		errs := p.Validate()
		bad := c.kind
		if c.cluster != "" {
			bad = c.cluster
		}
		if len(errs) != 1 || errs[0].Field != c.field || !strings.Contains(errs[0].Problem, strconv.Quote(bad)) {
			t.Errorf("kind %q cluster %q: %v, want one error on %s naming the pattern", c.kind, c.cluster, errs, c.field)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	if errs := DefaultPolicy().Validate(); len(errs) != 0 {
		t.Fatalf("default policy invalid: %v", errs)
	}
	bad := Policy{Default: "maybe", TTL: 0, Rules: []Rule{{Kind: "[", Approval: "x"}}}
	want := []string{"approval.default", "approval.ttl", "approval.rules[0].approval", "approval.rules[0].kind"}
	if got := bad.Validate().Fields(); !slices.Equal(got, want) {
		t.Fatalf("bad fields %q, want %q", got, want)
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

// MayApprove is the one rule of who may decide: not the requester (names
// ignoring case) nor the playbook's applier unless self-approval is on, and
// only with the approver role.
func TestMayApprove(t *testing.T) {
	t.Parallel()
	strict, lax := DefaultPolicy(), DefaultPolicy()
	lax.SelfApproval = true
	for _, c := range []struct {
		name                         string
		p                            Policy
		requester, applier, approver string
		role                         bool
		want                         Refusal
	}{
		{"another approver", strict, "alice", "", "bob", true, MayDecide},
		{"the requester", strict, "alice", "", "Alice", true, OwnRequest},
		{"the requester, self-approval on", lax, "alice", "", "alice", true, MayDecide},
		{"the applier", strict, "alice", "carol", "CAROL", true, AppliedPlaybook},
		{"the applier, self-approval on", lax, "alice", "carol", "carol", true, MayDecide},
		{"without the role", strict, "alice", "", "bob", false, NoRole},
		{"the requester without the role", strict, "alice", "", "alice", false, OwnRequest},
	} {
		if got := c.p.MayApprove(c.requester, c.applier, c.approver, c.role); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
