package runs_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// timedStore is a store whose write transactions are timed: held is how
// long Update held the writer since it was reset.
type timedStore struct {
	*sqlite.Store
	held time.Duration
}

func (s *timedStore) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	start := time.Now()
	defer func() { s.held += time.Since(start) }()
	return s.Store.Update(ctx, fn)
}

// worstWhen is the costliest when the step grammar takes from an operator
// (core/runs/tmpl: at most 64 nodes): an or of 20 comparisons, the last
// one true. With perNode, the last one reads the node's id, so that no
// two nodes share a render (stepTemplates.whens).
func worstWhen(perNode bool) string {
	var b strings.Builder
	b.WriteString("{{ or")
	for i := range 19 {
		fmt.Fprintf(&b, ` (eq .node.labels.x "y%d")`, i)
	}
	if perNode {
		b.WriteString(` (ne .node.id "")`)
	} else {
		b.WriteString(` (eq .node.labels.x "y19")`)
	}
	b.WriteString(" }}")
	return b.String()
}

// BenchmarkAdvancePass measures one pass of the orchestrator over a large
// run (docs/architecture.md, "Runs and playbooks"): the most children a
// run may have (10,000) over the most nodes, one stage whose step has the
// worst when and templated args, 10% of the nodes in flight: every pass
// decides the when of every node and tries the args of every node not
// started. It reports how long the write transaction is held
// by a pass that creates nothing (write_tx_ms_idle_pass), the common one,
// and by a pass that creates the next wave of 1,000 nodes
// (write_tx_ms_wave_pass), for the engine's two ways: in_tx plans in the
// caller's transaction (Advance), outside plans before it (AdvanceIn);
// and for a when the nodes share (shared: it reads a label they all have)
// or not (per_node: it reads the node's id).
func BenchmarkAdvancePass(b *testing.B) {
	for _, mode := range []string{"in_tx", "outside"} {
		for _, when := range []string{"shared", "per_node"} {
			b.Run(mode+"/"+when, func(b *testing.B) { benchAdvancePass(b, mode, when == "per_node") })
		}
	}
}

func benchAdvancePass(b *testing.B, mode string, perNode bool) {
	const nodes = 10000
	ctx := context.Background()
	sq, err := sqlite.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sq.Close() })
	st := &timedStore{Store: sq}
	pol := approval.Policy{Default: "none"}
	e := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol)}, nil)
	update := func(fn func(tx store.Tx) error) {
		b.Helper()
		if err := st.Update(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
	update(func(tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "c", Status: store.ClusterHealthy}); err != nil {
			return err
		}
		for i := range nodes {
			if err := tx.PutNode(ctx, &store.Node{ClusterID: "c", ID: fmt.Sprintf("n%05d", i), Addr: "127.0.0.1:1",
				Source: store.SourceStatic, Status: store.NodeUp, Labels: map[string]string{"x": "y19"}}); err != nil {
				return err
			}
		}
		return nil
	})
	mc := limit.MustParse("10%")
	when := worstWhen(perNode)
	args := []byte(`{"msg": "{{ .node.labels.x }} on {{ .node.id }}"}`)
	steps := []wire.StepSpec{{Name: "upgrade", Kind: "example.com/pkg.upgrade", When: when, Args: args}}
	req := &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
		Name: "upgrade", Target: wire.Target{All: true}, MaxConcurrency: &mc, Steps: steps}}}
	r, err := e.CreateIn(ctx, st, req, actions.Actor{Name: "alice"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	pass := func() []string {
		b.Helper()
		st.held = 0
		var made []string
		switch mode {
		case "in_tx":
			update(func(tx store.Tx) error {
				var err error
				made, err = e.AdvanceNodes(ctx, tx, r.ID)
				return err
			})
		default:
			if made, err = e.AdvanceIn(ctx, st, r.ID); err != nil {
				b.Fatal(err)
			}
		}
		return made
	}
	// The first wave (created with the run) finishes.
	update(func(tx store.Tx) error {
		kids, err := tx.RunChildren(ctx, r.ID)
		if err != nil {
			return err
		}
		if len(kids) != nodes/10 {
			return fmt.Errorf("%d children; want %d", len(kids), nodes/10)
		}
		t := action.UTC(time.Now())
		for i := range kids {
			k := &kids[i]
			k.State, k.PushedStoreID, k.StartedTS, k.FinishedTS = action.Done, "s", &t, &t
			if err := tx.UpdateAction(ctx, k); err != nil {
				return err
			}
		}
		return nil
	})
	if made := pass(); len(made) != nodes/10 {
		b.Fatalf("the wave pass created %d children; want %d", len(made), nodes/10)
	}
	wave := st.held
	var held []time.Duration
	b.ResetTimer()
	for b.Loop() {
		if made := pass(); len(made) != 0 {
			b.Fatalf("an idle pass created %d children", len(made))
		}
		held = append(held, st.held)
	}
	b.StopTimer()
	slices.Sort(held)
	b.ReportMetric(float64(held[len(held)/2])/float64(time.Millisecond), "write_tx_ms_idle_pass")
	b.ReportMetric(float64(wave)/float64(time.Millisecond), "write_tx_ms_wave_pass")
}
