package budget

import (
	"reflect"
	"slices"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
)

func mustLimit(t *testing.T, s string) limit.Limit {
	t.Helper()
	l, err := limit.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func rec(node, kind string, state action.State, pushed string) store.Record {
	return store.Record{Action: action.Action{ID: node + "-" + string(state), ClusterID: "c", NodeID: node, Kind: kind, State: state},
		PushedStoreID: pushed}
}

const (
	restart = "example.com/db.restart"
	ping    = "muster.io/debug.ping"
)

func TestDisruptiveFirstRuleDecides(t *testing.T) {
	t.Parallel()
	p := Policy{Kinds: []KindRule{
		{Kind: "example.com/db.status", Disruptive: false},
		{Kind: "example.com/db.*", Disruptive: true},
	}}
	for kind, want := range map[string]bool{restart: true, "example.com/db.status": false, ping: false, "example.com/web.restart": false} {
		if got := p.Disruptive(kind); got != want {
			t.Errorf("Disruptive(%s) = %v, want %v", kind, got, want)
		}
	}
}

// Issue 17, item 5: a kind rule's glob is the approval rules' glob, so
// example.com/** covers nested kinds such as example.com/os/reboot (path.Match
// matched none of them, and the budget let them all run at once).
func TestNestedKindsMatchTheBudgetsGlob(t *testing.T) {
	t.Parallel()
	p := Policy{Kinds: []KindRule{{Kind: "example.com/os/status", Disruptive: false}, {Kind: "example.com/**", Disruptive: true}}}
	for kind, want := range map[string]bool{"example.com/os/reboot": true, "example.com/a/b/c": true, restart: true,
		"example.com/os/status": false, "example.org/os/reboot": false} {
		if got := p.Disruptive(kind); got != want {
			t.Errorf("Disruptive(%s) = %v, want %v", kind, got, want)
		}
	}
	if errs := ValidateKinds([]KindRule{{Kind: "example.com/**"}, {Kind: "example.com/{a,b"}}); len(errs) != 1 {
		t.Fatalf("ValidateKinds: %v, want one error (the unclosed {)", errs)
	}
}

func TestUsageCountsDownNodesAndDisruptiveActions(t *testing.T) {
	t.Parallel()
	p := Policy{MaxUnavailable: map[string]limit.Limit{"c": mustLimit(t, "40%")},
		Kinds: []KindRule{{Kind: "example.com/db.*", Disruptive: true}}}
	nodes := []store.Node{
		{ID: "n1", Status: store.NodeUp}, {ID: "n2", Status: store.NodeDown}, {ID: "n3", Status: store.NodeUp},
		{ID: "n4", Status: store.NodeUp}, {ID: "n5", Status: store.NodeUnknown}, {ID: "n6", Status: store.NodeUp},
		{ID: "n7", Status: store.NodeUp}, {ID: "n8", Status: store.NodeUp, Drained: true},
	}
	open := []store.Record{
		rec("n1", restart, action.Running, "s"),
		rec("n2", restart, action.New, "s"),               // DOWN already: counted once
		rec("n3", ping, action.Running, "s"),              // not disruptive
		rec("n4", restart, action.PendingSchedule, ""),    // not pushed: not counted
		rec("n6", restart, action.PendingSchedule, "sid"), // pushed, answer not seen: counted
		rec("n7", restart, action.PendingApprove, ""),
	}
	u := p.Usage("c", nodes, open)
	want := map[string]string{"n1": ReasonDisruptive, "n2": ReasonDown, "n6": ReasonPushing, "n8": ReasonDrained}
	if !reflect.DeepEqual(u.Unavailable, want) {
		t.Fatalf("unavailable %v, want %v", u.Unavailable, want)
	}
	if u.Max != 3 || u.Total != 8 { // 40% of 8 = 3.2, rounded down
		t.Fatalf("max %d of %d", u.Max, u.Total)
	}
	if u.Admits("n4") {
		t.Fatal("admitted a fifth unavailable node with a budget of 3")
	}
	if !u.Admits("n1") || !u.Admits("n2") {
		t.Fatal("a node already unavailable must admit another disruptive action")
	}
	if got := u.HeldReason(); got != "held by the disruption budget: 4 of 3 unavailable (n1 disruptive action, n2 down, n6 disruptive action pushed, not yet confirmed, and 1 more)" {
		t.Fatalf("reason %q", got)
	}
	if p.Usage("other", nodes, open) != nil {
		t.Fatal("a cluster without a budget has a usage")
	}
}

func TestAdmitsUpToMax(t *testing.T) {
	t.Parallel()
	p := Policy{MaxUnavailable: map[string]limit.Limit{"c": mustLimit(t, "1")}, Kinds: []KindRule{{Kind: "*", Disruptive: true}}}
	nodes := []store.Node{{ID: "n1", Status: store.NodeUp}, {ID: "n2", Status: store.NodeUp}}
	u := p.Usage("c", nodes, nil)
	if !u.Admits("n1") || !u.Admits("n2") {
		t.Fatal("an idle cluster refuses its first disruptive action")
	}
	u = p.Usage("c", nodes, []store.Record{rec("n1", restart, action.Running, "s")})
	if u.Admits("n2") || !u.Admits("n1") {
		t.Fatalf("with n1 busy: admits n2 %v, n1 %v", u.Admits("n2"), u.Admits("n1"))
	}
	if got := u.HeldReason(); got != "held by the disruption budget: 1 of 1 unavailable (n1 disruptive action)" {
		t.Fatalf("reason %q", got)
	}
	zero := Policy{MaxUnavailable: map[string]limit.Limit{"c": mustLimit(t, "0")}, Kinds: p.Kinds}
	if zero.Usage("c", nodes, nil).Admits("n1") {
		t.Fatal("max_unavailable 0 admitted a disruptive action")
	}
}

func TestValidateKinds(t *testing.T) {
	t.Parallel()
	errs := ValidateKinds([]KindRule{{Kind: "a/b", Disruptive: true}, {Kind: ""}, {Kind: "[x"}})
	if got := errs.Fields(); !slices.Equal(got, []string{"kinds[1].kind", "kinds[2].kind"}) {
		t.Fatalf("bad fields %q (%v)", got, errs)
	}
}

// A stage with any disruptive step holds its nodes in flight: they count
// unavailable for ReasonProcedure, and a stage of harmless kinds does not.
func TestProcedureHoldsNodesInFlight(t *testing.T) {
	p := Policy{MaxUnavailable: map[string]limit.Limit{"c": limit.MustParse("1")},
		Kinds: []KindRule{{Kind: "example.com/upgrade", Disruptive: true}}}
	if !p.Procedure([]string{"example.com/drain", "example.com/upgrade", "example.com/undrain"}) {
		t.Fatal("a procedure with a disruptive step does not hold its nodes")
	}
	if p.Procedure([]string{"example.com/drain", "example.com/undrain"}) || p.Procedure(nil) {
		t.Fatal("a procedure of harmless kinds holds its nodes")
	}
	nodes := []store.Node{{ID: "a", ClusterID: "c"}, {ID: "b", ClusterID: "c"}}
	u := p.UsageWith("c", nodes, nil, map[string]bool{"a": true})
	if u.Unavailable["a"] != ReasonProcedure || len(u.Unavailable) != 1 {
		t.Fatalf("unavailable: %v", u.Unavailable)
	}
	if !u.Admits("a") || u.Admits("b") {
		t.Fatal("the node in flight must admit its own steps and hold another node's")
	}
	if u := p.Usage("c", nodes, nil); len(u.Unavailable) != 0 {
		t.Fatalf("Usage without nodes in flight: %v", u.Unavailable)
	}
}
