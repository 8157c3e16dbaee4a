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

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Advancer moves active runs on: each step settles a run's stages, its
// state follows, and the children its limits admit are created, ready to
// push. The orchestrator's advancer calls AdvanceIn for each run Active
// lists.
type Advancer struct {
	*base
	// planned, for tests, is called once a run's next step is decided,
	// before it is stored.
	planned func()
}

// Advancing outside the write transaction (docs/architecture.md, "Runs and
// playbooks"): deciding a run's next step evaluates the when of every node
// of its running stages and renders the args of the children it creates,
// at every full sync. AdvanceIn does it on a read, with no transaction held;
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
// commit that moved it asks for another full sync.
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
	// join: a stage with follow has nodes to take (Joining); the run
	// takes them before its next step is decided.
	join bool
}

// planAdvance reads run id and decides its next step, in one read of st;
// nil when the run is not active.
func (a *Advancer) planAdvance(ctx context.Context, st store.Store, id string) (*advancing, error) {
	p := &advancing{t: a.now()}
	err := st.Read(ctx, func(whole store.Reader) error {
		rd := &nodesOnce{Reader: whole}
		r, err := rd.Run(ctx, id)
		if err != nil {
			return err
		}
		if r.State != store.RunRunning && r.State != store.RunPaused {
			return nil
		}
		if p.kids, err = children(ctx, rd, r.ID, r.ApprovedBy); err != nil {
			return err
		}
		p.run = r
		if following(r) {
			nodes, err := rd.Nodes(ctx, r.ClusterID)
			if err != nil {
				return err
			}
			if p.join = len(Joining(r, nodes, a.staticLabels[r.ClusterID])) > 0; p.join {
				return nil
			}
		}
		p.step, p.env, p.read, err = a.plan(ctx, rd, r, p.kids, p.t)
		return err
	})
	if err != nil || p.run == nil {
		return nil, err
	}
	if a.planned != nil {
		a.planned()
	}
	return p, nil
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
// asks for another full sync.
func idle(r *store.Run, kids []Child, step Step, env PlanEnv) bool {
	if step.State != r.State || len(step.Create) > 0 || len(step.Unreachable) > 0 {
		return false
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		if step.Stages[i] != st.State || !slices.Equal(step.Failed[i], st.Failed) || !slices.Equal(step.Skipped[i], st.Skipped) ||
			step.Nodes[i] != nodeCounts(st) {
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
func (a *Advancer) AdvanceIn(ctx context.Context, st store.Store, id string) ([]string, error) {
	var created []string
	for replans := 0; ; {
		p, err := a.planAdvance(ctx, st, id)
		if err == nil && p != nil && p.join {
			// Nodes joined a stage with follow: the run takes them and
			// decides its next step with them, in one transaction (a
			// join is rare).
			var made []string
			err = st.Update(ctx, func(tx store.Tx) error {
				var err error
				made, err = a.AdvanceNodes(ctx, tx, id)
				return err
			})
			return append(created, made...), err
		}
		if err != nil || p == nil || idle(p.run, p.kids, p.step, p.env) {
			return created, err
		}
		var made []string
		again := false
		err = st.Update(ctx, func(tx store.Tx) error {
			made, again = nil, false // set again if the store runs the transaction again
			r, kids, err := p.recheck(ctx, tx)
			if err != nil {
				return err
			}
			made, again, err = a.apply(ctx, tx, r, kids, p.step, p.env, p.t)
			return err
		})
		if errors.Is(err, ErrReplan) {
			if replans++; replans < MaxReplans {
				continue
			}
			err = st.Update(ctx, func(tx store.Tx) error {
				var err error
				made, err = a.AdvanceNodes(ctx, tx, id)
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

// Active lists the ids of a cluster's runs that AdvanceIn may move on:
// RUNNING or PAUSED, oldest first. It reads their heads alone
// (store.Reader.RunsInStateBrief): the loop calls it every pass.
func (a *Advancer) Active(ctx context.Context, r store.Reader, clusterID string) ([]string, error) {
	active, err := r.RunsInStateBrief(ctx, clusterID, store.RunRunning, store.RunPaused)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(active))
	for i := range active {
		ids[i] = active[i].ID
	}
	return ids, nil
}

// AdvanceNodes moves one RUNNING or PAUSED run one step in tx: its stages
// settle, its state follows, and the children its limits admit are
// created, ready to push. It returns the node of every child it created (a
// node once per child), so that the caller syncs those nodes alone; a run
// with nothing to do writes nothing, and a run that is no longer active is
// left alone.
func (a *Advancer) AdvanceNodes(ctx context.Context, tx store.Tx, runID string) ([]string, error) {
	r, err := tx.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r.State != store.RunRunning && r.State != store.RunPaused {
		return nil, nil
	}
	return a.advance(ctx, tx, r, a.now())
}

// advance moves run r one step (see AdvanceNodes) in tx and returns the nodes
// of the children it created.
func (a *Advancer) advance(ctx context.Context, whole store.Tx, r *store.Run, t time.Time) ([]string, error) {
	tx := &nodesOnceTx{Tx: whole}
	if _, err := a.follow(ctx, tx, r, t); err != nil {
		return nil, err
	}
	kids, err := children(ctx, tx, r.ID, r.ApprovedBy)
	if err != nil {
		return nil, err
	}
	step, env, _, err := a.plan(ctx, tx, r, kids, t)
	if err != nil {
		return nil, err
	}
	if a.planned != nil {
		a.planned()
	}
	created, again, err := a.apply(ctx, tx, r, kids, step, env, t)
	if err != nil || !again {
		return created, err
	}
	more, err := a.advance(ctx, tx, r, t)
	return append(created, more...), err
}

// apply stores step, planned for run r over its children kids in env at
// t: the run's stages and state, its events and the children to create.
// again is true when the run should take its next step at once (nodes
// found unavailable at their turn were decided, or children were born
// finished).
func (a *Advancer) apply(ctx context.Context, tx store.Tx, r *store.Run, kids []Child, step Step, env PlanEnv,
	t time.Time) (created []string, again bool, err error) {
	who := actions.Core
	c := changeOf(r)
	locks, err := takeLocks(ctx, tx, r, &step, t)
	if err != nil {
		return nil, false, err
	}
	if !locks.held && !store.RunFinal(step.State) {
		// Another run holds its lock: it waits, and says for what (a
		// deadline that passes meanwhile ends it all the same: it never
		// started, so nothing of it runs).
		if why := withLocks(r.StateReason, locks.text); why != r.StateReason {
			r.StateReason, r.UpdatedTS = why, t
			return nil, false, c.save(ctx, tx)
		}
		return nil, false, nil
	}
	if err := releaseStageLocks(ctx, tx, r, &step); err != nil {
		return nil, false, err
	}
	dirty := false // the row changed, its state aside
	for i := range r.Stages {
		st := &r.Stages[i]
		if i < len(step.Failed) && !slices.Equal(step.Failed[i], st.Failed) {
			st.Failed, dirty = step.Failed[i], true
		}
		if i < len(step.Skipped) && !slices.Equal(step.Skipped[i], st.Skipped) {
			st.Skipped, dirty = step.Skipped[i], true
		}
		if i < len(step.Why) {
			changed, err := a.recordWhy(ctx, tx, st, step.Failed[i], step.Why[i])
			if err != nil {
				return nil, false, err
			}
			dirty = dirty || changed
		}
		if i < len(step.Nodes) && step.Nodes[i] != nodeCounts(st) {
			n := step.Nodes[i]
			st.Done, st.InFlight, st.RolledBack, dirty = n.Done, n.InFlight, n.RolledBack, true
		}
	}
	decided := false // a node unavailable at its turn failed or was skipped
	for i, us := range step.Unreachable {
		st := &r.Stages[i]
		if st.Unreachable == nil {
			st.Unreachable = map[string]store.Unreachable{}
		}
		for node, u := range us {
			st.Unreachable[node], dirty = u, true
			if u.As != UnavailableWait {
				decided = true
			}
			c.event(store.EventRunNodeUnavailable, who, t,
				fmt.Sprintf("run %s: stage %s: node %s is unavailable at its turn (%s)", r.ID, st.Name, node, u.As),
				map[string]any{"stage": st.Name, "node": node, "as": u.As})
		}
	}
	if decided {
		r.UpdatedTS = t
		return nil, true, c.save(ctx, tx)
	}
	if r.State == store.RunRunning && step.State == store.RunRunning {
		// What holds its next nodes (with the nodes found waiting just
		// now), said in its own reason.
		if why := withLocks(WithWaiting(r.StateReason, Waiting(r, kids, env)), locks.text); why != r.StateReason {
			r.StateReason, dirty = why, true
		}
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		if step.Stages[i] == st.State {
			continue
		}
		from := st.State
		st.State, dirty = step.Stages[i], true
		switch {
		case from == store.StagePending && st.State == store.StageRunning:
			c.event(store.EventRunStageStarted, who, t,
				fmt.Sprintf("run %s: stage %s started on %d node(s)", r.ID, st.Name, len(st.Nodes)),
				map[string]any{"stage": st.Name})
		case st.State == store.StageDone || st.State == store.StageFailed || st.State == store.StageAborted:
			errs := len(step.Failed[i]) // the stage's errors: one a failed node
			c.event(store.EventRunStageFinished, who, t,
				fmt.Sprintf("run %s: stage %s %s (%d errors)", r.ID, st.Name, st.State, errs),
				map[string]any{"stage": st.Name, "state": st.State, "errors": errs})
		}
	}
	if len(c.events) > 0 && (len(step.Create) > 0 || step.State == store.RunFailed) {
		// The stages' events come before those of the children the step
		// creates or cancels; the run's final event (run.finished, after
		// its unsent children are cancelled) comes after them.
		r.UpdatedTS = t
		if err := c.save(ctx, tx); err != nil {
			return nil, false, err
		}
		dirty = false
	}
	forgotten := 0
	created = make([]string, 0, len(step.Create))
	for _, n := range step.Create {
		st := r.Stages[stageIndex(r, n.Stage)]
		sp := stepOf(&st, n.Step)
		args := sp.Args
		if n.Args != nil {
			args = n.Args
		}
		if IsCoreKind(sp.Kind) {
			// The core runs it (RunCore): nothing to push.
			admitCore(&r.Stages[stageIndex(r, n.Stage)], n, args, t)
			dirty = true
			continue
		}
		rec, err := a.actions.CreateChild(ctx, tx, actions.Child{RunID: r.ID, Stage: n.Stage, Wave: n.Wave,
			Step: n.Step, Attempt: n.Attempt, RetryOf: n.RetryOf,
			ClusterID: r.ClusterID, NodeID: n.Node, Kind: sp.Kind, Args: args, TimeoutS: sp.TimeoutS,
			Requester: r.Requester, ApprovedBy: r.ApprovedBy, NotBefore: r.NotBefore, Urgent: r.Urgent}, actions.Core)
		if err != nil {
			return nil, false, err
		}
		created = append(created, n.Node)
		if rec.State.Final() {
			// Born finished (its node was forgotten since the run was
			// resolved): it counts at once.
			forgotten++
		}
	}
	if forgotten > 0 {
		// Those children are already finished: take the next step at once.
		if dirty {
			r.UpdatedTS = t
			if err := c.save(ctx, tx); err != nil {
				return nil, false, err
			}
		}
		return created, true, nil
	}
	switch {
	case step.State == r.State:
	case step.State == store.RunDone || step.State == store.RunPartial || step.State == store.RunFailed ||
		step.State == store.RunAborted:
		if step.State == store.RunFailed {
			// Children created but never sent do not run once their run
			// has failed; those on their agents finish.
			if err := a.cancelUnsent(ctx, tx, r); err != nil {
				return nil, false, err
			}
			cancelCore(r, ReasonRunEnded, nil, t)
		}
		p := RunProgress(r)
		c.finish(step.State, step.Reason, store.EventRunFinished, who,
			fmt.Sprintf("run %s %s: %s (%s)", r.ID, step.State, step.Reason, ProgressText(p)), a.now())
		c.events[len(c.events)-1].Data["nodes"] = progressData(p)
		return created, false, c.save(ctx, tx)
	case step.State == store.RunPaused:
		r.State, r.StateReason, r.UpdatedTS = step.State, step.Reason, t
		p := RunProgress(r)
		text, failures := failuresOf(r)
		why := PausedFor(r)
		data := map[string]any{"reason": step.Reason, "paused_for": why, "nodes": progressData(p)}
		if len(failures) > 0 {
			data["failed"] = failures
		}
		// Each pause in its own words: a canary waits for a promote, errors
		// for someone to forgive them.
		paused, waits := fmt.Sprintf("run %s paused by its errors", r.ID),
			fmt.Sprintf("run %s, paused by its errors, waits for an approver other than %s to resume it, forgiving them, or to abort it",
				r.ID, r.Requester)
		if why == PauseCanary {
			paused = fmt.Sprintf("run %s waits for a promote: its canary is through", r.ID)
			waits = fmt.Sprintf("run %s's canary is through: it waits for an approver other than %s to promote it, or to abort it",
				r.ID, r.Requester)
		}
		c.event(store.EventRunPaused, who, t, fmt.Sprintf("%s: %s (%s)%s", paused, step.Reason, ProgressText(p), text), data)
		c.event(store.EventApprovalWaiting, who, t, fmt.Sprintf("%s: %s", waits, step.Reason),
			map[string]any{"reason": "paused", "paused_for": why})
		return created, false, c.save(ctx, tx)
	default:
		// Not a state a step moves a run to: the row is stored as it is.
		dirty = true
	}
	if !dirty {
		return created, false, nil
	}
	r.UpdatedTS = t
	return created, false, c.save(ctx, tx)
}

// recordWhy keeps in st why its failed nodes failed, the first
// store.MaxWhy of them: the planner's reason, the reason of the child that
// failed the node, and the last lines of that child's output (read once,
// when the node is first found failed). It reports whether st changed.
func (a *Advancer) recordWhy(ctx context.Context, tx store.Tx, st *store.RunStage, failed []string,
	why map[string]store.NodeFailure) (bool, error) {
	changed := false
	for _, n := range failed {
		if _, ok := st.Why[n]; ok || len(st.Why) >= store.MaxWhy {
			continue
		}
		f := why[n]
		if f.ActionID != "" {
			rec, err := tx.Action(ctx, f.ActionID)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return false, err
			}
			if err == nil {
				if rec.StateReason != "" {
					f.Reason += ": " + rec.StateReason
				}
				f.Output = LastLines(rec.Output)
			}
		}
		if st.Why == nil {
			st.Why = map[string]store.NodeFailure{}
		}
		st.Why[n], changed = f, true
	}
	return changed, nil
}

// plan decides run r's next step given its children, at t, reading the
// nodes in rd, and returns it with the environment it was planned in and
// what it read of the nodes. The planner asks whether a node
// is DOWN or drained only of the nodes it would start now and of those a
// stage waits for, so plan reads those nodes alone, one by one, rather
// than every node of the cluster at every advance: it plans as if every
// node were available, reads the nodes of the children it would create,
// and plans again while one of them turns out unavailable. A stage whose
// steps hold templates needs every node's labels: then every node is read
// once.
func (a *Advancer) plan(ctx context.Context, rd store.Reader, r *store.Run, kids []Child, t time.Time) (Step, PlanEnv, nodesRead, error) {
	env := PlanEnv{Now: t, Unavailable: map[string]bool{}, Drained: map[string]bool{}}
	seen := nodesRead{marks: map[string]string{}}
	mark := func(n *store.Node) {
		if n.Status == store.NodeDown || n.Drained {
			env.Unavailable[n.ID] = true
		}
		if n.Drained {
			env.Drained[n.ID] = true
		}
		seen.marks[n.ID] = nodeMark(n)
	}
	if hasAnyTemplates(r) {
		nodes, err := rd.Nodes(ctx, r.ClusterID)
		if err != nil {
			return Step{}, env, seen, err
		}
		seen.all = true
		env.Labels = map[string]map[string]string{}
		for i := range nodes {
			mark(&nodes[i])
			env.Labels[nodes[i].ID] = nodes[i].Labels
		}
		return PlanWith(r, kids, env), env, seen, nil
	}
	check := func(ids []string) (bool, error) {
		found := false
		for _, id := range ids {
			if _, ok := seen.marks[id]; ok {
				continue
			}
			seen.marks[id] = ""
			n, err := rd.Node(ctx, r.ClusterID, id)
			if errors.Is(err, store.ErrNotFound) {
				continue // forgotten: its child is born CANCELLED (actions.CreateChild)
			} else if err != nil {
				return false, err
			}
			mark(n)
			found = found || env.Unavailable[id]
		}
		return found, nil
	}
	var waited []string
	for i := range r.Stages {
		if r.Stages[i].State == store.StageRunning {
			for node := range r.Stages[i].Unreachable {
				waited = append(waited, node)
			}
		}
	}
	slices.Sort(waited)
	if _, err := check(waited); err != nil {
		return Step{}, env, seen, err
	}
	for {
		step := PlanWith(r, kids, env)
		next := make([]string, 0, len(step.Create))
		for _, n := range step.Create {
			next = append(next, n.Node)
		}
		if found, err := check(next); err != nil || !found {
			return step, env, seen, err
		}
	}
}

// hasAnyTemplates reports whether a stage of r holds a template.
func hasAnyTemplates(r *store.Run) bool {
	return slices.ContainsFunc(r.Stages, func(st store.RunStage) bool { return hasTemplates(&st) })
}

// stepOf is the step of st's procedure or rollback named name.
func stepOf(st *store.RunStage, name string) store.RunStep {
	for _, sp := range append(slices.Clone(st.Procedure()), st.Rollback...) {
		if sp.Name == name {
			return sp
		}
	}
	return store.RunStep{Name: name, Kind: st.Kind, Args: st.Args, TimeoutS: st.TimeoutS}
}

func stageIndex(r *store.Run, name string) int {
	for i := range r.Stages {
		if r.Stages[i].Name == name {
			return i
		}
	}
	return -1
}

// cancelUnsent cancels the children of r that no push was attempted for.
func (a *Advancer) cancelUnsent(ctx context.Context, tx store.Tx, r *store.Run) error {
	recs, err := tx.RunChildren(ctx, r.ID)
	if err != nil {
		return err
	}
	for i := range recs {
		if recs[i].State == action.PendingSchedule && recs[i].PushedStoreID == "" {
			if _, err := a.actions.CancelChild(ctx, tx, &recs[i], actions.Core, ReasonRunEnded); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodesOnce reads the cluster's every node once for one decision: a
// following run's joins (Joining) and a plan with templates both need
// them, and nothing in between changes them.
type nodesOnce struct {
	store.Reader
	cluster string
	nodes   []store.Node
}

func (r *nodesOnce) Nodes(ctx context.Context, clusterID string) ([]store.Node, error) {
	if r.nodes != nil && r.cluster == clusterID {
		return r.nodes, nil
	}
	nodes, err := r.Reader.Nodes(ctx, clusterID)
	if err == nil {
		r.cluster, r.nodes = clusterID, nodes
	}
	return nodes, err
}

// nodesOnceTx is nodesOnce in a write transaction, in which the advance
// changes runs and actions, never nodes.
type nodesOnceTx struct {
	store.Tx
	once nodesOnce
}

func (t *nodesOnceTx) Nodes(ctx context.Context, clusterID string) ([]store.Node, error) {
	if t.once.Reader == nil {
		t.once.Reader = t.Tx
	}
	return t.once.Nodes(ctx, clusterID)
}
