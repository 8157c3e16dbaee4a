package nodes_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/wire"
)

type env struct {
	t  *testing.T
	st *sqlite.Store
}

// setup opens a real SQLite store with cluster c: n1 (static, UP), n2
// (gossip, UP) and n3 (gossip, DOWN).
func setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, st: st}
	e.update(func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "c", Status: store.ClusterHealthy}); err != nil {
			return err
		}
		for _, n := range []store.Node{
			{ClusterID: "c", ID: "n1", Addr: "127.0.0.1:1", Source: store.SourceStatic, Status: store.NodeUp},
			{ClusterID: "c", ID: "n2", Addr: "127.0.0.1:2", Source: store.SourceGossip, Status: store.NodeUp},
			{ClusterID: "c", ID: "n3", Addr: "127.0.0.1:3", Source: store.SourceGossip, Status: store.NodeDown},
		} {
			if err := nodes.Save(ctx, tx, &n); err != nil {
				return err
			}
		}
		return nil
	})
	return e
}

func (e *env) update(fn func(ctx context.Context, tx store.Tx) error) {
	e.t.Helper()
	if err := e.st.Update(context.Background(), func(tx store.Tx) error { return fn(context.Background(), tx) }); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) node(id string) *store.Node {
	e.t.Helper()
	var n *store.Node
	err := e.st.Read(context.Background(), func(r store.Reader) error {
		var err error
		n, err = r.Node(context.Background(), "c", id)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) events(typ string) []store.Event {
	e.t.Helper()
	var out []store.Event
	err := e.st.Read(context.Background(), func(r store.Reader) error {
		evs, err := r.Events(context.Background(), 0, 0)
		for _, ev := range evs {
			if ev.Type == typ {
				out = append(out, ev)
			}
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// A drain records who drained the node and why, is shown DRAINED and
// counted so (not UP); asking again for the same writes nothing; an
// undrain clears who and why.
func TestDrainRecordsWhoAndWhy(t *testing.T) {
	t.Parallel()
	e := setup(t)
	alice := actions.Actor{Name: "alice", Addr: "10.0.0.1"}
	e.update(func(ctx context.Context, tx store.Tx) error {
		_, err := nodes.Drain(ctx, tx, "c", "n2", "  disk swap  ", alice)
		return err
	})
	n := e.node("n2")
	if !n.Drained || n.DrainedBy != "alice" || n.DrainReason != "disk swap" {
		t.Fatalf("drained node %+v", n)
	}
	if nodes.Status(n) != wire.NodeDrained {
		t.Fatalf("a drained node shows %s", nodes.Status(n))
	}
	evs := e.events(store.EventNodeDrained)
	if len(evs) != 1 || evs[0].Actor != "alice" || evs[0].ClientAddr != "10.0.0.1" || evs[0].Data["reason"] != "disk swap" ||
		!strings.Contains(evs[0].Message, "disk swap") {
		t.Fatalf("node.drained events %+v", evs)
	}
	rows := e.st.RowsWritten()
	e.update(func(ctx context.Context, tx store.Tx) error {
		_, err := nodes.Drain(ctx, tx, "c", "n2", "disk swap", actions.Actor{Name: "bob"})
		return err
	})
	if e.st.RowsWritten() != rows || e.node("n2").DrainedBy != "alice" {
		t.Fatal("draining again for the same reason wrote rows or changed who drained it")
	}
	var all []store.Node
	e.update(func(ctx context.Context, tx store.Tx) error {
		if _, err := nodes.Drain(ctx, tx, "c", "n3", "", alice); err != nil { // DOWN and drained: DOWN
			return err
		}
		var err error
		all, err = tx.Nodes(ctx, "c")
		return err
	})
	if got, want := nodes.Counts(all, "c"), (wire.NodeCounts{Total: 3, Up: 1, Drained: 1, Down: 1}); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	e.update(func(ctx context.Context, tx store.Tx) error {
		_, err := nodes.Undrain(ctx, tx, "c", "n2", alice)
		return err
	})
	if n := e.node("n2"); n.Drained || n.DrainedBy != "" || n.DrainReason != "" || nodes.Status(n) != store.NodeUp {
		t.Fatalf("undrained node %+v", n)
	}
	if len(e.events(store.EventNodeUndrained)) != 1 {
		t.Fatal("no node.undrained event")
	}
}

// A node of the core's static configuration cannot be forgotten (it would
// come back at the next start): the refusal says to remove it from the
// configuration and changes nothing. A gossip node is forgotten.
func TestForgetRefusesAConfiguredNode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rows := e.st.RowsWritten()
	err := e.st.Update(context.Background(), func(tx store.Tx) error {
		_, err := nodes.Forget(context.Background(), tx, "c", "n1", actions.Actor{Name: "admin"})
		return err
	})
	if !errors.Is(err, nodes.ErrConfigured) || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("forget of a static node: %v", err)
	}
	if e.st.RowsWritten() != rows || e.node("n1") == nil {
		t.Fatal("a refused forget changed something")
	}
	e.update(func(ctx context.Context, tx store.Tx) error {
		_, err := nodes.Forget(ctx, tx, "c", "n2", actions.Actor{Name: "admin"})
		return err
	})
	if len(e.events(store.EventNodeForgotten)) != 1 {
		t.Fatal("no node.forgotten event")
	}
}

// Update writes nothing when the change leaves the node as it was.
func TestUpdateWritesOnlyAChange(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rows := e.st.RowsWritten()
	e.update(func(ctx context.Context, tx store.Tx) error {
		_, changed, err := nodes.Update(ctx, tx, "c", "n2", func(n *store.Node) { n.Addr = "127.0.0.1:2" })
		if changed {
			t.Error("an unchanged node reported changed")
		}
		return err
	})
	if e.st.RowsWritten() != rows {
		t.Fatal("an unchanged node was written")
	}
	e.update(func(ctx context.Context, tx store.Tx) error {
		_, changed, err := nodes.Update(ctx, tx, "c", "n2", func(n *store.Node) { n.Labels = map[string]string{"role": "db"} })
		if !changed {
			t.Error("a relabelled node reported unchanged")
		}
		return err
	})
	if n := e.node("n2"); n.Labels["role"] != "db" {
		t.Fatalf("labels %v", n.Labels)
	}
}

// nodes.Save is the one writer of a node row: no other non-test code of the
// module calls the store's PutNode.
func TestSaveIsTheOnlyWriterOfNodes(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && strings.HasPrefix(name, ".") || name == "testdata" || path == filepath.Join(root, "core", "store") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == "." {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "PutNode" && filepath.Base(filepath.Dir(path)) != "nodes" {
				t.Errorf("%s calls PutNode: write nodes through core/nodes (Save, Update)", fset.Position(sel.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
