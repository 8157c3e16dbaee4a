package ui

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/onalert"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/live"
)

// Issue 33, item 3 on the Clusters page: the missing and the unexpected
// nodes, escaped.
func TestClustersPageShowsDeclaredMembers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.ui.ops = ops.New(ops.Config{Store: e.st, Members: live.New(nodes.Membership{"prod": {Nodes: []string{"db-1", "db-2"}}})})
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: "<b>web</b>", Addr: "127.0.0.1:2", Source: store.SourceGossip,
			Status: store.NodeUp})
	}); err != nil {
		t.Fatal(err)
	}
	status, _, body := e.browser().signIn("viewer").get("/ui/clusters")
	if status != http.StatusOK {
		t.Fatalf("clusters: %d\n%s", status, body)
	}
	for _, want := range []string{`<strong class="members-missing">missing</strong> <code>db-2</code> (never seen)`,
		`unexpected</span> (seen, not declared): <a class="node-link"`, `&lt;b&gt;web&lt;/b&gt;</a>.`} {
		if !strings.Contains(body, want) {
			t.Errorf("the clusters page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>web") {
		t.Fatal("an unexpected node's id is not escaped")
	}
}

// Issue 33, item 6 on the Clusters page: the on_alert playbook, that it
// waits for an approval, then who approved it.
func TestClustersPageShowsTheOnAlertPlaybook(t *testing.T) {
	t.Parallel()
	e := setup(t)
	oa := &nodes.OnAlert{Playbook: "heal"}
	e.ui.ops = ops.New(ops.Config{Store: e.st, Members: live.New(nodes.Membership{"prod": {Nodes: []string{"db-1"}, OnAlert: oa}})})
	ctx := context.Background()
	doc := "name: heal\nparams: [{name: missing, type: string}]\nstages:\n  - {name: a, kind: muster.io/debug.ping, target: {all: true}}\n"
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		return tx.InsertPlaybook(ctx, &store.Playbook{Name: "heal", Version: 1, Document: doc, Digest: playbook.Digest(doc), CreatedBy: "root"})
	}); err != nil {
		t.Fatal(err)
	}
	b := e.browser().signIn("viewer")
	_, _, body := b.get("/ui/clusters")
	if !strings.Contains(body, `On alert: playbook <code>heal</code> v1; <strong class="on-alert-problem">not approved`) {
		t.Fatalf("the clusters page before the approval:\n%s", body)
	}
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		_, err := onalert.Approve(ctx, tx, "prod", oa, "", actions.Actor{Name: "bob"}, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, body = b.get("/ui/clusters"); !strings.Contains(body, `On alert: playbook <code>heal</code> v1, approved by bob.`) {
		t.Fatalf("the clusters page after the approval:\n%s", body)
	}
}
