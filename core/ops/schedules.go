package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/schedule/recur"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// NextOccurrences is how many next occurrences a schedule's answer lists.
const NextOccurrences = 5

// Outcomes of ApplySchedule (recur.Service.Apply).
const (
	ScheduleUnchanged = recur.Unchanged
)

// checkSchedule checks what a schedule request says that needs no store:
// its name, cron, time zone, concurrency and catch_up (a bad field is a
// schedule.FieldError).
func (o *Ops) checkSchedule(req *wire.CreateScheduleRequest) error {
	_, _, err := schedule.Check(req, o.cfg.Schedules.MinEvery)
	return err
}

// ApplySchedule creates a schedule, or changes the schedule of that name,
// which sends it back to approval; the same schedule again changes nothing
// (outcome ScheduleUnchanged).
func (o *Ops) ApplySchedule(ctx context.Context, c Caller, req *wire.CreateScheduleRequest) (wire.Schedule, error) {
	return o.applySchedule(ctx, c, req, true)
}

// CreateSchedule is ApplySchedule of a new schedule only: a schedule of
// that name is a schedule.FieldError on the name, and nothing changes.
func (o *Ops) CreateSchedule(ctx context.Context, c Caller, req *wire.CreateScheduleRequest) (wire.Schedule, error) {
	return o.applySchedule(ctx, c, req, false)
}

func (o *Ops) applySchedule(ctx context.Context, c Caller, req *wire.CreateScheduleRequest, replace bool) (wire.Schedule, error) {
	if err := Authorize(c, auth.Create); err != nil {
		return wire.Schedule{}, err
	}
	if err := o.checkSchedule(req); err != nil {
		return wire.Schedule{}, err
	}
	var out wire.Schedule
	var outcome string
	err := o.st.Update(ctx, func(tx store.Tx) error {
		if !replace {
			if _, err := tx.Schedule(ctx, req.Name); err == nil {
				if err := o.mayChangeSchedule(ctx, tx, c, auth.Create, req.Name); err != nil {
					return err
				}
				return &schedule.FieldError{Field: "name", Msg: fmt.Sprintf("a schedule named %s exists: choose another name, or replace it", req.Name)}
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		sc, oc, err := o.putSchedule(ctx, tx, c, req, "")
		if err != nil {
			return err
		}
		outcome = oc
		out, err = recur.View(ctx, tx, sc, o.now(), NextOccurrences, false)
		return err
	})
	out.Outcome = outcome
	return out, err
}

// authorizeSchedule refuses a caller who may not put req: create on the
// cluster of the schedule of that name, when there is one, and on req's.
func (o *Ops) authorizeSchedule(ctx context.Context, tx store.Reader, c Caller, req *wire.CreateScheduleRequest) error {
	sc, err := tx.Schedule(ctx, req.Name)
	switch {
	case err == nil:
		if err := hideCluster("schedule", req.Name, authorizeIn(ctx, tx, c, auth.Create, sc.ClusterID)); err != nil {
			return err
		}
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	return authorizeIn(ctx, tx, c, auth.Create, req.Cluster)
}

// putSchedule is a schedule made or changed, by hand (source "") or by
// muster apply (source "file:NAME"), in tx: what the caller must hold, and
// the change, which sends a changed schedule back to approval. One rule for
// both.
func (o *Ops) putSchedule(ctx context.Context, tx store.Tx, c Caller, req *wire.CreateScheduleRequest, source string) (*store.Schedule, string, error) {
	if err := o.authorizeSchedule(ctx, tx, c, req); err != nil {
		return nil, "", err
	}
	return o.cfg.Schedules.ApplyFrom(ctx, tx, req, c.actor(""), source)
}

// ApproveSchedule records an approval of a schedule (an approver on its
// cluster other than whoever created or last changed it and the applier of
// its playbook version) at the first level not met the caller is eligible
// for; once every level is met it is approved, in the same transaction.
// With a digest, only if it is the schedule's digest now, else a conflict.
func (o *Ops) ApproveSchedule(ctx context.Context, c Caller, name, digest string) (wire.Schedule, error) {
	return o.changeSchedule(ctx, c, auth.Approve, name, func(tx store.Tx) (*store.Schedule, error) {
		sc, err := o.scheduleOn(ctx, tx, c, auth.Approve, name)
		if err != nil {
			return nil, err
		}
		if _, _, err := o.cfg.Schedules.MayApprove(ctx, tx, sc, digest, c.Name); err != nil {
			return nil, err
		}
		s, err := o.scheduleSubject(ctx, tx, sc)
		if err != nil {
			return nil, err
		}
		t, err := o.recordApproval(ctx, tx, c, &s)
		if err != nil || !t.Satisfied {
			return sc, err
		}
		return o.cfg.Schedules.Approve(ctx, tx, name, digest, c.actor(""))
	})
}

// scheduleOn reads schedule name and checks that c holds p on its cluster.
func (o *Ops) scheduleOn(ctx context.Context, tx store.Tx, c Caller, p auth.Permission, name string) (*store.Schedule, error) {
	sc, err := tx.Schedule(ctx, name)
	if err != nil {
		return nil, err
	}
	return sc, hideCluster("schedule", name, AuthorizeOn(c, p, sc.ClusterID))
}

// RejectSchedule rejects a schedule waiting for approval (a caller eligible
// at one of its levels).
func (o *Ops) RejectSchedule(ctx context.Context, c Caller, name, reason string) (wire.Schedule, error) {
	if err := checkReasonAs(c, auth.Reject, reason, false); err != nil {
		return wire.Schedule{}, err
	}
	return o.changeSchedule(ctx, c, auth.Reject, name, func(tx store.Tx) (*store.Schedule, error) {
		sc, err := o.scheduleOn(ctx, tx, c, auth.Reject, name)
		if err != nil {
			return nil, err
		}
		if sc.State == store.SchedulePendingApprove {
			s, err := o.scheduleSubject(ctx, tx, sc)
			if err != nil {
				return nil, err
			}
			if err := o.checkReject(ctx, tx, c, s); err != nil {
				return nil, err
			}
		}
		return o.cfg.Schedules.Reject(ctx, tx, name, reason, c.actor(""))
	})
}

// PauseSchedule stops a schedule's occurrences until it is resumed; the
// optional reason is recorded in its state reason and the event.
func (o *Ops) PauseSchedule(ctx context.Context, c Caller, name, reason string) (wire.Schedule, error) {
	if err := checkReasonAs(c, auth.Cancel, reason, false); err != nil {
		return wire.Schedule{}, err
	}
	return o.changeSchedule(ctx, c, auth.Cancel, name, func(tx store.Tx) (*store.Schedule, error) {
		return o.cfg.Schedules.Pause(ctx, tx, name, c.actor(reason))
	})
}

// ResumeSchedule lets a paused schedule's occurrences come again (an
// optional reason, as PauseSchedule).
func (o *Ops) ResumeSchedule(ctx context.Context, c Caller, name, reason string) (wire.Schedule, error) {
	if err := checkReasonAs(c, auth.Continue, reason, false); err != nil {
		return wire.Schedule{}, err
	}
	return o.changeSchedule(ctx, c, auth.Continue, name, func(tx store.Tx) (*store.Schedule, error) {
		return o.cfg.Schedules.Resume(ctx, tx, name, c.actor(reason))
	})
}

// DeleteSchedule removes a schedule; the runs it made stay. The optional
// reason is recorded in the event.
func (o *Ops) DeleteSchedule(ctx context.Context, c Caller, name, reason string) error {
	if err := checkReasonAs(c, auth.Cancel, reason, false); err != nil {
		return err
	}
	if err := CheckScheduleName(name); err != nil {
		return err
	}
	return o.st.Update(ctx, func(tx store.Tx) error {
		if err := o.mayChangeSchedule(ctx, tx, c, auth.Cancel, name); err != nil {
			return err
		}
		_, err := o.cfg.Schedules.Delete(ctx, tx, name, c.actor(reason))
		return err
	})
}

// changeSchedule authorizes p, makes one change to the schedule name in one
// transaction, and answers it as it is after it.
func (o *Ops) changeSchedule(ctx context.Context, c Caller, p auth.Permission, name string,
	fn func(tx store.Tx) (*store.Schedule, error)) (wire.Schedule, error) {
	if err := Authorize(c, p); err != nil {
		return wire.Schedule{}, err
	}
	if err := CheckScheduleName(name); err != nil {
		return wire.Schedule{}, err
	}
	var out wire.Schedule
	err := o.st.Update(ctx, func(tx store.Tx) error {
		if err := o.mayChangeSchedule(ctx, tx, c, p, name); err != nil {
			return err
		}
		sc, err := fn(tx)
		if err != nil {
			return err
		}
		out, err = o.ScheduleView(ctx, tx, sc, NextOccurrences, false)
		return err
	})
	return out, err
}

// mayChangeSchedule refuses a caller without p on the cluster of the
// schedule name, when there is one (what does not exist is the verb's to
// answer).
func (o *Ops) mayChangeSchedule(ctx context.Context, tx store.Tx, c Caller, p auth.Permission, name string) error {
	sc, err := tx.Schedule(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return hideCluster("schedule", name, authorizeIn(ctx, tx, c, p, sc.ClusterID))
}

// hideCluster answers a refusal to read the cluster of an object named
// without its cluster (a schedule by its name) as that object's own 404,
// the same words as one that does not exist: the answer names no cluster.
func hideCluster(what, name string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s %q: %w", what, name, store.ErrNotFound)
	}
	return err
}

// CheckScheduleName refuses what cannot be a schedule's name.
func CheckScheduleName(name string) error {
	if err := names.CheckID(name); err != nil {
		return BadRequest("schedule name: %v", err)
	}
	return nil
}

// ScheduleView is a schedule as it is shown: its next occurrences (next of
// them) and, withRuns, the runs it made.
func (o *Ops) ScheduleView(ctx context.Context, r store.Reader, sc *store.Schedule, next int, withRuns bool) (wire.Schedule, error) {
	out, err := recur.View(ctx, r, sc, o.now(), next, withRuns)
	if err != nil {
		return out, err
	}
	out.Approval, err = o.ScheduleApproval(ctx, r, sc)
	return out, err
}

// MinEvery is the shortest interval a schedule may ask for.
func (o *Ops) MinEvery() time.Duration { return o.cfg.Schedules.MinEvery }

// ScheduleApplier is who applied the playbook version schedule sc runs now
// ("" when there is none): with its requester, the person who may not
// approve it, so that pages offer no approval that ApproveSchedule refuses.
func ScheduleApplier(ctx context.Context, r store.Reader, sc *store.Schedule) (string, error) {
	return recur.Applier(ctx, r, sc)
}
