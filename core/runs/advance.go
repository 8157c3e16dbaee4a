package runs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/store"
)

// Advancing outside the write transaction (docs/architecture.md, "Runs and
// playbooks"): deciding a run's next step evaluates the when of every node
// of its running stages and renders the args of the children it creates,
// at every pass. AdvanceIn does it on a read, with no transaction held;
// the write transaction then only checks that what the decision read has
// not changed in a way that could change it, and stores it.

// nodesRead is what a plan read of the cluster's nodes: every node (all),
// or the nodes it asked about; marks holds, by id, what the plan uses of
// each ("" for a node not found).
type nodesRead struct {
	all   bool
	marks map[string]string
}

// nodeMark is what the planner uses of a node: whether it is DOWN or
// drained, and its labels.
func nodeMark(n *store.Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%t %t", n.Status == store.NodeDown, n.Drained)
	for _, k := range slices.Sorted(maps.Keys(n.Labels)) {
		fmt.Fprintf(&b, " %q=%q", k, n.Labels[k])
	}
	return b.String()
}

// same reports whether the nodes as rd reads them now are those read.
func (s nodesRead) same(ctx context.Context, rd store.Reader, cluster string) (bool, error) {
	if s.all {
		nodes, err := rd.Nodes(ctx, cluster)
		if err != nil || len(nodes) != len(s.marks) {
			return false, err
		}
		for i := range nodes {
			if m, ok := s.marks[nodes[i].ID]; !ok || m != nodeMark(&nodes[i]) {
				return false, nil
			}
		}
		return true, nil
	}
	for id, m := range s.marks {
		n, err := rd.Node(ctx, cluster, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if m != "" {
				return false, nil
			}
		case err != nil:
			return false, err
		case m != nodeMark(n):
			return false, nil
		}
	}
	return true, nil
}

// sameChildren reports whether the children now are those a plan was made
// on, as far as the plan depends on them: the same children, each finished
// one as it was. A child unfinished when planned may have moved on since:
// the plan took it as in flight, which holds its node and its stage's room
// as they would have been had the plan been stored before it moved; the
// commit that moved it asks for another pass.
func sameChildren(planned, now []Child) bool {
	if len(planned) != len(now) {
		return false
	}
	byID := make(map[string]*Child, len(now))
	for i := range now {
		byID[now[i].ID] = &now[i]
	}
	for i := range planned {
		p := &planned[i]
		c, ok := byID[p.ID]
		switch {
		case !ok:
			return false
		case !p.State.Final():
			continue
		case p.Stage != c.Stage || p.Node != c.Node || p.Step != c.Step || p.Attempt != c.Attempt ||
			p.State != c.State || p.Reason != c.Reason || p.Replaced != c.Replaced ||
			!p.Finished.Equal(c.Finished) || !bytes.Equal(p.Outputs, c.Outputs):
			return false
		}
	}
	return true
}

// advancing is a run's next step decided outside the write transaction,
// with what it was decided on.
type advancing struct {
	run  *store.Run
	kids []Child
	step Step
	env  PlanEnv
	read nodesRead
	t    time.Time
}

// planAdvance reads run id and decides its next step, in one read of st;
// nil when the run is not active.
func (e *Engine) planAdvance(ctx context.Context, st store.Store, id string) (*advancing, error) {
	a := &advancing{t: e.now()}
	err := st.Read(ctx, func(rd store.Reader) error {
		r, err := rd.Run(ctx, id)
		if err != nil {
			return err
		}
		if r.State != store.RunRunning && r.State != store.RunPaused {
			return nil
		}
		if a.kids, err = children(ctx, rd, r.ID, r.ApprovedBy); err != nil {
			return err
		}
		a.run = r
		a.step, a.env, a.read, err = e.plan(ctx, rd, r, a.kids, a.t)
		return err
	})
	if err != nil || a.run == nil {
		return nil, err
	}
	if e.advancePlanned != nil {
		e.advancePlanned()
	}
	return a, nil
}

// recheck reads, in the write transaction tx, what a's decision read, and
// returns the run and its children as they are now, or ErrReplan when the
// decision may no longer hold: the run changed, a child appeared or a
// finished one changed, or a node it read changed.
func (a *advancing) recheck(ctx context.Context, tx store.Tx) (*store.Run, []Child, error) {
	r, err := tx.Run(ctx, a.run.ID)
	if err != nil {
		return nil, nil, err
	}
	if !reflect.DeepEqual(r, a.run) {
		return nil, nil, fmt.Errorf("%w: run %s changed", ErrReplan, r.ID)
	}
	kids, err := children(ctx, tx, r.ID, r.ApprovedBy)
	if err != nil {
		return nil, nil, err
	}
	if !sameChildren(a.kids, kids) {
		return nil, nil, fmt.Errorf("%w: the children of run %s changed", ErrReplan, r.ID)
	}
	if ok, err := a.read.same(ctx, tx, r.ClusterID); err != nil {
		return nil, nil, err
	} else if !ok {
		return nil, nil, fmt.Errorf("%w: nodes of run %s changed", ErrReplan, r.ID)
	}
	return r, kids, nil
}

// idle reports whether step, decided for run r over kids in env, changes
// nothing (apply would write nothing): then no write transaction is
// needed, since any write that changes the run, its children or its nodes
// asks for another pass.
func idle(r *store.Run, kids []Child, step Step, env PlanEnv) bool {
	if step.State != r.State || len(step.Create) > 0 || len(step.Unreachable) > 0 {
		return false
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		if step.Stages[i] != st.State || !slices.Equal(step.Failed[i], st.Failed) || !slices.Equal(step.Skipped[i], st.Skipped) {
			return false
		}
	}
	return r.State != store.RunRunning || WithWaiting(r.StateReason, Waiting(r, kids, env)) == r.StateReason
}

// AdvanceIn is AdvanceNodes with the decision made outside the write
// transaction: the run, its children and the nodes it needs are read and
// its next step decided (every when evaluated, the args of the children
// to create rendered) with no transaction held; a write transaction of st
// then checks that they have not changed (recheck) and stores the step.
// When they changed, the step is decided again, at most MaxReplans times;
// then it is decided inside the write transaction, so that a run whose
// children keep moving still advances. A step that changes nothing, the
// common one, takes no write transaction.
func (e *Engine) AdvanceIn(ctx context.Context, st store.Store, id string) ([]string, error) {
	var created []string
	for replans := 0; ; {
		a, err := e.planAdvance(ctx, st, id)
		if err != nil || a == nil || idle(a.run, a.kids, a.step, a.env) {
			return created, err
		}
		var made []string
		again := false
		err = st.Update(ctx, func(tx store.Tx) error {
			made, again = nil, false // set again if the store runs the transaction again
			r, kids, err := a.recheck(ctx, tx)
			if err != nil {
				return err
			}
			made, again, err = e.apply(ctx, tx, r, kids, a.step, a.env, a.t)
			return err
		})
		if errors.Is(err, ErrReplan) {
			if replans++; replans < MaxReplans {
				continue
			}
			err = st.Update(ctx, func(tx store.Tx) error {
				var err error
				made, err = e.AdvanceNodes(ctx, tx, id)
				return err
			})
			return append(created, made...), err
		}
		if err != nil {
			return created, err
		}
		created = append(created, made...)
		if !again {
			return created, nil
		}
	}
}
