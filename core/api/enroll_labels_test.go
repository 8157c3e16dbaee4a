package api

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// TestJoinTokenLabels (issue 33, scenario 4): a join token may carry
// labels, validated as node labels are (a 400 that creates nothing
// otherwise, and only on a join token); the answer and the token list show
// them; each certificate it signs records them, a renewal keeps them, and
// the node.enrolled event names them.
func TestJoinTokenLabels(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ts := e.tlsAPI()
	web := map[string]string{"role": "web", "zone": "a"}
	out := e.joinToken("join", wire.CreateTokenRequest{ClusterID: "prod", Labels: web})
	if !maps.Equal(out.Labels, web) {
		t.Fatalf("answer labels = %v", out.Labels)
	}
	for _, c := range []struct {
		name string
		req  wire.CreateTokenRequest
	}{
		{"bad key", wire.CreateTokenRequest{Name: "bad1", Roles: []string{store.RoleEnroll}, ClusterID: "prod", Labels: map[string]string{"ro le": "web"}}},
		{"empty value", wire.CreateTokenRequest{Name: "bad2", Roles: []string{store.RoleEnroll}, ClusterID: "prod", Labels: map[string]string{"role": ""}}},
		{"not a join token", wire.CreateTokenRequest{Name: "bad3", Roles: []string{store.RoleViewer}, Labels: map[string]string{"role": "web"}}},
	} {
		if d := e.fail(http.MethodPost, "/api/v1/tokens", "admin", c.req, http.StatusBadRequest); d.Message == "" {
			t.Errorf("%s: no message", c.name)
		}
	}
	var list wire.TokenList
	e.call(http.MethodGet, "/api/v1/tokens", "admin", nil, http.StatusOK, &list)
	found := false
	for _, tk := range list.Tokens {
		switch tk.Name {
		case "join":
			found = true
			if !maps.Equal(tk.Labels, web) {
				t.Errorf("listed labels = %v", tk.Labels)
			}
		case "bad1", "bad2", "bad3":
			t.Errorf("refused token %s was created", tk.Name)
		}
	}
	if !found {
		t.Fatal("join token not listed")
	}

	csr, key := csrFor(t, "app-1")
	var first wire.EnrollResponse
	e.call(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: "app-1", ClusterID: "prod", CSR: csr}, http.StatusCreated, &first)
	if c := e.certs("app-1"); len(c) != 1 || !maps.Equal(c[0].Labels, web) {
		t.Fatalf("certificates = %+v", c)
	}
	evs := e.nodeEvents(store.EventNodeEnrolled)
	if len(evs) != 1 {
		t.Fatalf("node.enrolled events %+v", evs)
	}
	b, _ := json.Marshal(evs[0].Data["labels"])
	if string(b) != `{"role":"web","zone":"a"}` {
		t.Fatalf("node.enrolled labels = %s (event %+v)", b, evs[0])
	}
	status, body, _ := renew(t, ts, []byte(first.Certificate), key, "app-1")
	var second wire.EnrollResponse
	if err := json.Unmarshal(body, &second); status != http.StatusCreated || err != nil {
		t.Fatalf("renewal: %d %s", status, body)
	}
	c := e.certs("app-1")
	if len(c) != 2 || c[0].Serial != second.Serial || !maps.Equal(c[0].Labels, web) {
		t.Fatalf("certificates after renewal = %+v", c)
	}
}

// TestReenrollingTakesTheNewTokensLabels: a node enrolled again with
// another join token holds that token's labels instead of the first's;
// the labels the core holds for it otherwise (from a replace) stay, over
// the token's.
func TestReenrollingTakesTheNewTokensLabels(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.joinToken("web", wire.CreateTokenRequest{ClusterID: "prod", Labels: map[string]string{"role": "web", "zone": "a"}})
	e.joinToken("api", wire.CreateTokenRequest{ClusterID: "prod", Labels: map[string]string{"role": "api"}})
	csr, _ := csrFor(t, "app-1")
	e.call(http.MethodPost, "/api/v1/enroll", "web", wire.EnrollRequest{NodeID: "app-1", ClusterID: "prod", CSR: csr}, http.StatusCreated, nil)
	// The node joined, and a replace gave it rack=r1 and zone=b.
	e.update(func(ctx context.Context, tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: "app-1", Addr: "10.0.0.9:7001", Source: store.SourceGossip,
			Status: store.NodeUp, Labels: map[string]string{"role": "web", "zone": "b", "rack": "r1", "os": "linux"},
			CoreLabels: map[string]string{"role": "web", "zone": "b", "rack": "r1"}})
	})
	e.call(http.MethodPost, "/api/v1/clusters/prod/nodes/app-1/revoke", "admin", wire.RevokeRequest{Reason: "moved"}, http.StatusOK, nil)
	csr, _ = csrFor(t, "app-1")
	e.call(http.MethodPost, "/api/v1/enroll", "api", wire.EnrollRequest{NodeID: "app-1", ClusterID: "prod", CSR: csr}, http.StatusCreated, nil)
	var n *store.Node
	if err := e.st.Read(context.Background(), func(r store.Reader) (err error) {
		n, err = r.Node(context.Background(), "prod", "app-1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"role": "api", "zone": "b", "rack": "r1"}; !maps.Equal(n.CoreLabels, want) {
		t.Fatalf("core labels = %v, want %v", n.CoreLabels, want)
	}
	if n.Labels["role"] != "api" || n.Labels["os"] != "linux" {
		t.Fatalf("labels = %v", n.Labels)
	}
}
