package runs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// Decider makes the changes people ask of a run (approve, reject, pause,
// resume, promote, cancel, mark urgent, retry), says whether they may
// (MayResume, MayPromote), and expires the runs that waited too long for
// approval. Each change is checked against the run's state and the
// approval policy, and stored with its event in the caller's transaction;
// one that lets the run go on takes its next step at once.
type Decider struct {
	*base
	create *Creator
	adv    *Advancer
}

// Approve approves run id as who and creates its first wave. A non-empty
// digest is what the approver was shown: the approval is refused when the
// run's digest is another.
func (d *Decider) Approve(ctx context.Context, tx store.Tx, id, digest string, who actions.Actor) (*store.Run, error) {
	r, err := load(ctx, tx, id, "approve", store.RunPendingApprove)
	if err != nil {
		return nil, err
	}
	t := d.now()
	if err := d.mayApprove(ctx, tx, r, digest, who.Name, t); err != nil {
		return nil, err
	}
	c := changeOf(r)
	r.State, r.StateReason, r.ApprovedBy, r.UpdatedTS = store.RunRunning, ReasonApproved, who.Name, t
	startDeadline(r, t)
	c.event(store.EventRunApproved, who, t, fmt.Sprintf("%s approved run %s on %s", who.Name, r.ID, r.ClusterID),
		map[string]any{"digest": r.Digest})
	if err := c.save(ctx, tx); err != nil {
		return nil, err
	}
	if _, err := d.adv.advance(ctx, tx, r, t); err != nil {
		return nil, err
	}
	return r, nil
}

// MayApprove says whether who may approve run r now, levels aside: nil
// when they may, the error Approve would return otherwise (its state,
// their own request or playbook version, the approval window, a digest
// that is not the run's). The operations layer checks it before it
// records one approval of several levels (docs/runs-and-playbooks.md,
// "Approval levels").
func (d *Decider) MayApprove(ctx context.Context, rd store.Reader, r *store.Run, digest, who string) error {
	if r.State != store.RunPendingApprove {
		return wrongState(r, "approve")
	}
	return d.mayApprove(ctx, rd, r, digest, who, d.now())
}

func (d *Decider) mayApprove(ctx context.Context, rd store.Reader, r *store.Run, digest, who string, t time.Time) error {
	// One policy decides, whatever reload lands meanwhile.
	pol := d.policy.Load()
	if pol.MayApprove(r.Requester, "", who, true) == approval.OwnRequest {
		return fmt.Errorf("%w: %s requested run %s and may not approve it too", ErrForbidden, who, r.ID)
	}
	// The approval's time counts from a later start.
	if actions.WindowPassed(pol.TTL, r.CreatedTS, r.NotBefore, t) {
		return wrongState(r, fmt.Sprintf("approve: the approval window of %s has passed", pol.TTL))
	}
	if r.Playbook != "" && !pol.SelfApproval {
		// Four eyes over the content too: whoever applied the playbook
		// version may not approve the runs made from it.
		applier, err := Applier(ctx, rd, r)
		if err != nil {
			return err
		}
		if pol.MayApprove(r.Requester, applier, who, true) == approval.AppliedPlaybook {
			return fmt.Errorf("%w: %s applied playbook %s version %d and may not approve its runs", ErrForbidden,
				who, r.Playbook, r.PlaybookVersion)
		}
	}
	if DigestRunLocked(r.ClusterID, r.Stages, r.DeadlineS, r.NotBefore, r.Lock) != r.Digest {
		return wrongState(r, "approve: the run no longer matches its digest")
	}
	if digest != "" && digest != r.Digest {
		return wrongState(r, fmt.Sprintf("approve: digest %.12s is not the run's (%.12s): look at the run again", digest, r.Digest))
	}
	return nil
}

// Applier is who applied the playbook version run r was made from ("" for
// a run of no playbook): with its requester, the person whose approval
// does not count.
func Applier(ctx context.Context, rd store.Reader, r *store.Run) (string, error) {
	if r.Playbook == "" {
		return "", nil
	}
	pb, err := rd.Playbook(ctx, r.Playbook, r.PlaybookVersion)
	if err != nil {
		return "", err
	}
	return pb.CreatedBy, nil
}

// Kinds are the kinds run r's steps run, each once, in order: what the
// approval rules match it by.
func Kinds(r *store.Run) []string {
	out := []string{}
	for i := range r.Stages {
		for _, sp := range r.Stages[i].Procedure() {
			if !slices.Contains(out, sp.Kind) {
				out = append(out, sp.Kind)
			}
		}
	}
	return out
}

// ResumeDigest is what an approval of resuming paused run r past its
// errors signs: the run's content and the errors forgiven, so that an
// approval of one pause never counts for the next.
func ResumeDigest(r *store.Run) string {
	fields := []string{"resume", r.Digest}
	for i := range r.Stages {
		st := &r.Stages[i]
		fields = append(fields, st.Name, strconv.Itoa(st.Forgiven), strings.Join(st.Failed, ","))
	}
	return digestOf(fields)
}

// PromoteDigest is what an approval of promoting run r's canary signs:
// the run's content and the stages promoted.
func PromoteDigest(r *store.Run) string {
	fields := []string{"promote", r.Digest}
	for i := range r.Stages {
		st := &r.Stages[i]
		if st.State == store.StageRunning && st.Canary > 0 && !st.Promoted {
			fields = append(fields, st.Name)
		}
	}
	return digestOf(fields)
}

func digestOf(fields []string) string {
	b, _ := json.Marshal(fields)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Retry makes a new run with the same stages as the finished run id over
// the nodes it did not carry through (failed, skipped, or never reached),
// linked by RetryOf and approved as any run. A run whose every node
// succeeded has nothing to retry (a 409).
func (d *Decider) Retry(ctx context.Context, tx store.Tx, id string, who actions.Actor) (*store.Run, error) {
	return d.RetryFrom(ctx, tx, id, who, "")
}

// RetryFrom is Retry from where each node stopped: with from
// wire.RetryFromFailed, each node that failed a stage of steps (and ran
// none of its rollback steps) starts at its failed step, its steps before
// it that ended DONE taken as done with their outputs (RunStage.Reuse);
// with "", every node starts at its first step, as Retry.
func (d *Decider) RetryFrom(ctx context.Context, tx store.Tx, id string, who actions.Actor, from string) (*store.Run, error) {
	if from != "" && from != wire.RetryFromFailed {
		return nil, invalid("retry: from %q is not %q (or nothing: from the first step)", from, wire.RetryFromFailed)
	}
	r, err := load(ctx, tx, id, "retry", store.RunPartial, store.RunFailed, store.RunCancelled, store.RunAborted)
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
		v := viewStage(&st, kids, PlanEnv{}, nil)
		var nodes []string
		var reuse map[string][]store.ReusedStep
		for j, ns := range v.nodes {
			if ns.status == nodeDone {
				continue
			}
			nodes = append(nodes, st.Nodes[j])
			if from == wire.RetryFromFailed && ns.status == nodeFailed {
				if done := reusable(&st, st.Nodes[j], kids); len(done) > 0 {
					if reuse == nil {
						reuse = map[string][]store.ReusedStep{}
					}
					reuse[st.Nodes[j]] = done
				}
			}
		}
		if len(nodes) == 0 {
			continue
		}
		st.Reuse = reuse
		st.Nodes, st.State, st.Forgiven, st.Failed, st.Skipped, st.NodeCount = nodes, store.StagePending, 0, nil, nil, 0
		// A new run: its canary pauses it again, and nodes unavailable
		// at their turn are decided again.
		st.Promoted, st.Unreachable, st.Aborted, st.Why = false, nil, false, nil
		st.ForgivenBy, st.PromotedBy = nil, ""
		st.Done, st.InFlight, st.RolledBack = 0, 0, 0
		// Its nodes are those listed, not "the nodes matching": with
		// follow, it would take back the nodes that succeeded (and its
		// digest would not cover the list).
		st.Follow, st.Joined = false, nil
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
	return d.create.insert(ctx, tx, r.ClusterID, stages, r.Playbook, r.PlaybookVersion, r.ID, r.DeadlineS, nil, r.Lock, who)
}

// Reject cancels a run waiting for approval.
func (d *Decider) Reject(ctx context.Context, tx store.Tx, id string, who actions.Actor, reason string) (*store.Run, error) {
	r, err := load(ctx, tx, id, "reject", store.RunPendingApprove)
	if err != nil {
		return nil, err
	}
	return r, finishRun(ctx, tx, r, store.RunCancelled, joinReason(ReasonRejected, reason), store.EventRunRejected, who,
		fmt.Sprintf("%s rejected run %s on %s", who.Name, r.ID, r.ClusterID), d.now())
}

func joinReason(base, extra string) string {
	if extra = strings.TrimSpace(extra); extra != "" {
		return base + ": " + extra
	}
	return base
}

// Pause stops a running run from creating children; those running finish.
func (d *Decider) Pause(ctx context.Context, tx store.Tx, id string, who actions.Actor) (*store.Run, error) {
	r, err := load(ctx, tx, id, "pause", store.RunRunning)
	if err != nil {
		return nil, err
	}
	if Aborting(r) {
		return nil, wrongState(r, "pause: it is rolling back after an abort")
	}
	t := d.now()
	c := changeOf(r)
	r.State, r.StateReason, r.UpdatedTS = store.RunPaused, ReasonPaused+" by "+who.Name, t
	c.event(store.EventRunPaused, who, t, fmt.Sprintf("%s paused run %s by hand: an operator resumes it", who.Name, r.ID),
		map[string]any{"paused_for": PauseManual})
	return r, c.save(ctx, tx)
}

// Resume lets a paused run go on. When a stage's errors paused it
// (on_failure: pause), the errors seen so far in that stage are forgiven:
// only new ones count against its max_errors. What a resume forgives is
// counted, not read from the pause reason (Forgives): a run paused by a
// person whose running nodes then failed past a max_errors forgives them
// too, so pausing and resuming cannot lift a limit the approver signed.
//
// Forgiving errors lifts, once, a limit the approver signed, so it takes
// what an approval takes: mayApprove (the caller holds the approver role)
// and another person than the requester, unless self-approval is allowed.
func (d *Decider) Resume(ctx context.Context, tx store.Tx, id string, who actions.Actor, mayApprove bool) (*store.Run, error) {
	return d.ResumeAs(ctx, tx, id, who, mayApprove, true)
}

// ResumeAs is Resume by a caller who may approve (mayApprove) and may
// operate (mayOperate), as MayResume decides: the API and the web UI both
// resume with it.
func (d *Decider) ResumeAs(ctx context.Context, tx store.Tx, id string, who actions.Actor, mayApprove, mayOperate bool) (*store.Run, error) {
	r, err := load(ctx, tx, id, "resume", store.RunPaused)
	if err != nil {
		return nil, err
	}
	counts, err := stageErrors(ctx, tx, r)
	if err != nil {
		return nil, err
	}
	forgiven, err := d.resumeRule(r, who.Name, mayApprove, mayOperate, counts)
	if err != nil {
		return nil, err
	}
	note := strings.TrimSpace(who.Note)
	if len(forgiven) > 0 && note == "" {
		return nil, fmt.Errorf("%w: resuming run %s forgives the errors of stage(s) %s: a reason is required, "+
			"recorded with the run", actions.ErrUnprocessable, r.ID, strings.Join(forgiven, ", "))
	}
	c := changeOf(r)
	for i := range r.Stages {
		if slices.Contains(forgiven, r.Stages[i].Name) {
			r.Stages[i].Forgiven = counts[i]
			r.Stages[i].ForgivenBy = append(r.Stages[i].ForgivenBy, forgivenBy(who.Name, note))
		}
	}
	t := d.now()
	r.State, r.StateReason, r.UpdatedTS = store.RunRunning, joinReason(ReasonResumed+" by "+who.Name, note), t
	msg := fmt.Sprintf("%s resumed run %s", who.Name, r.ID)
	data := map[string]any{}
	if note != "" {
		data["reason"] = note
	}
	if len(forgiven) > 0 {
		r.StateReason = forgivenBy(who.Name, note)
		msg += fmt.Sprintf(", forgiving the errors of stage(s) %s: %s", strings.Join(forgiven, ", "), note)
		data["forgiven"] = forgiven
	}
	c.event(store.EventRunResumed, who, t, msg, data)
	if err := c.save(ctx, tx); err != nil {
		return nil, err
	}
	_, err = d.adv.advance(ctx, tx, r, t)
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
func (d *Decider) MayResume(ctx context.Context, rd store.Reader, r *store.Run, who string, mayApprove, mayOperate bool) error {
	if r.State != store.RunPaused {
		return wrongState(r, "resume")
	}
	errs := make([]int, len(r.Stages))
	for i := range r.Stages {
		errs[i] = len(r.Stages[i].Failed)
	}
	_, err := d.resumeRule(r, who, mayApprove, mayOperate, errs)
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
func (d *Decider) resumeRule(r *store.Run, who string, mayApprove, mayOperate bool, errs []int) ([]string, error) {
	forgiven := forgivable(r, errs)
	if strings.HasPrefix(r.StateReason, "canary") {
		return nil, wrongState(r, "resume: it waits for an approver to promote its canary (promote)")
	}
	if len(forgiven) == 0 && !mayOperate {
		return nil, fmt.Errorf("%w: run %s was paused by hand: resuming it is an operator's", ErrForbidden, r.ID)
	}
	if len(forgiven) > 0 && d.policy.Load().MayApprove(r.Requester, "", who, mayApprove) != approval.MayDecide {
		return nil, fmt.Errorf("%w: resuming run %s forgives the errors of stage(s) %s past the max_errors its approver signed: "+
			"that takes an approver other than %s", ErrForbidden, r.ID, strings.Join(forgiven, ", "), r.Requester)
	}
	return forgiven, nil
}

// forgivable is the stages of r whose errors (errs, counted per stage) a
// resume would forgive: those with on_failure pause past their max_errors,
// not counting errors forgiven before. It is the one test of whether a
// resume lifts a limit, whatever paused the run.
func forgivable(r *store.Run, errs []int) []string {
	var forgiven []string
	for i := range r.Stages {
		st := &r.Stages[i]
		if st.OnFailure == OnFailurePause && errs[i]-st.Forgiven > st.MaxErrors.Floor(len(st.Nodes)) {
			forgiven = append(forgiven, st.Name)
		}
	}
	return forgiven
}

// Forgives is the stages whose errors resuming run r, paused, would
// forgive now, counted from its children as ResumeAs counts them; none
// when r is not paused. A run paused by hand whose running nodes then
// failed past a max_errors has errors to forgive too: a resume that
// forgives any takes what an approval takes, whatever the pause reason
// says. It changes nothing.
func (d *Decider) Forgives(ctx context.Context, rd store.Reader, r *store.Run) ([]string, error) {
	if r.State != store.RunPaused {
		return nil, nil
	}
	counts, err := stageErrors(ctx, rd, r)
	if err != nil {
		return nil, err
	}
	return forgivable(r, counts), nil
}

// forgivenBy is what a run records of errors forgiven by who, with why.
func forgivenBy(who, why string) string { return "forgiven by " + who + ": " + why }

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
func (d *Decider) MayPromote(ctx context.Context, rd store.Reader, r *store.Run, who string, mayApprove bool) error {
	_, err := d.promoteRule(r, who, mayApprove)
	return err
}

// promoteRule is MayPromote's decision: the stages a promote of r by who
// promotes, or why it may not.
func (d *Decider) promoteRule(r *store.Run, who string, mayApprove bool) ([]string, error) {
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
	if d.policy.Load().MayApprove(r.Requester, "", who, mayApprove) != approval.MayDecide {
		return nil, fmt.Errorf("%w: promoting the canary of run %s takes an approver other than %s", ErrForbidden,
			r.ID, r.Requester)
	}
	return promoted, nil
}

// Promote lets a run paused after its canary go on: the stage's canary
// is promoted and the rest of its nodes start. It takes an approver
// (mayApprove) other than the requester, unless self-approval is allowed.
func (d *Decider) Promote(ctx context.Context, tx store.Tx, id string, who actions.Actor, mayApprove bool) (*store.Run, error) {
	r, err := load(ctx, tx, id, "promote", store.RunPaused)
	if err != nil {
		return nil, err
	}
	promoted, err := d.promoteRule(r, who.Name, mayApprove)
	if err != nil {
		return nil, err
	}
	note := strings.TrimSpace(who.Note)
	if note == "" {
		return nil, fmt.Errorf("%w: promoting the canary of run %s takes a reason, recorded with the run",
			actions.ErrUnprocessable, r.ID)
	}
	c := changeOf(r)
	why := "promoted by " + who.Name + ": " + note
	for i := range r.Stages {
		if slices.Contains(promoted, r.Stages[i].Name) {
			r.Stages[i].Promoted = true
			r.Stages[i].PromotedBy = why
		}
	}
	t := d.now()
	r.State, r.StateReason, r.UpdatedTS = store.RunRunning, why, t
	c.event(store.EventRunPromoted, who, t,
		fmt.Sprintf("%s promoted the canary of stage(s) %s of run %s: %s", who.Name, strings.Join(promoted, ", "), r.ID, note),
		map[string]any{"stages": promoted, "reason": note})
	if err := c.save(ctx, tx); err != nil {
		return nil, err
	}
	_, err = d.adv.advance(ctx, tx, r, t)
	return r, err
}

// Cancel ends a run that is not final: it creates no more children and
// cancels those not finished.
func (d *Decider) Cancel(ctx context.Context, tx store.Tx, id string, who actions.Actor, reason string) (*store.Run, error) {
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
			if _, err := d.actions.CancelChild(ctx, tx, &recs[i], who, ReasonRunCancelled); err != nil {
				return nil, err
			}
		}
	}
	cancelCore(r, ReasonRunCancelled, nil, d.now())
	return r, finishRun(ctx, tx, r, store.RunCancelled, joinReason(ReasonCancelled+" by "+who.Name, reason),
		store.EventRunCancelled, who, fmt.Sprintf("%s cancelled run %s", who.Name, r.ID), d.now())
}

// MarkUrgent marks run id urgent with the reason who gives (who.Note,
// required): its children, those not yet sent and those to come, pass the
// cluster's closed maintenance window, never a freeze. Like an approval,
// the run's requester may not mark it (ErrForbidden) unless the policy
// allows self-approval; the mark is a run.urgent event.
func (d *Decider) MarkUrgent(ctx context.Context, tx store.Tx, id string, who actions.Actor) (*store.Run, error) {
	r, err := load(ctx, tx, id, "mark urgent", store.RunPendingApprove, store.RunRunning, store.RunPaused)
	if err != nil {
		return nil, err
	}
	if who.Note == "" {
		return nil, fmt.Errorf("%w: reason is required to mark a run urgent", actions.ErrUnprocessable)
	}
	if d.policy.Load().MayApprove(r.Requester, "", who.Name, true) == approval.OwnRequest {
		return nil, fmt.Errorf("%w: %s requested run %s and may not mark it urgent too", ErrForbidden, who.Name, r.ID)
	}
	if r.Urgent == who.Note {
		return r, nil
	}
	t := d.now()
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
	c := changeOf(r)
	r.Urgent, r.UpdatedTS = who.Note, t
	c.event(store.EventRunUrgent, who, t, fmt.Sprintf("%s marked run %s urgent: %s", who.Name, r.ID, who.Note),
		map[string]any{"reason": who.Note})
	return r, c.save(ctx, tx)
}

// Expire cancels the runs that waited for approval longer than the policy's
// TTL. It returns how many it cancelled.
func (d *Decider) Expire(ctx context.Context, tx store.Tx) (int, error) {
	// One TTL decides and is reported, whatever reload lands meanwhile.
	ttl := d.policy.Load().TTL
	if ttl <= 0 {
		return 0, nil
	}
	// Oldest first, and brief: a sweep does not read the node lists of
	// every run waiting, only of those that expire.
	t := d.now()
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
		if err := finishRun(ctx, tx, r, store.RunCancelled, ReasonExpired, store.EventRunExpired, actions.Core,
			fmt.Sprintf("run %s expired after waiting %s for approval", r.ID, ttl), d.now()); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// reusable lists the steps of node's procedure in stage st that a retry
// from the failed step takes as done: its steps in order while their last
// attempt ended DONE (with the run's own reuse before them, for a retry of
// a retry). None when the node ran a rollback step: what its DONE steps
// did was undone.
func reusable(st *store.RunStage, node string, kids []Child) []store.ReusedStep {
	if len(st.Steps) == 0 {
		return nil
	}
	latest := map[string]Child{}
	// The node's children, and its gates' and calls' results, which the
	// core keeps in the stage and are steps as much as children are.
	mine := slices.Clone(kids)
	for _, cs := range st.Core[node] {
		mine = append(mine, coreChild(st.Name, node, cs))
	}
	for _, c := range mine {
		if c.Stage != st.Name || c.Node != node {
			continue
		}
		if l, ok := latest[c.Step]; !ok || c.attempt() > l.attempt() {
			latest[c.Step] = c
		}
	}
	for _, sp := range st.Rollback {
		if _, ok := latest[sp.Name]; ok {
			return nil
		}
	}
	before := map[string]store.ReusedStep{}
	for _, rs := range st.Reuse[node] {
		before[rs.Step] = rs
	}
	var out []store.ReusedStep
	for _, sp := range st.Steps {
		if c, ok := latest[sp.Name]; ok && c.State == action.Done {
			out = append(out, store.ReusedStep{Step: sp.Name, ActionID: c.ID, Outputs: c.Outputs})
			continue
		}
		if rs, ok := before[sp.Name]; ok {
			if _, ran := latest[sp.Name]; !ran {
				out = append(out, rs)
				continue
			}
		}
		break
	}
	if len(out) == len(st.Steps) {
		return nil // nothing failed in its procedure: it runs again whole
	}
	return out
}
