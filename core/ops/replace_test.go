package ops_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/live"
)

// setupReplace is setup with gossip nodes web-3 (DOWN, labelled, with an
// enrolled certificate and an action) and web-4 (UP), and a declaration of
// db-1, db-2 and web-3.
func setupReplace(t *testing.T) (*env, string) {
	t.Helper()
	e := setup(t)
	ctx := context.Background()
	now := time.Now().UTC()
	err := e.st.Update(ctx, func(tx store.Tx) error {
		for _, n := range []store.Node{
			{ClusterID: "prod", ID: "web-3", Addr: "127.0.0.1:3", Source: store.SourceGossip, Status: store.NodeDown,
				Labels: map[string]string{"role": "web", "zone": "a"}, Kinds: []string{kindSleep}, UpdatedTS: now, LastContact: &now},
			{ClusterID: "prod", ID: "web-4", Addr: "127.0.0.1:4", Source: store.SourceGossip, Status: store.NodeUp,
				Labels: map[string]string{"zone": "b", "disk": "ssd"}, UpdatedTS: now, LastContact: &now},
			{ClusterID: "prod", ID: "web-5", Addr: "127.0.0.1:5", Source: store.SourceGossip, Status: store.NodeUp,
				UpdatedTS: now, LastContact: &now},
		} {
			if err := tx.PutNode(ctx, &n); err != nil {
				return err
			}
		}
		return tx.InsertAgentCert(ctx, &store.AgentCert{Serial: "0a", ClusterID: "prod", NodeID: "web-3",
			NotBefore: now, NotAfter: now.Add(time.Hour), IssuedTS: now, IssuedBy: "join"})
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := e.create(operator, "web-3")
	e.ops = ops.New(ops.Config{Store: e.st, Policy: e.policy, Nudge: e.syncs,
		Members: live.New(nodes.Membership{"prod": {Nodes: []string{"db-1", "db-2", "web-3"}}})})
	return e, rec.ID
}

// Issue 33, item 4: a replace by an admin moves web-3's place and labels
// to web-4, revokes web-3's certificates, keeps its action readable,
// records who did it, and syncs the cluster; the declared membership is
// whole again.
func TestReplaceNodeTakesThePlaceAndRevokes(t *testing.T) {
	t.Parallel()
	e, actionID := setupReplace(t)
	ctx := context.Background()
	rep, serials, err := e.ops.ReplaceNode(ctx, admin, "prod", "web-3", "web-4")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Place != "web-3" || len(serials) != 1 || serials[0] != "0a" {
		t.Fatalf("replacement %+v, serials %v", rep, serials)
	}
	if got := e.syncs.Take(); len(got) != 1 || got[0] != "prod" {
		t.Fatalf("syncs %v, want the cluster", got)
	}
	err = e.st.Read(ctx, func(r store.Reader) error {
		n, err := r.Node(ctx, "prod", "web-4")
		if err != nil {
			return err
		}
		if n.Labels["role"] != "web" || n.Labels["zone"] != "a" || n.Labels["disk"] != "ssd" || n.Replaces != "web-3" {
			t.Errorf("web-4 after the replace: %+v", n)
		}
		if rec, err := r.Action(ctx, actionID); err != nil || rec.NodeID != "web-3" {
			t.Errorf("web-3's action: %+v, %v", rec, err)
		}
		certs, err := r.AgentCerts(ctx, "prod", "web-3")
		if err != nil || len(certs) != 1 || certs[0].RevokedTS == nil || certs[0].RevokedBy != "root" {
			t.Errorf("web-3's certificates: %+v, %v", certs, err)
		}
		evs, err := r.Events(ctx, 0, 0)
		replaced := 0
		for _, ev := range evs {
			if ev.Type == store.EventNodeReplaced {
				replaced++
				if ev.Actor != "root" || ev.ClientAddr != "192.0.2.9" || ev.NodeID != "web-3" {
					t.Errorf("event %+v", ev)
				}
			}
		}
		if replaced != 1 {
			t.Errorf("%d node.replaced events", replaced)
		}
		all, _ := r.Nodes(ctx, "prod")
		if m := ops.MembersOf(e.ops.Members().Load(), "prod", all, time.Now()); len(m.Missing) != 0 || len(m.Unexpected) != 1 || m.Unexpected[0] != "web-5" {
			t.Errorf("members after the replace %+v", m)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Each refusal is its status with a JSON-able problem, and changes
// nothing.
func TestReplaceNodeRefusals(t *testing.T) {
	t.Parallel()
	e, _ := setupReplace(t)
	ctx := context.Background()
	if _, _, err := e.ops.ReplaceNode(ctx, admin, "prod", "web-3", "web-4"); err != nil {
		t.Fatal(err) // web-4 now holds web-3's place
	}
	e.syncs.Take()
	for _, tc := range []struct {
		name           string
		cluster, o, nw string
		status         int
	}{
		{"NEW unknown", "prod", "web-5", "web-9", http.StatusNotFound},
		{"NEW is OLD", "prod", "web-5", "web-5", http.StatusBadRequest},
		{"OLD not in the cluster", "prod", "web-7", "web-5", http.StatusNotFound},
		{"no such cluster", "nope", "web-5", "web-4", http.StatusNotFound},
		{"NEW already replacing another", "prod", "web-5", "web-4", http.StatusConflict},
		{"OLD's place taken", "prod", "web-3", "web-5", http.StatusConflict},
		{"OLD in the configuration", "prod", "db-1", "web-5", http.StatusConflict},
		{"NEW not a node id", "prod", "web-5", "a b", http.StatusBadRequest},
	} {
		before := e.events()
		_, _, err := e.ops.ReplaceNode(ctx, admin, tc.cluster, tc.o, tc.nw)
		if p := ops.Describe(err); p.Status != tc.status || p.Code == "" || p.Message == "" {
			t.Errorf("%s: %v (%+v), want %d", tc.name, err, p, tc.status)
		}
		if after := e.events(); after != before {
			t.Errorf("%s wrote %d events", tc.name, after-before)
		}
		if got := e.syncs.Take(); len(got) != 0 {
			t.Errorf("%s asked for syncs %v", tc.name, got)
		}
	}
}
