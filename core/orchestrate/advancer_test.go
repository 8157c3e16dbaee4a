package orchestrate

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
)

// gatedRuns is a Runs with one active run whose advances, once armed,
// wait for a gate and report the node n1 created.
type gatedRuns struct {
	armed    atomic.Bool
	gate     chan struct{}
	entered  chan struct{}
	advances atomic.Int32
}

func (g *gatedRuns) Active(context.Context, store.Reader, string) ([]string, error) {
	return []string{"run-1"}, nil
}

func (g *gatedRuns) AdvanceIn(context.Context, store.Store, string) ([]string, error) {
	if !g.armed.Load() {
		return nil, nil
	}
	g.advances.Add(1)
	g.entered <- struct{}{}
	<-g.gate
	return []string{"n1"}, nil
}

func (g *gatedRuns) Expire(context.Context, store.Tx) (int, error) { return 0, nil }

// TestAdvanceRequestsMergeWhileOneRuns: the cluster's advancer runs beside
// the loop, so asking for an advance never waits for it; requests that come
// while an advance runs make one more advance, not one each; and the nodes
// of the children an advance created are synced.
func TestAdvanceRequestsMergeWhileOneRuns(t *testing.T) {
	t.Parallel()
	g := &gatedRuns{gate: make(chan struct{}), entered: make(chan struct{}, 10)}
	h := setup(t, Config{Runs: g, Interval: time.Hour}, "n1")
	h.o.TestSignals.Init(t)
	h.start()
	h.o.TestSignals.FullSynced.Wait() // the first full sync, and the advance it asked for, before arming
	idle := func() bool { return !h.o.advancers.busy(cluster) }
	testwait.For(t, "the advance the first full sync asked for", idle)
	g.armed.Store(true)
	h.o.advancers.request(cluster) // returns at once: the advance waits at the gate
	<-g.entered
	for range 3 {
		h.o.advancers.request(cluster)
	}
	g.gate <- struct{}{}
	<-g.entered // the one more advance the three requests made
	g.gate <- struct{}{}
	h.o.TestSignals.NodesSynced.WaitFor("a sync of n1, whose child the advance created", func(s NodesSynced) bool {
		return len(s.Nodes) == 1 && s.Nodes[0] == "n1"
	})
	testwait.For(t, "the advancer to stop", idle)
	if n := g.advances.Load(); n != 2 {
		t.Fatalf("%d advances for four requests, three of them while one ran; want 2", n)
	}
}

// TestOnlyAnEndOrASendOfARunsChildAsksForAnAdvance: a commit whose only
// changes are run children started or reporting progress asks the
// advancer for nothing (no run can move on for it); a send, an end, a
// loss, a change of another action or of a node does.
func TestOnlyAnEndOrASendOfARunsChildAsksForAnAdvance(t *testing.T) {
	t.Parallel()
	child := func(st action.State, hist ...action.State) *actions.Change {
		c := &actions.Change{Rec: store.Record{Action: action.Action{ID: action.NewID(), State: st, RunID: "r1"}}}
		for _, to := range hist {
			c.History = append(c.History, action.Transition{To: to})
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		change *actions.Change
		node   bool
		want   int
	}{
		{"started", child(action.Running, action.Running), false, 0},
		{"progress", child(action.Running), false, 0},
		{"sent", child(action.New, action.New), false, 1},
		{"sent and started", child(action.Running, action.New, action.Running), false, 1},
		{"ended", child(action.Done, action.Done), false, 1},
		{"held", child(action.PendingSchedule), false, 1},
		{"lost", func() *actions.Change { c := child(action.Running); c.Lost = true; return c }(), false, 1},
		{"an action of no run", func() *actions.Change { c := child(action.Running, action.Running); c.Rec.RunID = ""; return c }(), false, 1},
		{"started, and a node", child(action.Running, action.Running), true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWritePlan()
			w.add(tc.change)
			if tc.node {
				w.nodes = append(w.nodes, store.Node{ID: "n1"})
			}
			if got := w.runMoves(); got != tc.want {
				t.Fatalf("runMoves = %d, want %d", got, tc.want)
			}
		})
	}
}
