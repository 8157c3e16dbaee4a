package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// Approvals in levels (docs/runs-and-playbooks.md, "Approval levels"):
// every approval verb records the caller's approval at the first level
// not met that they are eligible for, in the transaction that checks it,
// and makes the domain's transition (approve, resume, promote) in that
// same transaction once every level is met. Until then the work waits,
// and an event says what is missing.

// RefusedError is an approval or a rejection refused for who the caller
// is (their own request, approved already, eligible at no level): a 403
// with the reason.
type RefusedError struct {
	Caller string
	Doing  string
	Why    string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s may not %s: %s", e.Caller, e.Doing, e.Why)
}

func (e *RefusedError) Unwrap() error { return ErrForbidden }

// subject is one thing approved in levels.
type subject struct {
	kind, id, cluster string
	// name is it in a message: "action 3f0c…", "the resume of run 9a1b…".
	name string
	// event is the type of the event of an approval that leaves levels
	// unmet; actionID and runID go in it.
	event, actionID, runID string
	work                   approval.Work
}

// mayApproveOn says whether a person holds Approve on the cluster
// clusterID through some grant, read in rd (approval.Work.MayApproveOn):
// their own grants, their teams' (listed, or through the group claims
// they last signed in with) and the global roles of their tokens. The
// cluster's labels and the tokens are read once, at the first question.
func (o *Ops) mayApproveOn(rd store.Reader, clusterID string) func(context.Context, string) (bool, error) {
	var (
		loaded bool
		labels map[string]string
		roles  map[string][]string // a token's person → its global roles
	)
	load := func(ctx context.Context) error {
		cl, err := rd.Cluster(ctx, clusterID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		default:
			labels = cl.Labels
		}
		toks, err := rd.Tokens(ctx)
		if err != nil {
			return err
		}
		now := o.now()
		roles = map[string][]string{}
		for _, t := range toks {
			if t.ClusterID == "" && !t.Expired(now) {
				k := store.PersonKey(t.Name)
				roles[k] = append(roles[k], t.Roles...)
			}
		}
		loaded = true
		return nil
	}
	return func(ctx context.Context, person string) (bool, error) {
		if !loaded {
			if err := load(ctx); err != nil {
				return false, err
			}
		}
		gs := auth.TokenGrants(roles[store.PersonKey(person)])
		var groups []string
		switch p, err := rd.Person(ctx, person); {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return false, err
		default:
			groups = p.Groups
		}
		teams, err := rd.TeamsOf(ctx, person, groups)
		if err != nil {
			return false, err
		}
		stored, err := rd.GrantsOf(ctx, person, teams)
		if err != nil {
			return false, err
		}
		for _, g := range stored {
			gs = append(gs, auth.FromStore(g))
		}
		return auth.HoldsOn(gs, auth.Approve, auth.Cluster{ID: clusterID, Labels: labels}), nil
	}
}

// levelsOf are the levels work of kinds on cluster needs under pol: at
// least AnyApprover (work that waits for approval the rules would not ask
// for now still takes one approver).
func levelsOf(pol approval.Policy, kinds []string, cluster string) []approval.Level {
	if ls := pol.Levels(kinds, cluster); len(ls) > 0 {
		return ls
	}
	return []approval.Level{approval.AnyApprover}
}

// actionSubject is the approval of action rec, read in rd.
func (o *Ops) actionSubject(rd store.Reader, rec *store.Record) subject {
	pol := o.cfg.Policy.Load()
	return subject{kind: store.SubjectAction, id: rec.ID, cluster: rec.ClusterID, name: "action " + rec.ID,
		event: store.EventActionApprovalRecorded, actionID: rec.ID,
		work: approval.Work{Levels: levelsOf(pol, []string{rec.Kind}, rec.ClusterID), Digest: approval.Digest(&rec.Action),
			Requester: rec.Requester, SelfApproval: pol.SelfApproval, MayApproveOn: o.mayApproveOn(rd, rec.ClusterID)}}
}

// runSubject is run r's approval (kind store.SubjectRun), the resume of its
// pause on errors (SubjectResume) or its canary's promote
// (SubjectPromote).
func (o *Ops) runSubject(ctx context.Context, rd store.Reader, r *store.Run, kind string) (subject, error) {
	pol := o.cfg.Policy.Load()
	applier, err := runs.Applier(ctx, rd, r)
	if err != nil {
		return subject{}, err
	}
	s := subject{kind: kind, id: r.ID, cluster: r.ClusterID, event: store.EventRunApprovalRecorded, runID: r.ID,
		work: approval.Work{Levels: levelsOf(pol, runs.Kinds(r), r.ClusterID), Requester: r.Requester, Applier: applier,
			SelfApproval: pol.SelfApproval, MayApproveOn: o.mayApproveOn(rd, r.ClusterID)}}
	switch kind {
	case store.SubjectResume:
		s.name, s.work.Digest = "the resume of run "+r.ID+" past its errors", runs.ResumeDigest(r)
	case store.SubjectPromote:
		s.name, s.work.Digest = "the promote of run "+r.ID+"'s canary", runs.PromoteDigest(r)
	default:
		s.name, s.work.Digest = "run "+r.ID, r.Digest
	}
	return s, nil
}

func (o *Ops) scheduleSubject(ctx context.Context, rd store.Reader, sc *store.Schedule) (subject, error) {
	pol := o.cfg.Policy.Load()
	pb, err := rd.Playbook(ctx, sc.Playbook, sc.Version)
	if err != nil {
		return subject{}, err
	}
	return subject{kind: store.SubjectSchedule, id: sc.ID, cluster: sc.ClusterID, name: "schedule " + sc.Name,
		event: store.EventScheduleApprovalRecorded,
		work: approval.Work{Levels: levelsOf(pol, nil, sc.ClusterID), Digest: schedule.Digest(sc, pb.Version, pb.Digest),
			Requester: sc.Requester, Applier: pb.CreatedBy, SelfApproval: pol.SelfApproval,
			MayApproveOn: o.mayApproveOn(rd, sc.ClusterID)}}, nil
}

// tally counts the approvals recorded for s, read in rd.
func (o *Ops) tally(ctx context.Context, rd store.Reader, s *subject) (approval.Tally, error) {
	recs, err := rd.Approvals(ctx, s.kind, s.id)
	if err != nil {
		return approval.Tally{}, err
	}
	s.work.Approvals = make([]approval.Recorded, len(recs))
	for i, a := range recs {
		s.work.Approvals[i] = approval.Recorded{Person: a.Person, Level: a.Level, Digest: a.Digest}
	}
	return approval.Count(ctx, rd, s.work)
}

// recordApproval is the one write of an approval: c's approval of s goes
// to the first level not met they are eligible for (approval.Place), or is
// refused with the reason (a *RefusedError, nothing written). The tally
// after it says whether every level is met; when one is not, an event says
// what is missing. The caller checked that c holds Approve on s's cluster,
// and the domain's own rules (state, window, digest).
func (o *Ops) recordApproval(ctx context.Context, tx store.Tx, c Caller, s *subject) (approval.Tally, error) {
	t, err := o.tally(ctx, tx, s)
	if err != nil {
		return approval.Tally{}, err
	}
	teams, err := tx.TeamsOf(ctx, c.Name, c.Groups)
	if err != nil {
		return approval.Tally{}, err
	}
	i, err := approval.Place(s.work, t, c.Name, teams)
	var refused *approval.Refused
	if errors.As(err, &refused) {
		return approval.Tally{}, &RefusedError{Caller: c.Name, Doing: "approve " + s.name, Why: refused.Why}
	}
	if err != nil {
		return approval.Tally{}, err
	}
	now := o.now()
	lv := s.work.Levels[i]
	a := &store.Approval{SubjectKind: s.kind, SubjectID: s.id, Digest: s.work.Digest, Person: c.Name, Level: lv.Key(), DecidedTS: now}
	if err := tx.InsertApproval(ctx, a); errors.Is(err, store.ErrExists) {
		return approval.Tally{}, &RefusedError{Caller: c.Name, Doing: "approve " + s.name,
			Why: c.Name + " approved it already: each person counts once"}
	} else if err != nil {
		return approval.Tally{}, err
	}
	s.work.Approvals = append(s.work.Approvals, approval.Recorded{Person: a.Person, Level: a.Level, Digest: a.Digest})
	if t, err = approval.Count(ctx, tx, s.work); err != nil || t.Satisfied {
		return t, err
	}
	return t, tx.AppendEvent(ctx, &store.Event{TS: now, Type: s.event, Actor: c.Name, ClientAddr: c.Addr, ClusterID: s.cluster,
		ActionID: s.actionID, RunID: s.runID,
		Message: fmt.Sprintf("%s approved %s at level %d (%s): %s", c.Name, s.name, i+1, lv.Who(), t.Missing()),
		Data: map[string]any{"subject": s.kind, "subject_id": s.id, "level": i + 1, "digest": s.work.Digest,
			"missing": t.Missing()}})
}

// checkReject refuses a rejection of s by a caller who does not hold
// Reject on its cluster or is eligible at none of its levels: any
// eligible person's reject rejects.
func (o *Ops) checkReject(ctx context.Context, rd store.Reader, c Caller, s subject) error {
	if err := AuthorizeOn(c, auth.Reject, s.cluster); err != nil {
		return err
	}
	teams, err := rd.TeamsOf(ctx, c.Name, c.Groups)
	if err != nil {
		return err
	}
	var refused *approval.Refused
	if err := approval.MayReject(s.work, c.Name, teams); errors.As(err, &refused) {
		return &RefusedError{Caller: c.Name, Doing: "reject " + s.name, Why: refused.Why}
	}
	return nil
}

// view is tally t of s as the API shows it.
func view(s subject, t approval.Tally) *wire.Approval {
	out := &wire.Approval{Subject: s.kind, Satisfied: t.Satisfied, Void: t.Void, Missing: t.Missing(), Levels: make([]wire.ApprovalLevel, len(t.Levels)),
		Lines: make([]string, len(t.Levels))}
	for i, lt := range t.Levels {
		out.Levels[i] = wire.ApprovalLevel{Teams: nonNil(lt.Teams), Persons: nonNil(lt.Persons), Min: lt.Need(),
			ApprovedBy: nonNil(lt.ApprovedBy), Remaining: lt.Remaining, CanApprove: nonNil(lt.CanApprove), AnyApprover: lt.Anyone()}
		out.Lines[i] = t.Line(i)
	}
	return out
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

func (o *Ops) viewOf(ctx context.Context, rd store.Reader, s subject) (*wire.Approval, error) {
	t, err := o.tally(ctx, rd, &s)
	if err != nil {
		return nil, err
	}
	return view(s, t), nil
}

// ActionApproval is where the approval of rec stands, read in rd; nil
// when it waits for none.
func (o *Ops) ActionApproval(ctx context.Context, rd store.Reader, rec *store.Record) (*wire.Approval, error) {
	if rec.State != action.PendingApprove {
		return nil, nil
	}
	return o.viewOf(ctx, rd, o.actionSubject(rd, rec))
}

// RunApproval is where the approval run r waits for stands, read in rd:
// its own, its canary's promote, or a resume that forgives errors (as
// ResumeRun decides it, runs.Engine.Forgives, whatever paused the run);
// nil when it waits for none.
func (o *Ops) RunApproval(ctx context.Context, rd store.Reader, r *store.Run) (*wire.Approval, error) {
	kind := ""
	switch {
	case r.State == store.RunPendingApprove:
		kind = store.SubjectRun
	case runs.PausedFor(r) == runs.PauseCanary:
		kind = store.SubjectPromote
	case r.State == store.RunPaused:
		forgives, err := o.cfg.Runs.Forgives(ctx, rd, r)
		if err != nil {
			return nil, err
		}
		if len(forgives) == 0 {
			return nil, nil
		}
		kind = store.SubjectResume
	default:
		return nil, nil
	}
	s, err := o.runSubject(ctx, rd, r, kind)
	if err != nil {
		return nil, err
	}
	return o.viewOf(ctx, rd, s)
}

// ScheduleApproval is where the approval of schedule sc stands, read in
// rd; nil when it waits for none.
func (o *Ops) ScheduleApproval(ctx context.Context, rd store.Reader, sc *store.Schedule) (*wire.Approval, error) {
	if sc.State != store.SchedulePendingApprove {
		return nil, nil
	}
	s, err := o.scheduleSubject(ctx, rd, sc)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return o.viewOf(ctx, rd, s)
}

// ApprovalWhyNot says why person may not add an approval to ap, as a page
// offering the Approve button must know ("" when they may, or when ap is
// nil): they approved already, or no level that still needs someone may
// count them. It reads the tally's can_approve, which names people by
// their listed or known memberships; the approval itself decides by the
// person's teams as they sign in (recordApproval).
func ApprovalWhyNot(ap *wire.Approval, person string) string {
	if ap == nil {
		return ""
	}
	for _, l := range ap.Levels {
		if slices.ContainsFunc(l.ApprovedBy, func(p string) bool { return approval.SamePerson(p, person) }) {
			return "You approved it already; " + ap.Missing + "."
		}
	}
	for _, l := range ap.Levels {
		if l.Remaining > 0 && (l.AnyApprover || slices.ContainsFunc(l.CanApprove, func(p string) bool { return approval.SamePerson(p, person) })) {
			return ""
		}
	}
	return "Your approval counts at no level that still needs one: " + ap.Missing + "."
}
