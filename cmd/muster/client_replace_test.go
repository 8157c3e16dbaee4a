package main

import (
	"context"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// muster node replace: admins only; NEW takes OLD's labels (the cluster is
// found by NEW); OLD's action stays readable; each refusal is one line and
// a non-zero exit (and maybe a hint) that changes nothing.
func TestCLINodeReplace(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	a, err := e.runJSONCreate()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.Update(context.Background(), func(tx store.Tx) error {
		n, err := tx.Node(context.Background(), "prod", "db-1")
		if err != nil {
			return err
		}
		n.Source, n.Status, n.Labels = store.SourceGossip, store.NodeDown, map[string]string{"role": "db"}
		if err := tx.PutNode(context.Background(), n); err != nil {
			return err
		}
		for _, id := range []string{"db-2", "db-9"} {
			if err := tx.PutNode(context.Background(), &store.Node{ClusterID: "prod", ID: id, Addr: "127.0.0.1:9",
				Source: store.SourceGossip, Status: store.NodeUp}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, who string
		args      []string
		code      int
		msg       string
	}{
		{"as an operator", "op", []string{"db-1", "--with", "db-9"}, 1, "403"},
		{"without --with", "admin", []string{"db-1"}, 2, "--with NEW is required"},
		{"NEW unknown", "admin", []string{"db-1", "--with", "db-8", "--cluster", "prod"}, 1, "404"},
		{"NEW is OLD", "admin", []string{"db-9", "--with", "db-9"}, 1, "400"},
	} {
		out, msg, code := e.run(tc.who, append([]string{"node", "replace"}, tc.args...)...)
		first, _, _ := strings.Cut(msg, "\n") // a hint may follow the error line
		if code != tc.code || out != "" || !strings.Contains(first, tc.msg) {
			t.Fatalf("%s: exit %d %q %q", tc.name, code, msg, out)
		}
	}
	out, msg, code := e.run("admin", "node", "replace", "db-1", "--with", "db-9")
	if code != 0 || !strings.Contains(out, "Node prod/db-1 replaced by db-9, which holds its labels role=db.") {
		t.Fatalf("node replace: %d %s %s", code, msg, out)
	}
	out, _, code = e.run("op", "node", "list", "--cluster", "prod", "-o", "json")
	nodes := decode[wire.NodeList](t, out).Nodes
	if code != 0 || len(nodes) != 2 || nodes[1].ID != "db-9" || nodes[1].Labels["role"] != "db" {
		t.Fatalf("nodes after the replace: %s", out)
	}
	out, _, code = e.run("op", "action", "show", a, "-o", "json")
	if got := decode[action.Action](t, out); code != 0 || got.NodeID != "db-1" {
		t.Fatalf("db-1's action after the replace: %s", out)
	}
	// db-9 now holds db-1's place: it cannot take another.
	_, msg, code = e.run("admin", "node", "replace", "db-2", "--with", "db-9", "--cluster", "prod")
	if code != 1 || !strings.Contains(msg, "409") {
		t.Fatalf("a second place: exit %d %q", code, msg)
	}
}
