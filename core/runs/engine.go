package runs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// Errors of run changes are those of the action rules, matched with
// errors.Is: a change the run's state does not allow is an
// *actions.StateError (Of: actions.OfRun) matching actions.ErrWrongState (a
// 409); an approval by the run's own requester is actions.ErrForbidden (a
// 403).
var (
	ErrWrongState = actions.ErrWrongState
	ErrForbidden  = actions.ErrForbidden
)

func wrongState(r *store.Run, what string) error {
	return &actions.StateError{Of: actions.OfRun, ID: r.ID, State: r.State, What: what}
}

// Reasons of run changes.
const (
	ReasonCreated   = "created"
	ReasonApproved  = "approved"
	ReasonRejected  = "rejected"
	ReasonExpired   = "approval expired"
	ReasonPaused    = "paused"
	ReasonResumed   = "resumed"
	ReasonCancelled = "cancelled"
	// ReasonNodeForgotten ends a child whose node was forgotten after its
	// run was resolved (actions.CreateChild).
	ReasonNodeForgotten = actions.ReasonNodeForgotten
)

// Actions is what the engine needs of the action rules (*actions.Rules):
// it creates and cancels child actions only through them, so a child's
// state, approval, digest, history and events are decided where every other
// action's are.
type Actions interface {
	// CreateChild stores a run's child: approved with its run, or born
	// CANCELLED when its node was forgotten.
	CreateChild(ctx context.Context, tx store.Tx, ch actions.Child, by actions.Actor) (*store.Record, error)
	// CancelChild cancels an unfinished child, or asks its agent to (a
	// pushed one); it does nothing to a finished one.
	CancelChild(ctx context.Context, tx store.Tx, rec *store.Record, by actions.Actor, why string) (*store.Record, error)
}

var _ Actions = (*actions.Rules)(nil)

// Engine makes every change to runs, each in the caller's transaction.
type Engine struct {
	Policy  *live.Value[approval.Policy]
	Actions Actions
	// Now returns the current time (UTC, microseconds); time.Now when nil.
	Now func() time.Time
	// planned, for tests, is called once a run is planned, before it is
	// stored; advancePlanned once a run's next step is decided, before it
	// is stored.
	planned        func()
	advancePlanned func()
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return action.UTC(e.Now())
	}
	return action.UTC(time.Now())
}

func runEvent(r *store.Run, typ string, who actions.Actor, t time.Time, msg string, data map[string]any) *store.Event {
	return &store.Event{TS: t, Type: typ, Actor: who.Name, ClientAddr: who.Addr, ClusterID: r.ClusterID,
		RunID: r.ID, Message: msg, Data: data}
}

// NeedsApproval reports whether a run over these stages must be approved:
// the strictest rule over its kinds decides.
func (e *Engine) NeedsApproval(clusterID string, stages []store.RunStage) bool {
	pol := e.Policy.Load()
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
func (e *Engine) Create(ctx context.Context, tx store.Tx, req *wire.CreateRunRequest, who actions.Actor) (*store.Run, error) {
	if err := Check(req); err != nil {
		return nil, err
	}
	nodes, err := ReadNodes(ctx, tx, req.ClusterID)
	if err != nil {
		return nil, err
	}
	p, err := e.planRun(req, nodes)
	if err != nil {
		return nil, err
	}
	return e.insert(ctx, tx, req.ClusterID, p.Stages, "", 0, "", req.DeadlineS, req.NotBefore, who)
}

// CreateIn is Create with the plan outside the write transaction
// (docs/architecture.md, "Runs and playbooks"): the cluster's nodes are
// read, the run planned against them (templates rendered, args checked
// against each node's args_schema) with no transaction held, and the
// transaction then only checks that the nodes are still those it was
// planned on before it stores the run and calls after (if not nil).
func (e *Engine) CreateIn(ctx context.Context, st store.Store, req *wire.CreateRunRequest, who actions.Actor,
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
		return e.planRun(req, nodes)
	}
	return Replanning(ctx, st, plan, func(tx store.Tx, p *Planned) (*store.Run, error) {
		if err := p.Recheck(ctx, tx); err != nil {
			return nil, err
		}
		r, err := e.insert(ctx, tx, req.ClusterID, p.Stages, "", 0, "", req.DeadlineS, req.NotBefore, who)
		if err != nil || after == nil {
			return r, err
		}
		return r, after(tx, r)
	})
}

// planRun resolves a checked req against nodes.
func (e *Engine) planRun(req *wire.CreateRunRequest, nodes []store.Node) (*Planned, error) {
	stages, err := Resolve(req, nodes)
	if err != nil {
		return nil, err
	}
	if e.planned != nil {
		e.planned()
	}
	d, err := NodesDigest(nodes)
	if err != nil {
		return nil, err
	}
	return &Planned{Cluster: req.ClusterID, Stages: stages, Nodes: d}, nil
}

// Insert stores a run over resolved stages (a playbook's plan, or Create's).
func (e *Engine) Insert(ctx context.Context, tx store.Tx, clusterID string, stages []store.RunStage,
	playbook string, version int, who actions.Actor) (*store.Run, error) {
	return e.insert(ctx, tx, clusterID, stages, playbook, version, "", 0, nil, who)
}

// InsertAt is Insert for a run that starts no earlier than notBefore (nil:
// at once).
func (e *Engine) InsertAt(ctx context.Context, tx store.Tx, clusterID string, stages []store.RunStage,
	playbook string, version int, notBefore *time.Time, who actions.Actor) (*store.Run, error) {
	return e.insert(ctx, tx, clusterID, stages, playbook, version, "", 0, notBefore, who)
}

func (e *Engine) insert(ctx context.Context, tx store.Tx, clusterID string, stages []store.RunStage,
	playbook string, version int, retryOf string, deadlineS int, notBefore *time.Time, who actions.Actor) (*store.Run, error) {
	t := e.now()
	if notBefore != nil {
		notBefore = action.TimePtr(*notBefore)
	}
	r := &store.Run{
		ID: action.NewID(), ClusterID: clusterID, State: store.RunPendingApprove, Requester: who.Name,
		Playbook: playbook, PlaybookVersion: version, Digest: DigestRunAt(clusterID, stages, deadlineS, notBefore), Stages: stages,
		CreatedTS: t, UpdatedTS: t, RetryOf: retryOf, DeadlineS: deadlineS, NotBefore: notBefore,
	}
	auto := !e.NeedsApproval(clusterID, stages)
	if auto {
		r.State, r.StateReason = store.RunRunning, "approval not required"
		startDeadline(r, t)
	}
	if err := tx.InsertRun(ctx, r); err != nil {
		return nil, err
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
	if err := tx.AppendEvent(ctx, runEvent(r, store.EventRunCreated, who, t, msg,
		map[string]any{"state": r.State, "digest": r.Digest})); err != nil {
		return nil, err
	}
	if !auto {
		if err := tx.AppendEvent(ctx, runEvent(r, store.EventApprovalWaiting, who, t,
			fmt.Sprintf("run %s on %s waits for an approver (requested by %s)", r.ID, clusterID, who.Name),
			map[string]any{"reason": "created"})); err != nil {
			return nil, err
		}
	}
	if auto {
		if _, err := e.advance(ctx, tx, r, t); err != nil {
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
}

// InsertOccurrence stores the run of a schedule's occurrence over resolved
// stages (a playbook's plan), RUNNING and approved by o.ApprovedBy, and
// creates its first wave. A run with o.ID already stored is
// store.ErrExists: that occurrence made its run already.
func (e *Engine) InsertOccurrence(ctx context.Context, tx store.Tx, o Occurrence, clusterID string, stages []store.RunStage,
	playbook string, version int) (*store.Run, error) {
	t := e.now()
	r := &store.Run{
		ID: o.ID, ClusterID: clusterID, State: store.RunRunning,
		StateReason: fmt.Sprintf("approved with schedule %s", o.Schedule), Requester: o.Requester,
		ApprovedBy: o.ApprovedBy, Playbook: playbook, PlaybookVersion: version, Digest: Digest(clusterID, stages),
		Stages: stages, CreatedTS: t, UpdatedTS: t, ScheduleID: o.ScheduleID,
	}
	if err := tx.InsertRun(ctx, r); err != nil {
		return nil, err
	}
	core := actions.Actor{Name: store.ActorCore}
	children := 0
	for _, st := range stages {
		children += len(st.Nodes)
	}
	if err := tx.AppendEvent(ctx, runEvent(r, store.EventRunCreated, core, t,
		fmt.Sprintf("schedule %s started playbook %s v%d as run %s on %s for its occurrence at %s: %d stage(s), %d child action(s)",
			o.Schedule, playbook, version, r.ID, clusterID, o.At.UTC().Format(time.RFC3339), len(stages), children),
		map[string]any{"state": r.State, "digest": r.Digest, "schedule": o.Schedule, "occurrence": o.At.UTC()})); err != nil {
		return nil, err
	}
	if err := tx.AppendEvent(ctx, runEvent(r, store.EventRunApproved, actions.Actor{Name: o.ApprovedBy}, t,
		fmt.Sprintf("run %s on %s approved by %s through schedule %s", r.ID, clusterID, o.ApprovedBy, o.Schedule),
		map[string]any{"digest": r.Digest, "schedule": o.Schedule})); err != nil {
		return nil, err
	}
	if _, err := e.advance(ctx, tx, r, t); err != nil {
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

// load reads run id and checks that it is in one of the states from.
func load(ctx context.Context, tx store.Tx, id, what string, from ...string) (*store.Run, error) {
	r, err := tx.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, s := range from {
		if r.State == s {
			return r, nil
		}
	}
	return nil, wrongState(r, what)
}

// Approve approves run id as who and creates its first wave. A non-empty
// digest is what the approver was shown: the approval is refused when the
// run's digest is another.
func (e *Engine) Approve(ctx context.Context, tx store.Tx, id, digest string, who actions.Actor) (*store.Run, error) {
	r, err := load(ctx, tx, id, "approve", store.RunPendingApprove)
	if err != nil {
		return nil, err
	}
	t := e.now()
	// One policy decides, whatever reload lands meanwhile.
	pol := e.Policy.Load()
	if pol.MayApprove(r.Requester, "", who.Name, true) == approval.OwnRequest {
		return nil, fmt.Errorf("%w: %s requested run %s and may not approve it too", ErrForbidden, who.Name, r.ID)
	}
	// The approval's time counts from a later start.
	if actions.WindowPassed(pol.TTL, r.CreatedTS, r.NotBefore, t) {
		return nil, wrongState(r, fmt.Sprintf("approve: the approval window of %s has passed", pol.TTL))
	}
	if r.Playbook != "" && !pol.SelfApproval {
		// Four eyes over the content too: whoever applied the playbook
		// version may not approve the runs made from it.
		pb, err := tx.Playbook(ctx, r.Playbook, r.PlaybookVersion)
		if err != nil {
			return nil, err
		}
		if pol.MayApprove(r.Requester, pb.CreatedBy, who.Name, true) == approval.AppliedPlaybook {
			return nil, fmt.Errorf("%w: %s applied playbook %s version %d and may not approve its runs", ErrForbidden,
				who.Name, r.Playbook, r.PlaybookVersion)
		}
	}
	if DigestRunAt(r.ClusterID, r.Stages, r.DeadlineS, r.NotBefore) != r.Digest {
		return nil, wrongState(r, "approve: the run no longer matches its digest")
	}
	if digest != "" && digest != r.Digest {
		return nil, wrongState(r, fmt.Sprintf("approve: digest %.12s is not the run's (%.12s): look at the run again", digest, r.Digest))
	}
	r.State, r.StateReason, r.ApprovedBy, r.UpdatedTS = store.RunRunning, ReasonApproved, who.Name, t
	startDeadline(r, t)
	if err := tx.UpdateRun(ctx, r); err != nil {
		return nil, err
	}
	if err := tx.AppendEvent(ctx, runEvent(r, store.EventRunApproved, who, t,
		fmt.Sprintf("%s approved run %s on %s", who.Name, r.ID, r.ClusterID), map[string]any{"digest": r.Digest})); err != nil {
		return nil, err
	}
	if _, err := e.advance(ctx, tx, r, t); err != nil {
		return nil, err
	}
	return r, nil
}

// Retry makes a new run with the same stages as the finished run id over
// the nodes it did not carry through (failed, skipped, or never reached),
// linked by RetryOf and approved as any run. A run whose every node
// succeeded has nothing to retry (a 409).
func (e *Engine) Retry(ctx context.Context, tx store.Tx, id string, who actions.Actor) (*store.Run, error) {
	r, err := load(ctx, tx, id, "retry", store.RunPartial, store.RunFailed, store.RunCancelled)
	if err != nil {
		return nil, err
	}
	kids, err := children(ctx, tx, r.ID, r.ApprovedBy)
	if err != nil {
		return nil, err
	}
	var stages []store.RunStage
	kept := map[string]bool{}
	for i := range r.Stages {
		st := r.Stages[i]
		v := viewStage(&st, kids, PlanEnv{})
		var nodes []string
		for j, ns := range v.nodes {
			if ns.status != nodeDone {
				nodes = append(nodes, st.Nodes[j])
			}
		}
		if len(nodes) == 0 {
			continue
		}
		st.Nodes, st.State, st.Forgiven, st.Failed, st.Skipped, st.NodeCount = nodes, store.StagePending, 0, nil, nil, 0
		// A new run: its canary pauses it again, and nodes unavailable
		// at their turn are decided again.
		st.Promoted, st.Unreachable = false, nil
		stages = append(stages, st)
		kept[st.Name] = true
	}
	if len(stages) == 0 {
		return nil, wrongState(r, "retry: every node of the run succeeded")
	}
	for i := range stages {
		deps := []string{}
		for _, d := range stages[i].DependsOn {
			if kept[d] {
				deps = append(deps, d)
			}
		}
		stages[i].DependsOn = deps
	}
	return e.insert(ctx, tx, r.ClusterID, stages, r.Playbook, r.PlaybookVersion, r.ID, r.DeadlineS, nil, who)
}

// Reject cancels a run waiting for approval.
func (e *Engine) Reject(ctx context.Context, tx store.Tx, id string, who actions.Actor, reason string) (*store.Run, error) {
	r, err := load(ctx, tx, id, "reject", store.RunPendingApprove)
	if err != nil {
		return nil, err
	}
	return r, e.finish(ctx, tx, r, store.RunCancelled, joinReason(ReasonRejected, reason), store.EventRunRejected, who,
		fmt.Sprintf("%s rejected run %s on %s", who.Name, r.ID, r.ClusterID))
}

func joinReason(base, extra string) string {
	if extra = strings.TrimSpace(extra); extra != "" {
		return base + ": " + extra
	}
	return base
}

func (e *Engine) finish(ctx context.Context, tx store.Tx, r *store.Run, state, reason, typ string, who actions.Actor, msg string) error {
	t := e.now()
	r.State, r.StateReason, r.UpdatedTS, r.FinishedTS = state, reason, t, action.TimePtr(t)
	if err := tx.UpdateRun(ctx, r); err != nil {
		return err
	}
	return tx.AppendEvent(ctx, runEvent(r, typ, who, t, msg, map[string]any{"state": state, "reason": reason}))
}

// Pause stops a running run from creating children; those running finish.
func (e *Engine) Pause(ctx context.Context, tx store.Tx, id string, who actions.Actor) (*store.Run, error) {
	r, err := load(ctx, tx, id, "pause", store.RunRunning)
	if err != nil {
		return nil, err
	}
	t := e.now()
	r.State, r.StateReason, r.UpdatedTS = store.RunPaused, ReasonPaused+" by "+who.Name, t
	if err := tx.UpdateRun(ctx, r); err != nil {
		return nil, err
	}
	return r, tx.AppendEvent(ctx, runEvent(r, store.EventRunPaused, who, t,
		fmt.Sprintf("%s paused run %s", who.Name, r.ID), nil))
}

// Resume lets a paused run go on. When a stage's errors paused it
// (on_failure: pause), the errors seen so far in that stage are forgiven:
// only new ones count against its max_errors. A run paused by a person
// forgives nothing, so pausing and resuming cannot lift a limit the
// approver signed.
//
// Forgiving errors lifts, once, a limit the approver signed, so it takes
// what an approval takes: mayApprove (the caller holds the approver role)
// and another person than the requester, unless self-approval is allowed.
func (e *Engine) Resume(ctx context.Context, tx store.Tx, id string, who actions.Actor, mayApprove bool) (*store.Run, error) {
	return e.ResumeAs(ctx, tx, id, who, mayApprove, true)
}

// ResumeAs is Resume by a caller who may approve (mayApprove) and may
// operate (mayOperate), as MayResume decides: the API and the web UI both
// resume with it.
func (e *Engine) ResumeAs(ctx context.Context, tx store.Tx, id string, who actions.Actor, mayApprove, mayOperate bool) (*store.Run, error) {
	r, err := load(ctx, tx, id, "resume", store.RunPaused)
	if err != nil {
		return nil, err
	}
	counts, err := stageErrors(ctx, tx, r)
	if err != nil {
		return nil, err
	}
	forgiven, err := e.resumeRule(r, who.Name, mayApprove, mayOperate, counts)
	if err != nil {
		return nil, err
	}
	for i := range r.Stages {
		if slices.Contains(forgiven, r.Stages[i].Name) {
			r.Stages[i].Forgiven = counts[i]
		}
	}
	t := e.now()
	r.State, r.StateReason, r.UpdatedTS = store.RunRunning, ReasonResumed+" by "+who.Name, t
	if err := tx.UpdateRun(ctx, r); err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("%s resumed run %s", who.Name, r.ID)
	data := map[string]any{}
	if len(forgiven) > 0 {
		msg += fmt.Sprintf(", forgiving the errors of stage(s) %s", strings.Join(forgiven, ", "))
		data["forgiven"] = forgiven
	}
	if err := tx.AppendEvent(ctx, runEvent(r, store.EventRunResumed, who, t, msg, data)); err != nil {
		return nil, err
	}
	_, err = e.advance(ctx, tx, r, t)
	return r, err
}

// MayResume says whether who may resume run r, paused, now: nil when
// they may, the error ResumeAs would return otherwise. Resuming a manual
// pause, which forgives nothing, stays with operators (mayOperate);
// resuming past errors forgives them, so it takes an approver (mayApprove)
// other than the requester, unless self-approval is allowed. The web UI
// shows its Resume button by it. It reads no child: each stage's errors
// are its failed nodes as the run's last advance stored them (ResumeAs
// counts them from the children).
func (e *Engine) MayResume(ctx context.Context, rd store.Reader, r *store.Run, who string, mayApprove, mayOperate bool) error {
	if r.State != store.RunPaused {
		return wrongState(r, "resume")
	}
	errs := make([]int, len(r.Stages))
	for i := range r.Stages {
		errs[i] = len(r.Stages[i].Failed)
	}
	_, err := e.resumeRule(r, who, mayApprove, mayOperate, errs)
	return err
}

// stageErrors counts the errors of each stage of r from its children.
func stageErrors(ctx context.Context, rd store.Reader, r *store.Run) ([]int, error) {
	kids, err := children(ctx, rd, r.ID, r.ApprovedBy)
	if err != nil {
		return nil, err
	}
	errs := make([]int, len(r.Stages))
	for i := range r.Stages {
		errs[i] = Count(&r.Stages[i], kids).Errors
	}
	return errs, nil
}

// resumeRule is MayResume's decision, given the error count of every
// stage. It returns the stages whose errors the resume forgives.
func (e *Engine) resumeRule(r *store.Run, who string, mayApprove, mayOperate bool, errs []int) ([]string, error) {
	var forgiven []string
	for i := range r.Stages {
		st := &r.Stages[i]
		if st.OnFailure == OnFailurePause && errs[i]-st.Forgiven > st.MaxErrors.Floor(len(st.Nodes)) {
			forgiven = append(forgiven, st.Name)
		}
	}
	if strings.HasPrefix(r.StateReason, "canary") {
		return nil, wrongState(r, "resume: it waits for an approver to promote its canary (promote)")
	}
	if len(forgiven) == 0 && !mayOperate {
		return nil, fmt.Errorf("%w: run %s was paused by hand: resuming it is an operator's", ErrForbidden, r.ID)
	}
	if len(forgiven) > 0 && e.Policy.Load().MayApprove(r.Requester, "", who, mayApprove) != approval.MayDecide {
		return nil, fmt.Errorf("%w: resuming run %s forgives the errors of stage(s) %s past the max_errors its approver signed: "+
			"that takes an approver other than %s", ErrForbidden, r.ID, strings.Join(forgiven, ", "), r.Requester)
	}
	return forgiven, nil
}

// Why a run is PAUSED (PausedFor).
const (
	// PauseManual: a person paused it; an operator resumes it.
	PauseManual = wire.PausedManual
	// PauseErrors: a stage with on_failure pause passed its max_errors;
	// an approver other than the requester resumes it, forgiving them.
	PauseErrors = wire.PausedErrors
	// PauseCanary: a stage's canary nodes are through; an approver other
	// than the requester promotes it.
	PauseCanary = wire.PausedCanary
)

// PausedFor says why run r is PAUSED, from its state reason alone (the
// engine writes one of three forms): PauseCanary, PauseErrors or
// PauseManual; "" when it is not paused.
func PausedFor(r *store.Run) string {
	switch {
	case r.State != store.RunPaused:
		return ""
	case strings.HasPrefix(r.StateReason, "canary"):
		return PauseCanary
	case strings.HasPrefix(r.StateReason, ReasonPaused+" by "):
		return PauseManual
	}
	return PauseErrors
}

// MayPromote says whether who may promote run r's canary now: nil when
// they may, the error Promote would return otherwise. The web UI shows its
// Promote button by it.
func (e *Engine) MayPromote(ctx context.Context, rd store.Reader, r *store.Run, who string, mayApprove bool) error {
	_, err := e.promoteRule(r, who, mayApprove)
	return err
}

// promoteRule is MayPromote's decision: the stages a promote of r by who
// promotes, or why it may not.
func (e *Engine) promoteRule(r *store.Run, who string, mayApprove bool) ([]string, error) {
	if r.State != store.RunPaused {
		return nil, wrongState(r, "promote")
	}
	var promoted []string
	for i := range r.Stages {
		st := &r.Stages[i]
		if st.State == store.StageRunning && st.Canary > 0 && !st.Promoted {
			promoted = append(promoted, st.Name)
		}
	}
	if len(promoted) == 0 || PausedFor(r) != PauseCanary {
		return nil, wrongState(r, "promote: it is not paused after a canary")
	}
	if e.Policy.Load().MayApprove(r.Requester, "", who, mayApprove) != approval.MayDecide {
		return nil, fmt.Errorf("%w: promoting the canary of run %s takes an approver other than %s", ErrForbidden,
			r.ID, r.Requester)
	}
	return promoted, nil
}

// Promote lets a run paused after its canary go on: the stage's canary
// is promoted and the rest of its nodes start. It takes an approver
// (mayApprove) other than the requester, unless self-approval is allowed.
func (e *Engine) Promote(ctx context.Context, tx store.Tx, id string, who actions.Actor, mayApprove bool) (*store.Run, error) {
	r, err := load(ctx, tx, id, "promote", store.RunPaused)
	if err != nil {
		return nil, err
	}
	promoted, err := e.promoteRule(r, who.Name, mayApprove)
	if err != nil {
		return nil, err
	}
	for i := range r.Stages {
		if slices.Contains(promoted, r.Stages[i].Name) {
			r.Stages[i].Promoted = true
		}
	}
	t := e.now()
	r.State, r.StateReason, r.UpdatedTS = store.RunRunning, "promoted by "+who.Name, t
	if err := tx.UpdateRun(ctx, r); err != nil {
		return nil, err
	}
	if err := tx.AppendEvent(ctx, runEvent(r, store.EventRunPromoted, who, t,
		fmt.Sprintf("%s promoted the canary of stage(s) %s of run %s", who.Name, strings.Join(promoted, ", "), r.ID),
		map[string]any{"stages": promoted})); err != nil {
		return nil, err
	}
	_, err = e.advance(ctx, tx, r, t)
	return r, err
}

// Cancel ends a run that is not final: it creates no more children and
// cancels those not finished.
func (e *Engine) Cancel(ctx context.Context, tx store.Tx, id string, who actions.Actor, reason string) (*store.Run, error) {
	r, err := load(ctx, tx, id, "cancel", store.RunPendingApprove, store.RunRunning, store.RunPaused)
	if err != nil {
		return nil, err
	}
	recs, err := tx.RunChildren(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		if !recs[i].State.Final() {
			if _, err := e.Actions.CancelChild(ctx, tx, &recs[i], who, ReasonRunCancelled); err != nil {
				return nil, err
			}
		}
	}
	return r, e.finish(ctx, tx, r, store.RunCancelled, joinReason(ReasonCancelled+" by "+who.Name, reason),
		store.EventRunCancelled, who, fmt.Sprintf("%s cancelled run %s", who.Name, r.ID))
}

// MarkUrgent marks run id urgent with the reason who gives (who.Note,
// required): its children, those not yet sent and those to come, pass the
// cluster's closed maintenance window, never a freeze. Like an approval,
// the run's requester may not mark it (ErrForbidden) unless the policy
// allows self-approval; the mark is a run.urgent event.
func (e *Engine) MarkUrgent(ctx context.Context, tx store.Tx, id string, who actions.Actor) (*store.Run, error) {
	r, err := load(ctx, tx, id, "mark urgent", store.RunPendingApprove, store.RunRunning, store.RunPaused)
	if err != nil {
		return nil, err
	}
	if who.Note == "" {
		return nil, fmt.Errorf("%w: reason is required to mark a run urgent", actions.ErrUnprocessable)
	}
	if e.Policy.Load().MayApprove(r.Requester, "", who.Name, true) == approval.OwnRequest {
		return nil, fmt.Errorf("%w: %s requested run %s and may not mark it urgent too", ErrForbidden, who.Name, r.ID)
	}
	if r.Urgent == who.Note {
		return r, nil
	}
	t := e.now()
	r.Urgent, r.UpdatedTS = who.Note, t
	if err := tx.UpdateRun(ctx, r); err != nil {
		return nil, err
	}
	kids, err := tx.RunChildren(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	for i := range kids {
		k := &kids[i]
		if k.State != action.PendingSchedule || k.PushedStoreID != "" || k.Urgent == who.Note {
			continue
		}
		if err := actions.UrgentChild(ctx, tx, k, who.Note, t); err != nil {
			return nil, err
		}
	}
	return r, tx.AppendEvent(ctx, runEvent(r, store.EventRunUrgent, who, t,
		fmt.Sprintf("%s marked run %s urgent: %s", who.Name, r.ID, who.Note), map[string]any{"reason": who.Note}))
}

// Expire cancels the runs that waited for approval longer than the policy's
// TTL. It returns how many it cancelled.
func (e *Engine) Expire(ctx context.Context, tx store.Tx) (int, error) {
	// One TTL decides and is reported, whatever reload lands meanwhile.
	ttl := e.Policy.Load().TTL
	if ttl <= 0 {
		return 0, nil
	}
	// Oldest first, and brief: a pass does not read the node lists of
	// every run waiting, only of those that expire.
	t := e.now()
	var expired []string
	q := store.RunQuery{States: []string{store.RunPendingApprove}, Oldest: true, Brief: true, Limit: 100}
	for {
		page, err := tx.ListRuns(ctx, q)
		if err != nil {
			return 0, err
		}
		i := 0
		for ; i < len(page) && t.Sub(page[i].CreatedTS) > ttl; i++ {
			// The approval's time counts from a later start.
			if !actions.WindowPassed(ttl, page[i].CreatedTS, page[i].NotBefore, t) {
				continue
			}
			expired = append(expired, page[i].ID)
		}
		if i < len(page) || len(page) < q.Limit {
			break
		}
		q.Marker = page[len(page)-1].ID
	}
	n := 0
	for _, id := range expired {
		r, err := tx.Run(ctx, id)
		if err != nil {
			return n, err
		}
		if err := e.finish(ctx, tx, r, store.RunCancelled, ReasonExpired, store.EventRunExpired, actions.Core,
			fmt.Sprintf("run %s expired after waiting %s for approval", r.ID, ttl)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func children(ctx context.Context, r store.Reader, runID, approvedBy string) ([]Child, error) {
	recs, err := r.RunChildrenBrief(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make([]Child, len(recs))
	for i, rec := range recs {
		out[i] = ChildOf(&rec, approvedBy)
	}
	return out, nil
}

// Active lists the ids of a cluster's runs that Advance may move on:
// RUNNING or PAUSED, oldest first.
func (e *Engine) Active(ctx context.Context, r store.Reader, clusterID string) ([]string, error) {
	active, err := r.RunsInState(ctx, clusterID, store.RunRunning, store.RunPaused)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(active))
	for i := range active {
		ids[i] = active[i].ID
	}
	return ids, nil
}

// Advance moves one RUNNING or PAUSED run one step: its stages settle, its
// state follows, and the children its limits admit are created, ready to
// push. It returns how many children it created; a run with nothing to do
// writes nothing, and a run that is no longer active is left alone.
func (e *Engine) Advance(ctx context.Context, tx store.Tx, runID string) (int, error) {
	nodes, err := e.AdvanceNodes(ctx, tx, runID)
	return len(nodes), err
}

// AdvanceNodes is Advance, returning the node of every child it created
// (a node once per child), so that the caller syncs those nodes alone.
func (e *Engine) AdvanceNodes(ctx context.Context, tx store.Tx, runID string) ([]string, error) {
	r, err := tx.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r.State != store.RunRunning && r.State != store.RunPaused {
		return nil, nil
	}
	return e.advance(ctx, tx, r, e.now())
}

// advance moves run r one step (see Advance) in tx and returns the nodes
// of the children it created.
func (e *Engine) advance(ctx context.Context, tx store.Tx, r *store.Run, t time.Time) ([]string, error) {
	kids, err := children(ctx, tx, r.ID, r.ApprovedBy)
	if err != nil {
		return nil, err
	}
	step, env, _, err := e.plan(ctx, tx, r, kids, t)
	if err != nil {
		return nil, err
	}
	if e.advancePlanned != nil {
		e.advancePlanned()
	}
	created, again, err := e.apply(ctx, tx, r, kids, step, env, t)
	if err != nil || !again {
		return created, err
	}
	more, err := e.advance(ctx, tx, r, t)
	return append(created, more...), err
}

// apply stores step, planned for run r over its children kids in env at
// t: the run's stages and state, its events and the children to create.
// again is true when the run should take its next step at once (nodes
// found unavailable at their turn were decided, or children were born
// finished).
func (e *Engine) apply(ctx context.Context, tx store.Tx, r *store.Run, kids []Child, step Step, env PlanEnv,
	t time.Time) (created []string, again bool, err error) {
	who := actions.Core
	changed := step.State != r.State
	for i := range r.Stages {
		st := &r.Stages[i]
		if i < len(step.Failed) && !slices.Equal(step.Failed[i], st.Failed) {
			st.Failed, changed = step.Failed[i], true
		}
		if i < len(step.Skipped) && !slices.Equal(step.Skipped[i], st.Skipped) {
			st.Skipped, changed = step.Skipped[i], true
		}
	}
	decided := false // a node unavailable at its turn failed or was skipped
	for i, us := range step.Unreachable {
		st := &r.Stages[i]
		if st.Unreachable == nil {
			st.Unreachable = map[string]store.Unreachable{}
		}
		for node, u := range us {
			st.Unreachable[node], changed = u, true
			if u.As != UnavailableWait {
				decided = true
			}
			if err := tx.AppendEvent(ctx, runEvent(r, store.EventRunNodeUnavailable, actions.Core, t,
				fmt.Sprintf("run %s: stage %s: node %s is unavailable at its turn (%s)", r.ID, st.Name, node, u.As),
				map[string]any{"stage": st.Name, "node": node, "as": u.As})); err != nil {
				return nil, false, err
			}
		}
	}
	if decided {
		r.UpdatedTS = t
		return nil, true, tx.UpdateRun(ctx, r)
	}
	if r.State == store.RunRunning && step.State == store.RunRunning {
		// What holds its next nodes (with the nodes found waiting just
		// now), said in its own reason.
		if why := WithWaiting(r.StateReason, Waiting(r, kids, env)); why != r.StateReason {
			r.StateReason, changed = why, true
		}
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		if step.Stages[i] == st.State {
			continue
		}
		from := st.State
		st.State, changed = step.Stages[i], true
		switch {
		case from == store.StagePending && st.State == store.StageRunning:
			err = tx.AppendEvent(ctx, runEvent(r, store.EventRunStageStarted, who, t,
				fmt.Sprintf("run %s: stage %s started on %d node(s)", r.ID, st.Name, len(st.Nodes)),
				map[string]any{"stage": st.Name}))
		case st.State == store.StageDone || st.State == store.StageFailed:
			errs := len(step.Failed[i]) // the stage's errors: one a failed node
			err = tx.AppendEvent(ctx, runEvent(r, store.EventRunStageFinished, who, t,
				fmt.Sprintf("run %s: stage %s %s (%d errors)", r.ID, st.Name, st.State, errs),
				map[string]any{"stage": st.Name, "state": st.State, "errors": errs}))
		}
		if err != nil {
			return nil, false, err
		}
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
		rec, err := e.Actions.CreateChild(ctx, tx, actions.Child{RunID: r.ID, Stage: n.Stage, Wave: n.Wave,
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
		if changed {
			r.UpdatedTS = t
			if err := tx.UpdateRun(ctx, r); err != nil {
				return nil, false, err
			}
		}
		return created, true, nil
	}
	if !changed {
		return created, false, nil
	}
	if step.State != r.State {
		switch step.State {
		case store.RunDone, store.RunPartial, store.RunFailed:
			if step.State == store.RunFailed {
				// Children created but never sent do not run once their run
				// has failed; those on their agents finish.
				if err := e.cancelUnsent(ctx, tx, r); err != nil {
					return nil, false, err
				}
			}
			return created, false, e.finish(ctx, tx, r, step.State, step.Reason, store.EventRunFinished, who,
				fmt.Sprintf("run %s %s: %s", r.ID, step.State, step.Reason))
		case store.RunPaused:
			r.State, r.StateReason, r.UpdatedTS = step.State, step.Reason, t
			if err := tx.UpdateRun(ctx, r); err != nil {
				return nil, false, err
			}
			if err := tx.AppendEvent(ctx, runEvent(r, store.EventRunPaused, who, t,
				fmt.Sprintf("run %s paused: %s", r.ID, step.Reason), map[string]any{"reason": step.Reason})); err != nil {
				return nil, false, err
			}
			return created, false, tx.AppendEvent(ctx, runEvent(r, store.EventApprovalWaiting, who, t,
				fmt.Sprintf("run %s paused by errors waits for someone to resume or cancel it: %s", r.ID, step.Reason),
				map[string]any{"reason": "paused"}))
		}
	}
	r.UpdatedTS = t
	return created, false, tx.UpdateRun(ctx, r)
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
func (e *Engine) plan(ctx context.Context, rd store.Reader, r *store.Run, kids []Child, t time.Time) (Step, PlanEnv, nodesRead, error) {
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
func (e *Engine) cancelUnsent(ctx context.Context, tx store.Tx, r *store.Run) error {
	recs, err := tx.RunChildren(ctx, r.ID)
	if err != nil {
		return err
	}
	for i := range recs {
		if recs[i].State == action.PendingSchedule && recs[i].PushedStoreID == "" {
			if _, err := e.Actions.CancelChild(ctx, tx, &recs[i], actions.Core, ReasonRunEnded); err != nil {
				return err
			}
		}
	}
	return nil
}
