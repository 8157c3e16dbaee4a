package runs

import (
	"context"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// Creator makes runs: it checks a request and plans it against the
// cluster's nodes (Create, CreateIn), or takes the stages a playbook or a
// schedule resolved (InsertAt, InsertOccurrence), stores the run and, when
// it needs no approval, creates its first wave.
type Creator struct {
	*base
	adv *Advancer
	// planned, for tests, is called once a run is planned, before it is
	// stored.
	planned func()
}

// needsApproval reports whether a run over these stages must be approved:
// the strictest rule over its kinds decides.
func (c *Creator) needsApproval(clusterID string, stages []store.RunStage) bool {
	pol := c.policy.Load()
	for i := range stages {
		for _, sp := range stages[i].Procedure() {
			if pol.NeedsApproval(sp.Kind, clusterID) {
				return true
			}
		}
	}
	return false
}

// Create checks req, resolves its targets against the cluster's nodes and
// stores the run: PENDING_APPROVE, or RUNNING with its first wave when no
// rule over its kinds asks for approval. It plans in tx: CreateIn plans
// outside the write transaction.
func (c *Creator) Create(ctx context.Context, tx store.Tx, req *wire.CreateRunRequest, who actions.Actor) (*store.Run, error) {
	if err := Check(req); err != nil {
		return nil, err
	}
	nodes, err := ReadNodes(ctx, tx, req.ClusterID)
	if err != nil {
		return nil, err
	}
	p, err := c.planRun(req, nodes)
	if err != nil {
		return nil, err
	}
	return c.insert(ctx, tx, req.ClusterID, p.Stages, "", 0, "", req.DeadlineS, req.NotBefore, storeLock(req.Lock), who)
}

// CreateIn is Create with the plan outside the write transaction
// (docs/architecture.md, "Runs and playbooks"): the cluster's nodes are
// read, the run planned against them (templates rendered, args checked
// against each node's args_schema) with no transaction held, and the
// transaction then only checks that the nodes are still those it was
// planned on before it stores the run and calls after (if not nil).
func (c *Creator) CreateIn(ctx context.Context, st store.Store, req *wire.CreateRunRequest, who actions.Actor,
	after func(tx store.Tx, r *store.Run) error) (*store.Run, error) {
	if err := Check(req); err != nil {
		return nil, err
	}
	plan := func() (*Planned, error) {
		var nodes []store.Node
		err := st.Read(ctx, func(r store.Reader) error {
			var err error
			nodes, err = ReadNodes(ctx, r, req.ClusterID)
			return err
		})
		if err != nil {
			return nil, err
		}
		return c.planRun(req, nodes)
	}
	return Replanning(ctx, st, plan, func(tx store.Tx, p *Planned) (*store.Run, error) {
		if err := p.Recheck(ctx, tx); err != nil {
			return nil, err
		}
		r, err := c.insert(ctx, tx, req.ClusterID, p.Stages, "", 0, "", req.DeadlineS, req.NotBefore, storeLock(req.Lock), who)
		if err != nil || after == nil {
			return r, err
		}
		return r, after(tx, r)
	})
}

// planRun resolves a checked req against nodes.
func (c *Creator) planRun(req *wire.CreateRunRequest, nodes []store.Node) (*Planned, error) {
	stages, err := Resolve(req, nodes, nil, c.kindLocks())
	if err != nil {
		return nil, err
	}
	if c.planned != nil {
		c.planned()
	}
	d, err := NodesDigest(nodes)
	if err != nil {
		return nil, err
	}
	return &Planned{Cluster: req.ClusterID, Stages: stages, Nodes: d}, nil
}

// InsertAt stores a run over resolved stages (a playbook's plan) that
// starts no earlier than notBefore (nil: at once) and takes lock from its
// start to its end (nil: none).
func (c *Creator) InsertAt(ctx context.Context, tx store.Tx, clusterID string, stages []store.RunStage,
	playbook string, version int, notBefore *time.Time, lock *store.Lock, who actions.Actor) (*store.Run, error) {
	return c.insert(ctx, tx, clusterID, stages, playbook, version, "", 0, notBefore, lock, who)
}

// insert stores a new run over stages: PENDING_APPROVE, or RUNNING with
// its first wave when no rule asks for approval. retryOf links a retry to
// the run it retries.
func (c *Creator) insert(ctx context.Context, tx store.Tx, clusterID string, stages []store.RunStage,
	playbook string, version int, retryOf string, deadlineS int, notBefore *time.Time, lock *store.Lock,
	who actions.Actor) (*store.Run, error) {
	t := c.now()
	if notBefore != nil {
		notBefore = action.TimePtr(*notBefore)
	}
	r := &store.Run{
		ID: action.NewID(), ClusterID: clusterID, State: store.RunPendingApprove, Requester: who.Name,
		Playbook: playbook, PlaybookVersion: version, Digest: DigestRunLocked(clusterID, stages, deadlineS, notBefore, lock),
		Stages: stages, CreatedTS: t, UpdatedTS: t, RetryOf: retryOf, DeadlineS: deadlineS, NotBefore: notBefore, Lock: lock,
	}
	auto := !c.needsApproval(clusterID, stages)
	if auto {
		r.State, r.StateReason = store.RunRunning, "approval not required"
		startDeadline(r, t)
	}
	children := 0
	for _, st := range stages {
		children += len(st.Nodes)
	}
	msg := fmt.Sprintf("%s created run %s on %s: %d stage(s), %d child action(s) (%s)", who.Name, r.ID,
		clusterID, len(stages), children, r.State)
	if playbook != "" {
		msg = fmt.Sprintf("%s started playbook %s v%d as run %s on %s: %d stage(s), %d child action(s) (%s)",
			who.Name, playbook, version, r.ID, clusterID, len(stages), children, r.State)
	}
	if retryOf != "" {
		msg += fmt.Sprintf(", retrying the failed and skipped nodes of run %s", retryOf)
	}
	ch := newRunChange(r)
	ch.event(store.EventRunCreated, who, t, msg, map[string]any{"state": r.State, "digest": r.Digest})
	if !auto {
		ch.event(store.EventApprovalWaiting, who, t,
			fmt.Sprintf("run %s on %s waits for an approver (requested by %s)", r.ID, clusterID, who.Name),
			map[string]any{"reason": "created"})
	}
	if err := ch.save(ctx, tx); err != nil {
		return nil, err
	}
	if auto {
		if _, err := c.adv.advance(ctx, tx, r, t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Occurrence is a run a schedule's occurrence makes (core/schedule):
// approved already by the schedule's approver, with an id derived from the
// schedule and the occurrence time.
type Occurrence struct {
	ID         string
	ScheduleID string
	Schedule   string
	At         time.Time
	Requester  string
	ApprovedBy string
	// Lock is the lock the run takes from its start to its end (nil: none).
	Lock *store.Lock
	// Origin says what made the run, in its events and state reason
	// ("schedule NAME" when empty).
	Origin string
}

// InsertOccurrence stores the run of a schedule's occurrence over resolved
// stages (a playbook's plan), RUNNING and approved by o.ApprovedBy, and
// creates its first wave. A run with o.ID already stored is
// store.ErrExists: that occurrence made its run already.
func (c *Creator) InsertOccurrence(ctx context.Context, tx store.Tx, o Occurrence, clusterID string, stages []store.RunStage,
	playbook string, version int) (*store.Run, error) {
	t := c.now()
	origin := o.Origin
	if origin == "" {
		origin = "schedule " + o.Schedule
	}
	r := &store.Run{
		ID: o.ID, ClusterID: clusterID, State: store.RunRunning,
		StateReason: fmt.Sprintf("approved with %s", origin), Requester: o.Requester,
		ApprovedBy: o.ApprovedBy, Playbook: playbook, PlaybookVersion: version, Digest: DigestRunLocked(clusterID, stages, 0, nil, o.Lock),
		Stages: stages, CreatedTS: t, UpdatedTS: t, ScheduleID: o.ScheduleID, Lock: o.Lock,
	}
	children := 0
	for _, st := range stages {
		children += len(st.Nodes)
	}
	ch := newRunChange(r)
	ch.event(store.EventRunCreated, actions.Core, t,
		fmt.Sprintf("%s started playbook %s v%d as run %s on %s for its occurrence at %s: %d stage(s), %d child action(s)",
			origin, playbook, version, r.ID, clusterID, o.At.UTC().Format(time.RFC3339), len(stages), children),
		map[string]any{"state": r.State, "digest": r.Digest, "schedule": o.Schedule, "occurrence": o.At.UTC()})
	ch.event(store.EventRunApproved, actions.Actor{Name: o.ApprovedBy}, t,
		fmt.Sprintf("run %s on %s approved by %s through %s", r.ID, clusterID, o.ApprovedBy, origin),
		map[string]any{"digest": r.Digest, "schedule": o.Schedule})
	if err := ch.save(ctx, tx); err != nil {
		return nil, err
	}
	if _, err := c.adv.advance(ctx, tx, r, t); err != nil {
		return nil, err
	}
	return r, nil
}

// startDeadline sets when r's deadline falls, r starting to run at t, or at
// its not_before when that is later: a run that may not start yet is not
// spending its time.
func startDeadline(r *store.Run, t time.Time) {
	if r.DeadlineS > 0 {
		r.DeadlineTS = action.TimePtr(actions.LaterOf(t, r.NotBefore).Add(time.Duration(r.DeadlineS) * time.Second))
	}
}
