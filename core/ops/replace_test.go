package ops_test

import (
	"context"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/enroll"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
	"net/http"
	"strings"
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

// Issue 33, item 4: web-9 enrolls with a join token asking to replace
// web-3; the enrollment goes through but web-9 takes nothing until an
// admin approves with a replace of web-3 by web-9, which does all a
// replace does and removes the request, the event saying it approved it.
func TestEnrollReplacesWaitsForAnAdminsReplace(t *testing.T) {
	t.Parallel()
	e, _ := setupReplace(t)
	ctx := context.Background()
	pair, err := tlsutil.NewCA(time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tlsutil.ParseCA(pair)
	if err != nil {
		t.Fatal(err)
	}
	svc := enroll.New(enroll.Config{CA: ca, Bundle: pair.CertPEM, Lifetime: time.Hour}, e.st, nil)
	secret, _, err := auth.CreateTokenWith(ctx, e.st, "join", []string{"enroll"}, auth.Options{ClusterID: "prod"}, "root", "")
	if err != nil {
		t.Fatal(err)
	}
	csr, _, err := tlsutil.NewAgentCSR("web-9")
	if err != nil {
		t.Fatal(err)
	}
	req := wire.EnrollRequest{NodeID: "web-9", ClusterID: "prod", CSR: string(csr), Replaces: "web-3"}
	if _, err := svc.Enroll(ctx, secret, req, enroll.Caller{}); err != nil {
		t.Fatal(err)
	}
	// It joins, as gossip shows it.
	now := time.Now().UTC()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: "web-9", Addr: "127.0.0.1:9", Source: store.SourceGossip,
			Status: store.NodeUp, UpdatedTS: now, LastContact: &now})
	}); err != nil {
		t.Fatal(err)
	}
	requests := func() []store.ReplaceRequest {
		var out []store.ReplaceRequest
		if err := e.st.Read(ctx, func(r store.Reader) (err error) {
			out, err = r.ReplaceRequests(ctx, "prod")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	events := func(typ string) []store.Event {
		var out []store.Event
		if err := e.st.Read(ctx, func(r store.Reader) error {
			evs, err := r.Events(ctx, 0, 0)
			for _, ev := range evs {
				if ev.Type == typ {
					out = append(out, ev)
				}
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if q := requests(); len(q) != 1 || q[0].NodeID != "web-9" || q[0].Replaces != "web-3" || q[0].Token != "join" {
		t.Fatalf("requests after the enrollment: %+v", q)
	}
	if evs := events(store.EventNodeReplaceRequested); len(evs) != 1 || evs[0].NodeID != "web-9" ||
		!strings.Contains(evs[0].Message, "muster node replace web-3 --with web-9") {
		t.Fatalf("replace_requested events %+v", evs)
	}
	// Held: web-3 is still missing, web-9 took nothing.
	err = e.st.Read(ctx, func(r store.Reader) error {
		n, err := r.Node(ctx, "prod", "web-9")
		if err != nil {
			return err
		}
		if n.Replaces != "" || n.Labels["role"] == "web" {
			t.Errorf("web-9 before the approval: %+v", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(events(store.EventNodeReplaced)) != 0 {
		t.Fatal("replaced before any approval")
	}

	// An operator may not approve; an admin's replace does.
	if _, _, err := e.ops.ReplaceNode(ctx, operator, "prod", "web-3", "web-9"); err == nil {
		t.Fatal("an operator approved a replace")
	}
	if len(requests()) != 1 {
		t.Fatal("a refused approval removed the request")
	}
	rep, serials, err := e.ops.ReplaceNode(ctx, admin, "prod", "web-3", "web-9")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requested != "web-3" || rep.Place != "web-3" || len(serials) != 1 {
		t.Fatalf("replacement %+v, serials %v", rep, serials)
	}
	if q := requests(); len(q) != 0 {
		t.Fatalf("requests after the approval: %+v", q)
	}
	if evs := events(store.EventNodeReplaced); len(evs) != 1 || !strings.Contains(evs[0].Message, "approving the request web-9 made") {
		t.Fatalf("replaced events %+v", evs)
	}
}

// A replace request names a node or a declared place of the cluster (a
// 400 otherwise, nothing stored), and goes with its node: an enrollment
// again without replaces, a revoke, a forget each remove it.
func TestEnrollReplaceRequestsAreCheckedAndCleanedUp(t *testing.T) {
	t.Parallel()
	e, _ := setupReplace(t)
	ctx := context.Background()
	pair, err := tlsutil.NewCA(time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tlsutil.ParseCA(pair)
	if err != nil {
		t.Fatal(err)
	}
	svc := enroll.New(enroll.Config{CA: ca, Bundle: pair.CertPEM, Lifetime: time.Hour}, e.st, nil)
	secret, _, err := auth.CreateTokenWith(ctx, e.st, "join", []string{"enroll"}, auth.Options{ClusterID: "prod"}, "root", "")
	if err != nil {
		t.Fatal(err)
	}
	boss, _, err := auth.CreateTokenWith(ctx, e.st, "boss", []string{store.RoleAdmin}, auth.Options{}, "root", "")
	if err != nil {
		t.Fatal(err)
	}
	enrollWith := func(secret, replaces string, replace bool) error {
		csr, _, err := tlsutil.NewAgentCSR("web-9")
		if err != nil {
			t.Fatal(err)
		}
		_, err = svc.Enroll(ctx, secret, wire.EnrollRequest{NodeID: "web-9", ClusterID: "prod", CSR: string(csr), Replaces: replaces,
			Replace: replace}, enroll.Caller{})
		return err
	}
	enrollAs := func(replaces string) error { return enrollWith(secret, replaces, false) }
	requests := func() int {
		var out []store.ReplaceRequest
		if err := e.st.Read(ctx, func(r store.Reader) (err error) {
			out, err = r.ReplaceRequests(ctx, "prod")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return len(out)
	}
	if err := enrollAs("nope"); ops.Describe(err).Status != http.StatusBadRequest {
		t.Fatalf("replaces naming no node: %v, want a 400", err)
	}
	if n := requests(); n != 0 {
		t.Fatalf("%d requests after a refused enrollment", n)
	}
	for _, tc := range []struct {
		name string
		end  func() error
	}{
		{"enrolled again without replaces", func() error { return enrollWith(boss, "", true) }},
		{"revoked", func() error {
			return e.st.Update(ctx, func(tx store.Tx) error {
				_, err := enroll.RevokeIn(ctx, tx, "prod", "web-9", "lost", "root", enroll.Caller{}, time.Now())
				return err
			})
		}},
		{"forgotten", func() error {
			now := time.Now().UTC()
			if err := e.st.Update(ctx, func(tx store.Tx) error {
				return tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: "web-9", Addr: "127.0.0.1:9", Source: store.SourceGossip,
					Status: store.NodeUp, UpdatedTS: now, LastContact: &now})
			}); err != nil {
				return err
			}
			_, err := e.ops.ForgetNode(ctx, admin, "prod", "web-9")
			return err
		}},
	} {
		if err := enrollWith(boss, "web-3", true); err != nil {
			t.Fatalf("before %s: %v", tc.name, err)
		}
		if n := requests(); n != 1 {
			t.Fatalf("before %s: %d requests, want 1", tc.name, n)
		}
		if err := tc.end(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n := requests(); n != 0 {
			t.Fatalf("%s: %d requests left, want 0", tc.name, n)
		}
	}
}
