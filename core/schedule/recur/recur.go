// Package recur keeps approved schedules (docs/architecture.md, "Windows
// and schedules"): their changes, approved once by an approver other than
// their requester, and the worker that makes one run per occurrence through
// core/runs. core/schedule holds what needs no store: the cron, the digest,
// the run ids; this package holds what writes.
package recur

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/argschema"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// Errors of schedule changes: a change the schedule's state does not allow
// matches actions.ErrWrongState (a 409); an approval by its requester, or
// by whoever applied its playbook version, actions.ErrForbidden (a 403).
var (
	ErrWrongState = actions.ErrWrongState
	ErrForbidden  = actions.ErrForbidden
)

// Outcomes of Apply.
const (
	Created   = "created"
	Changed   = "changed"
	Unchanged = "unchanged"
)

// Service makes every change to schedules, each in the caller's
// transaction.
type Service struct {
	Policy *live.Value[approval.Policy]
	// MinEvery replaces schedule.MinEvery when set (the end-to-end tests).
	MinEvery time.Duration
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// KindLocks returns the locks kinds declare now (runs.Engine.KindLocks),
	// so that Apply plans as each occurrence will; nil: none.
	KindLocks func() runs.KindLocks
}

func (s *Service) kindLocks() runs.KindLocks {
	if s.KindLocks == nil {
		return nil
	}
	return s.KindLocks()
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return action.UTC(s.Now())
	}
	return action.UTC(time.Now())
}

func event(sc *store.Schedule, typ string, who actions.Actor, t time.Time, msg string, data map[string]any) *store.Event {
	if data == nil {
		data = map[string]any{}
	}
	data["schedule"] = sc.Name
	return &store.Event{TS: t, Type: typ, Actor: who.Name, ClientAddr: who.Addr, ClusterID: sc.ClusterID, Message: msg, Data: data}
}

// resolve reads the playbook version sc runs: its own, or the newest.
func resolve(ctx context.Context, r store.Reader, sc *store.Schedule) (*store.Playbook, error) {
	return r.Playbook(ctx, sc.Playbook, sc.Version)
}

// Apply checks req and stores it as a new schedule, or as a change to the
// schedule of that name (which sends it back to approval), waiting for
// approval either way. The same schedule again changes nothing. Bad input
// is a *schedule.FieldError naming the field; nothing is stored then.
func (s *Service) Apply(ctx context.Context, tx store.Tx, req *wire.CreateScheduleRequest, who actions.Actor) (*store.Schedule, string, error) {
	return s.ApplyFrom(ctx, tx, req, who, "")
}

// fields are what req stores of a schedule: its name, cluster, playbook,
// version, params, cron, time zone, concurrency and catch-up (checked as
// Apply checks them), nothing of its state.
func (s *Service) fields(req *wire.CreateScheduleRequest) (*store.Schedule, error) {
	_, catchUp, err := schedule.Check(req, s.MinEvery)
	if err != nil {
		return nil, err
	}
	params, err := json.Marshal(req.Params)
	if err != nil {
		return nil, err
	}
	if req.Params == nil {
		params = []byte("{}")
	}
	return &store.Schedule{Name: req.Name, ClusterID: req.Cluster, Playbook: req.Playbook, Version: int(req.Version),
		Params: params, Cron: req.Cron, Timezone: req.Timezone, Concurrency: req.Concurrency,
		CatchUpS: int(catchUp / time.Second)}, nil
}

// Differs reports whether applying req would change schedule sc (any field
// fields covers; its state, approval and source aside). A bad req is a
// *schedule.FieldError.
func (s *Service) Differs(sc *store.Schedule, req *wire.CreateScheduleRequest) (bool, error) {
	f, err := s.fields(req)
	if err != nil {
		return false, err
	}
	return f.Name != sc.Name || f.ClusterID != sc.ClusterID || f.Playbook != sc.Playbook || f.Version != sc.Version ||
		string(f.Params) != string(sc.Params) || f.Cron != sc.Cron || f.Timezone != sc.Timezone ||
		f.Concurrency != sc.Concurrency || f.CatchUpS != sc.CatchUpS, nil
}

// ApplyFrom is Apply marking what it stores with source ("file:NAME" from
// muster apply -f NAME, "" by hand). The same schedule again changes
// nothing but, from a file, its source: the file then owns it (no new
// approval, as nothing it runs changed); by hand it keeps its source.
func (s *Service) ApplyFrom(ctx context.Context, tx store.Tx, req *wire.CreateScheduleRequest, who actions.Actor, source string) (*store.Schedule, string, error) {
	next, err := s.fields(req)
	if err != nil {
		return nil, "", err
	}
	if _, err := tx.Cluster(ctx, req.Cluster); errors.Is(err, store.ErrNotFound) {
		return nil, "", &schedule.FieldError{Field: "cluster", Msg: fmt.Sprintf("no cluster %q", req.Cluster)}
	} else if err != nil {
		return nil, "", err
	}
	pb, err := tx.Playbook(ctx, req.Playbook, int(req.Version))
	if errors.Is(err, store.ErrNotFound) {
		if _, err := tx.Playbook(ctx, req.Playbook, 0); err == nil {
			return nil, "", &schedule.FieldError{Field: "version", Msg: fmt.Sprintf("playbook %s has no version %d", req.Playbook, req.Version)}
		}
		return nil, "", &schedule.FieldError{Field: "playbook", Msg: fmt.Sprintf("no playbook %q (apply it first)", req.Playbook)}
	} else if err != nil {
		return nil, "", err
	}
	if err := checkParams(ctx, tx, pb, req.Cluster, req.Params, s.kindLocks()); err != nil {
		return nil, "", err
	}
	t := s.now()
	next.ID, next.State, next.Requester, next.CreatedTS, next.UpdatedTS = action.NewID(), store.SchedulePendingApprove, who.Name, t, t
	next.Source = source
	next.Digest = schedule.Digest(next, pb.Version, pb.Digest)
	old, err := tx.Schedule(ctx, req.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		next.StateReason = "created"
		if err := tx.InsertSchedule(ctx, next); err != nil {
			return nil, "", err
		}
		if err := tx.AppendEvent(ctx, event(next, store.EventScheduleCreated, who, t,
			fmt.Sprintf("%s created schedule %s: playbook %s %s on %s at %q (%s)", who.Name, next.Name, next.Playbook,
				req.Version, next.ClusterID, next.Cron, zoneName(next.Timezone)), map[string]any{"digest": next.Digest})); err != nil {
			return nil, "", err
		}
		return next, Created, s.waiting(ctx, tx, next, who, t, "created")
	case err != nil:
		return nil, "", err
	}
	if old.Digest == next.Digest && old.State != store.ScheduleRejected {
		if source != "" && old.Source != source {
			old.Source = source
			if err := tx.UpdateSchedule(ctx, old); err != nil {
				return nil, "", err
			}
		}
		return old, Unchanged, nil
	}
	next.ID, next.CreatedTS, next.LastOccurrence = old.ID, old.CreatedTS, old.LastOccurrence
	next.StateReason = "changed by " + who.Name
	if err := tx.UpdateSchedule(ctx, next); err != nil {
		return nil, "", err
	}
	if err := tx.AppendEvent(ctx, event(next, store.EventScheduleChanged, who, t,
		fmt.Sprintf("%s changed schedule %s: it waits for approval again", who.Name, next.Name),
		map[string]any{"digest": next.Digest, "old_digest": old.Digest})); err != nil {
		return nil, "", err
	}
	return next, Changed, s.waiting(ctx, tx, next, who, t, "changed")
}

func zoneName(tz string) string {
	if tz == "" {
		return "UTC"
	}
	return tz
}

// checkParams checks params against the playbook version's declared
// parameters, and that the playbook renders with them and plans with the
// locks kinds declare now (locks), as an occurrence plans.
//
// Args that break a kind's args_schema on the cluster's nodes as they are
// now are refused too, as muster playbook plan refuses them: every
// occurrence would be. Other misfits (a target no node matches yet) may
// change before an occurrence and are left to it.
func checkParams(ctx context.Context, tx store.Tx, pb *store.Playbook, cluster string, params map[string]string, locks runs.KindLocks) error {
	p, err := playbook.Parse([]byte(pb.Document))
	if err != nil {
		return err
	}
	_, err = p.Plan(ctx, tx, pb.Version, &wire.PlanRequest{ClusterID: cluster, Params: params}, locks)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, argschema.ErrArgs): // before ErrUnresolvable, which it carries too
		return &schedule.FieldError{Field: "params", Msg: err.Error()}
	case errors.Is(err, playbook.ErrInvalid):
		return &schedule.FieldError{Field: "params", Msg: strings.TrimPrefix(err.Error(), playbook.ErrInvalid.Error()+": ")}
	case errors.Is(err, runs.ErrInvalid):
		return &schedule.FieldError{Field: "params", Msg: err.Error()}
	case errors.Is(err, runs.ErrUnresolvable), errors.Is(err, store.ErrNotFound):
		return nil // may change before an occurrence, which then says so
	}
	return err
}

// waiting announces that sc waits for an approver (approval.waiting, as
// actions and runs do).
func (s *Service) waiting(ctx context.Context, tx store.Tx, sc *store.Schedule, who actions.Actor, t time.Time, why string) error {
	return tx.AppendEvent(ctx, event(sc, store.EventApprovalWaiting, who, t,
		fmt.Sprintf("schedule %s on %s waits for an approver (requested by %s)", sc.Name, sc.ClusterID, sc.Requester),
		map[string]any{"reason": why}))
}

func load(ctx context.Context, tx store.Tx, name, what string, from ...string) (*store.Schedule, error) {
	sc, err := tx.Schedule(ctx, name)
	if err != nil {
		return nil, err
	}
	for _, st := range from {
		if sc.State == st {
			return sc, nil
		}
	}
	return nil, fmt.Errorf("%w: cannot %s schedule %s: it is %s", ErrWrongState, what, name, sc.State)
}

// Applier returns who applied the playbook version schedule sc runs now
// ("" when there is none): with its requester, the person who may not
// approve it (approval.Policy.MayApprove), so that pages offer no approval
// that Approve refuses.
func Applier(ctx context.Context, r store.Reader, sc *store.Schedule) (string, error) {
	pb, err := resolve(ctx, r, sc)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return pb.CreatedBy, nil
}

// MayApprove says whether who may approve schedule sc now, levels aside:
// nil when they may, the error Approve would return otherwise. It returns
// the schedule's digest now and who applied its playbook version. The
// operations layer checks it before it records one approval of several
// levels (docs/runs-and-playbooks.md, "Approval levels").
func (s *Service) MayApprove(ctx context.Context, r store.Reader, sc *store.Schedule, digest, who string) (cur, applier string, err error) {
	if sc.State != store.SchedulePendingApprove {
		return "", "", fmt.Errorf("%w: cannot approve schedule %s: it is %s", ErrWrongState, sc.Name, sc.State)
	}
	pb, cur, err := s.mayApprove(ctx, r, sc, digest, who)
	if err != nil {
		return "", "", err
	}
	return cur, pb.CreatedBy, nil
}

func (s *Service) mayApprove(ctx context.Context, r store.Reader, sc *store.Schedule, digest, who string) (*store.Playbook, string, error) {
	pb, err := resolve(ctx, r, sc)
	if err != nil {
		return nil, "", err
	}
	switch s.Policy.Load().MayApprove(sc.Requester, pb.CreatedBy, who, true) {
	case approval.OwnRequest:
		return nil, "", fmt.Errorf("%w: %s created or last changed schedule %s and may not approve it too", ErrForbidden, who, sc.Name)
	case approval.AppliedPlaybook:
		return nil, "", fmt.Errorf("%w: %s applied playbook %s version %d and may not approve schedules of it", ErrForbidden,
			who, pb.Name, pb.Version)
	}
	cur := schedule.Digest(sc, pb.Version, pb.Digest)
	if digest != "" && digest != cur {
		return nil, "", fmt.Errorf("%w: approve: digest %.12s is not the schedule's (%.12s): look at it again", ErrWrongState, digest, cur)
	}
	return pb, cur, nil
}

// Approve approves schedule name as who: from now on each occurrence makes
// a run approved by who, of the playbook version approved now. A non-empty
// digest is what the approver was shown: the approval is refused when the
// schedule's is another.
func (s *Service) Approve(ctx context.Context, tx store.Tx, name, digest string, who actions.Actor) (*store.Schedule, error) {
	sc, err := load(ctx, tx, name, "approve", store.SchedulePendingApprove)
	if err != nil {
		return nil, err
	}
	pb, cur, err := s.mayApprove(ctx, tx, sc, digest, who.Name)
	if err != nil {
		return nil, err
	}
	t := s.now()
	sc.State, sc.StateReason, sc.ApprovedBy, sc.ApprovedDigest, sc.ApprovedVersion = store.ScheduleActive,
		"approved by "+who.Name, who.Name, cur, pb.Version
	sc.Digest, sc.ActiveSince, sc.UpdatedTS = cur, action.TimePtr(t), t
	if err := tx.UpdateSchedule(ctx, sc); err != nil {
		return nil, err
	}
	return sc, tx.AppendEvent(ctx, event(sc, store.EventScheduleApproved, who, t,
		fmt.Sprintf("%s approved schedule %s (playbook %s v%d)", who.Name, sc.Name, pb.Name, pb.Version),
		map[string]any{"digest": cur, "version": pb.Version}))
}

// Reject refuses a schedule waiting for approval: it makes no run until
// it is changed (POST again) and approved.
func (s *Service) Reject(ctx context.Context, tx store.Tx, name, reason string, who actions.Actor) (*store.Schedule, error) {
	sc, err := load(ctx, tx, name, "reject", store.SchedulePendingApprove)
	if err != nil {
		return nil, err
	}
	t := s.now()
	sc.State, sc.StateReason, sc.UpdatedTS = store.ScheduleRejected, "rejected by "+who.Name, t
	if r := strings.TrimSpace(reason); r != "" {
		sc.StateReason += ": " + r
	}
	if err := tx.UpdateSchedule(ctx, sc); err != nil {
		return nil, err
	}
	return sc, tx.AppendEvent(ctx, event(sc, store.EventScheduleRejected, who, t,
		fmt.Sprintf("%s rejected schedule %s", who.Name, sc.Name), map[string]any{"reason": reason}))
}

// Pause stops an active schedule from making runs; the runs it made go on.
func (s *Service) Pause(ctx context.Context, tx store.Tx, name string, who actions.Actor) (*store.Schedule, error) {
	sc, err := load(ctx, tx, name, "pause", store.ScheduleActive)
	if err != nil {
		return nil, err
	}
	t := s.now()
	sc.State, sc.StateReason, sc.UpdatedTS = store.SchedulePaused, withNote("paused by "+who.Name, who), t
	if err := tx.UpdateSchedule(ctx, sc); err != nil {
		return nil, err
	}
	return sc, tx.AppendEvent(ctx, noted(event(sc, store.EventSchedulePaused, who, t,
		fmt.Sprintf("%s paused schedule %s", who.Name, sc.Name), nil), who))
}

// Resume lets a paused schedule go on from its next occurrence: those
// that fell while it was paused are not run.
func (s *Service) Resume(ctx context.Context, tx store.Tx, name string, who actions.Actor) (*store.Schedule, error) {
	sc, err := load(ctx, tx, name, "resume", store.SchedulePaused)
	if err != nil {
		return nil, err
	}
	t := s.now()
	sc.State, sc.StateReason, sc.ActiveSince, sc.UpdatedTS = store.ScheduleActive, withNote("resumed by "+who.Name, who), action.TimePtr(t), t
	if err := tx.UpdateSchedule(ctx, sc); err != nil {
		return nil, err
	}
	return sc, tx.AppendEvent(ctx, noted(event(sc, store.EventScheduleResumed, who, t,
		fmt.Sprintf("%s resumed schedule %s", who.Name, sc.Name), nil), who))
}

// Delete removes a schedule; the runs it made stay, and go on.
func (s *Service) Delete(ctx context.Context, tx store.Tx, name string, who actions.Actor) (*store.Schedule, error) {
	sc, err := tx.Schedule(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := tx.DeleteSchedule(ctx, name); err != nil {
		return nil, err
	}
	return sc, tx.AppendEvent(ctx, noted(event(sc, store.EventScheduleDeleted, who, s.now(),
		fmt.Sprintf("%s deleted schedule %s", who.Name, sc.Name), nil), who))
}

// withNote adds the person's reason (who.Note), when given, to s.
func withNote(s string, who actions.Actor) string {
	if who.Note == "" {
		return s
	}
	return s + ": " + who.Note
}

// noted adds the person's reason (who.Note), when given, to e's message
// and, as "reason", to its data.
func noted(e *store.Event, who actions.Actor) *store.Event {
	if who.Note != "" {
		e.Message = withNote(e.Message, who)
		e.Data["reason"] = who.Note
	}
	return e
}

// unapprove sends an active schedule back to approval because its playbook
// moved under `latest`.
func unapprove(ctx context.Context, tx store.Tx, sc *store.Schedule, pb *store.Playbook, cur string, t time.Time) error {
	sc.Digest = cur
	return sendBack(ctx, tx, sc, t,
		fmt.Sprintf("playbook %s is at version %d now (approved: %d): approve again", pb.Name, pb.Version, sc.ApprovedVersion),
		fmt.Sprintf("playbook %s has version %d", pb.Name, pb.Version), "playbook version",
		map[string]any{"version": pb.Version, "approved_version": sc.ApprovedVersion, "digest": cur})
}

// sendBack puts an active schedule back to PENDING_APPROVE for reason (its
// state_reason), with a schedule.unapproved event and an approval.waiting
// one that notifications announce.
func sendBack(ctx context.Context, tx store.Tx, sc *store.Schedule, t time.Time, reason, short, code string, data map[string]any) error {
	core := actions.Actor{Name: store.ActorCore}
	sc.State, sc.StateReason, sc.UpdatedTS = store.SchedulePendingApprove, reason, t
	if err := tx.UpdateSchedule(ctx, sc); err != nil {
		return err
	}
	if data == nil {
		data = map[string]any{}
	}
	data["reason"] = code
	if err := tx.AppendEvent(ctx, event(sc, store.EventScheduleUnapproved, core, t,
		fmt.Sprintf("schedule %s waits for approval again: %s", sc.Name, reason), data)); err != nil {
		return err
	}
	return tx.AppendEvent(ctx, event(sc, store.EventApprovalWaiting, core, t,
		fmt.Sprintf("schedule %s on %s waits for an approver: %s", sc.Name, sc.ClusterID, short),
		map[string]any{"reason": code}))
}

// ApproverGone says why the approval of a schedule approved by name no
// longer holds ("" while it holds): the approver's token was revoked or has
// expired, or no longer grants approve. An approval lasts only as long as
// its approver may approve (docs/schedules.md).
func ApproverGone(ctx context.Context, r store.Reader, name string, now time.Time) (string, error) {
	toks, err := r.Tokens(ctx)
	if err != nil {
		return "", err
	}
	for i := range toks {
		t := &toks[i]
		if t.Name != name {
			continue
		}
		switch {
		case t.Expired(now):
			return fmt.Sprintf("the token of its approver %s has expired: approve again", name), nil
		case !auth.Can(t.Roles, auth.Approve):
			return fmt.Sprintf("its approver %s no longer holds a role that may approve: approve again", name), nil
		}
		return "", nil
	}
	return fmt.Sprintf("the token of its approver %s was revoked: approve again", name), nil
}

// Unapproved sends every active or paused schedule approved by name back
// to approval when that approval no longer holds (ApproverGone), in the
// caller's transaction; a token's revocation calls it so that no occurrence
// runs on a revoked approval. It returns the schedules sent back.
func Unapproved(ctx context.Context, tx store.Tx, name string, now time.Time) ([]string, error) {
	why, err := ApproverGone(ctx, tx, name, now)
	if err != nil || why == "" {
		return nil, err
	}
	list, err := tx.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for i := range list {
		sc := &list[i]
		if sc.ApprovedBy != name || (sc.State != store.ScheduleActive && sc.State != store.SchedulePaused) {
			continue
		}
		if err := sendBack(ctx, tx, sc, action.UTC(now), why, "approver "+name+" may no longer approve", "approver gone",
			map[string]any{"approved_by": name}); err != nil {
			return nil, err
		}
		out = append(out, sc.Name)
	}
	return out, nil
}

// View shows a schedule with its next occurrences (n of them, while it is
// active) and, when withRuns, its newest runs.
func View(ctx context.Context, r store.Reader, sc *store.Schedule, now time.Time, n int, withRuns bool) (wire.Schedule, error) {
	out := wire.Schedule{ID: sc.ID, Name: sc.Name, Cluster: sc.ClusterID, Playbook: sc.Playbook, Version: wire.VersionRef(sc.Version),
		Params: map[string]string{}, Cron: sc.Cron, CronWords: schedule.Describe(sc.Cron), Timezone: zoneName(sc.Timezone), Concurrency: sc.Concurrency,
		CatchUp: (time.Duration(sc.CatchUpS) * time.Second).String(), State: sc.State, StateReason: sc.StateReason,
		Requester: sc.Requester, Digest: sc.Digest, ApprovedBy: sc.ApprovedBy, ApprovedVersion: sc.ApprovedVersion,
		ActiveSince: sc.ActiveSince, LastOccurrence: sc.LastOccurrence, Next: []time.Time{}, CreatedTS: sc.CreatedTS,
		UpdatedTS: sc.UpdatedTS, Source: sc.Source}
	_ = json.Unmarshal(sc.Params, &out.Params)
	if pb, err := resolve(ctx, r, sc); err == nil {
		out.PlaybookVersion = pb.Version
		out.Digest = schedule.Digest(sc, pb.Version, pb.Digest)
	} else if !errors.Is(err, store.ErrNotFound) {
		return out, err
	}
	if c, err := schedule.ParseCron(sc.Cron, sc.Timezone); err == nil && sc.State == store.ScheduleActive {
		for _, t := range schedule.NextN(c, now, n) {
			out.Next = append(out.Next, t.UTC())
		}
	}
	newest := 1
	if withRuns {
		newest = 20
	}
	list, err := r.ScheduleRuns(ctx, sc.ID, newest)
	if err != nil {
		return out, err
	}
	for _, run := range list {
		out.Runs = append(out.Runs, wire.ScheduleRun{ID: run.ID, State: run.State, CreatedTS: run.CreatedTS})
	}
	if len(out.Runs) > 0 {
		out.LastRun = &out.Runs[0]
	}
	if !withRuns {
		out.Runs = nil
	}
	return out, nil
}
