package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// Freezes as records (docs/architecture.md, "Policy as data"). Who may
// freeze a cluster is who holds auth.Freeze on it (operator, approver,
// admin): freezing only ever stops work. Lifting a freeze before its end
// lets work go that someone wanted held: it takes auth.Unfreeze on the
// cluster (approver, admin) and a reason. Every change is an event naming
// who and why; every replica follows the store at its next commit
// (schedule.Watch), the one that made the change at once.

// MaxFreezeAhead bounds how far ahead a freeze may end (and begin).
const MaxFreezeAhead = 366 * 24 * time.Hour

// FreezeView is a stored freeze as the API shows it.
func FreezeView(f store.Freeze) wire.Freeze {
	created := f.CreatedTS
	return wire.Freeze{ID: f.ID, ClusterID: f.ClusterID, From: f.From, To: f.To, Reason: f.Reason, Source: f.Source,
		CreatedBy: f.CreatedBy, CreatedTS: &created, LiftedTS: f.LiftedTS, LiftedBy: f.LiftedBy, LiftReason: f.LiftReason}
}

// checkFreezeReason is the rule of a freeze's or a lift's reason: required,
// otherwise as every reason (checkReason).
func checkFreezeReason(reason, what string) error {
	if strings.TrimSpace(reason) == "" {
		return BadRequest("reason is required: say why %s", what)
	}
	return checkReason(reason, false)
}

// CreateFreeze freezes cluster clusterID from req.From (now when absent)
// until req.Until.
func (o *Ops) CreateFreeze(ctx context.Context, c Caller, clusterID string, req *wire.CreateFreezeRequest) (wire.Freeze, error) {
	if err := Authorize(c, auth.Freeze); err != nil {
		return wire.Freeze{}, err
	}
	now := o.now()
	from := now
	if req.From != nil {
		from = req.From.UTC()
		if from.Before(now.Add(-schedule.NotBeforeSkew)) {
			return wire.Freeze{}, BadRequest("from %s is in the past: leave it out to freeze from now", from.Format(time.RFC3339))
		}
		if from.Before(now) {
			from = now
		}
	}
	until := req.Until.UTC()
	switch {
	case req.Until.IsZero():
		return wire.Freeze{}, BadRequest("until is required: when the freeze ends")
	case !until.After(from):
		return wire.Freeze{}, BadRequest("until %s is not after the freeze's start %s", until.Format(time.RFC3339), from.Format(time.RFC3339))
	case until.After(now.Add(MaxFreezeAhead)):
		return wire.Freeze{}, BadRequest("until %s is more than a year ahead", until.Format(time.RFC3339))
	}
	if err := checkFreezeReason(req.Reason, "the cluster is frozen"); err != nil {
		return wire.Freeze{}, err
	}
	if err := checkFileSource(req.Source); err != nil {
		return wire.Freeze{}, err
	}
	f := &store.Freeze{ID: action.NewID(), ClusterID: clusterID, From: from, To: until, Reason: strings.TrimSpace(req.Reason),
		Source: req.Source, CreatedBy: c.Name, CreatedTS: now}
	err := o.st.Update(ctx, func(tx store.Tx) error {
		if err := authorizeIn(ctx, tx, c, auth.Freeze, clusterID); err != nil {
			return err
		}
		if _, err := tx.Cluster(ctx, clusterID); err != nil {
			return err
		}
		return InsertFreeze(ctx, tx, f, c.Name, c.Addr)
	})
	if err != nil {
		return wire.Freeze{}, err
	}
	return FreezeView(*f), nil
}

// InsertFreeze stores f with its freeze.created event by actor: the one
// write of a new freeze, whoever makes it (the API, muster apply). It
// refuses a cluster that holds schedule.MaxFreezes freezes in force.
func InsertFreeze(ctx context.Context, tx store.Tx, f *store.Freeze, actor, addr string) error {
	live, err := tx.Freezes(ctx, store.FreezeQuery{ClusterID: f.ClusterID, Live: true, EndsAfter: f.CreatedTS})
	if err != nil {
		return err
	}
	if len(live) >= schedule.MaxFreezes {
		return fmt.Errorf("%w: cluster %s holds %d freezes in force, at most %d: lift one first", ErrConflict, f.ClusterID,
			len(live), schedule.MaxFreezes)
	}
	if err := tx.InsertFreeze(ctx, f); err != nil {
		return err
	}
	msg := fmt.Sprintf("cluster %s frozen until %s by %s: %s", f.ClusterID, f.To.Format(time.RFC3339), actor, f.Reason)
	if f.From.After(f.CreatedTS) {
		msg = fmt.Sprintf("cluster %s frozen from %s until %s by %s: %s", f.ClusterID, f.From.Format(time.RFC3339),
			f.To.Format(time.RFC3339), actor, f.Reason)
	}
	return tx.AppendEvent(ctx, &store.Event{Type: store.EventFreezeCreated, Actor: actor, ClientAddr: addr, ClusterID: f.ClusterID,
		Message: msg, Data: map[string]any{"freeze": f.ID, "from": f.From, "to": f.To, "reason": f.Reason, "source": f.Source}})
}

// LiftFreeze lifts freeze id before its end, for reason. Lifting one that
// is lifted already, or over, is a conflict that changes nothing.
func (o *Ops) LiftFreeze(ctx context.Context, c Caller, id, reason string) (wire.Freeze, error) {
	if err := Authorize(c, auth.Unfreeze); err != nil {
		return wire.Freeze{}, err
	}
	if err := checkFreezeReason(reason, "the freeze may end early"); err != nil {
		return wire.Freeze{}, err
	}
	reason = strings.TrimSpace(reason)
	now := o.now()
	var out store.Freeze
	err := o.st.Update(ctx, func(tx store.Tx) error {
		f, err := tx.Freeze(ctx, id)
		if err != nil {
			return err
		}
		if err := authorizeIn(ctx, tx, c, auth.Unfreeze, f.ClusterID); err != nil {
			if errors.Is(err, store.ErrNotFound) { // its cluster does not exist for the caller: nor does it
				return fmt.Errorf("freeze %q: %w", id, store.ErrNotFound)
			}
			return err
		}
		switch {
		case f.LiftedTS != nil:
			return fmt.Errorf("%w: freeze %s was lifted by %s at %s", ErrConflict, f.ID, f.LiftedBy, f.LiftedTS.Format(time.RFC3339))
		case !f.To.After(now):
			return fmt.Errorf("%w: freeze %s ended at %s", ErrConflict, f.ID, f.To.Format(time.RFC3339))
		}
		if err := liftFreeze(ctx, tx, f, now, c.Name, c.Addr, reason); err != nil {
			return err
		}
		out = *f
		return nil
	})
	if err != nil {
		return wire.Freeze{}, err
	}
	o.nudgeCluster(out.ClusterID) // what the freeze held may go now
	return FreezeView(out), nil
}

// liftFreeze lifts f at now by actor for reason, with its freeze.lifted
// event: the one write of a lift, whoever makes it (the API, muster apply).
func liftFreeze(ctx context.Context, tx store.Tx, f *store.Freeze, now time.Time, actor, addr, reason string) error {
	if _, err := tx.LiftFreeze(ctx, f.ID, now, actor, reason); err != nil {
		return err
	}
	f.LiftedTS, f.LiftedBy, f.LiftReason = &now, actor, reason
	return tx.AppendEvent(ctx, &store.Event{Type: store.EventFreezeLifted, Actor: actor, ClientAddr: addr, ClusterID: f.ClusterID,
		Message: fmt.Sprintf("freeze %s of cluster %s (%s) lifted by %s: %s", f.ID, f.ClusterID, f.Reason, actor, reason),
		Data:    map[string]any{"freeze": f.ID, "reason": reason, "freeze_reason": f.Reason}})
}

// Freezes lists the freezes of the clusters the caller may read (of one
// when clusterID is set): those in force or to come, or with all, every
// one kept (lifted and ended ones with their history).
func (o *Ops) Freezes(ctx context.Context, c Caller, clusterID string, all bool) ([]wire.Freeze, error) {
	if err := Authorize(c, auth.Read); err != nil {
		return nil, err
	}
	q := store.FreezeQuery{ClusterID: clusterID}
	if !all {
		q.Live, q.EndsAfter = true, o.now()
	}
	out := []wire.Freeze{}
	err := o.st.Read(ctx, func(r store.Reader) error {
		v, err := Visibility(ctx, r, c)
		if err != nil {
			return err
		}
		if clusterID != "" {
			if err := v.Check("cluster", clusterID); err != nil {
				return err
			}
		}
		fs, err := r.Freezes(ctx, q)
		for _, f := range fs {
			if v.Has(f.ClusterID) {
				out = append(out, FreezeView(f))
			}
		}
		return err
	})
	return out, err
}

// maxFileName bounds the name of a file a freeze came from.
const maxFileName = 200

// checkFileSource is the rule of a request's source: none, or "file:NAME"
// (muster apply -f NAME) with a name of 1 to 200 bytes of valid UTF-8
// without control characters or slashes.
func checkFileSource(src string) error {
	if src == "" {
		return nil
	}
	name, ok := strings.CutPrefix(src, store.SourceFilePrefix)
	if !ok || name == "" || len(name) > maxFileName || !utf8.ValidString(name) || strings.ContainsAny(name, "/\\") ||
		strings.ContainsFunc(name, unicode.IsControl) {
		return BadRequest("source %q: want file:NAME, a file name of 1 to %d bytes", src, maxFileName)
	}
	return nil
}
