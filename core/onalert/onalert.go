// Package onalert starts a cluster's on_alert playbook when missing
// declared nodes make it ALERT (docs/architecture.md, "Declared
// membership"): the playbook its expect block names, approved once like a
// schedule (bound to a digest of the playbook version and the parameters,
// voided by any change), started at most once per alert with the missing
// nodes as a parameter. Its run goes as any run, under the cluster's
// budget, windows and freezes. When it does not end DONE, the cluster stays
// ALERT and an event (a notification) says so.
package onalert

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/schedule/recur"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/wire"
)

// DefaultInterval is how often the worker looks at the clusters.
const DefaultInterval = time.Second

// ErrNone: the cluster names no on_alert playbook.
var ErrNone = errors.New("the cluster names no on_alert playbook (expect.on_alert)")

// Digest fingerprints what an approver of a cluster's on_alert playbook
// signs off: the cluster, the block (playbook, version asked, params) and
// the playbook version it resolves to (number and document digest).
func Digest(clusterID string, a *nodes.OnAlert, version int, playbookDigest string) string {
	keys := slices.Sorted(maps.Keys(a.Params))
	kv := make([][2]string, len(keys))
	for i, k := range keys {
		kv[i] = [2]string{k, a.Params[k]}
	}
	v := struct {
		Cluster, Playbook string
		Version           int
		Params            [][2]string
		PlaybookVersion   int
		PlaybookDigest    string
	}{clusterID, a.Playbook, a.Version, kv, version, playbookDigest}
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Current resolves cluster clusterID's on_alert block a to its playbook
// version as stored now, and returns that version and the digest an
// approval of it signs (store.ErrNotFound: the playbook is not stored).
func Current(ctx context.Context, r store.Reader, clusterID string, a *nodes.OnAlert) (*store.Playbook, string, error) {
	pb, err := r.Playbook(ctx, a.Playbook, a.Version)
	if err != nil {
		return nil, "", err
	}
	return pb, Digest(clusterID, a, pb.Version, pb.Digest), nil
}

// State reads the stored state of the cluster's on_alert playbook (a new
// one when there is none).
func State(ctx context.Context, r store.Reader, clusterID string) (*store.OnAlert, error) {
	st, err := r.OnAlert(ctx, clusterID)
	if errors.Is(err, store.ErrNotFound) {
		return &store.OnAlert{ClusterID: clusterID}, nil
	}
	return st, err
}

// Approve records, in tx, who approved the on_alert playbook of the
// cluster as it is now, with its event; digest, when given, must be the
// current one (the one the approver was shown). It returns the digest.
func Approve(ctx context.Context, tx store.Tx, clusterID string, a *nodes.OnAlert, digest string, by actions.Actor, t time.Time) (string, error) {
	pb, cur, err := Current(ctx, tx, clusterID, a)
	if err != nil {
		return "", err
	}
	if digest != "" && digest != cur {
		return "", fmt.Errorf("%w: digest %.12s is not the on_alert playbook's now (%.12s): look at it again", ErrMoved, digest, cur)
	}
	st, err := State(ctx, tx, clusterID)
	if err != nil {
		return "", err
	}
	st.Digest, st.ApprovedBy, st.ApprovedTS, st.UpdatedTS = cur, by.Name, action.TimePtr(t), t
	if err := tx.PutOnAlert(ctx, st); err != nil {
		return "", err
	}
	return cur, tx.AppendEvent(ctx, &store.Event{TS: t, Type: store.EventOnAlertApproved, Actor: by.Name, ClientAddr: by.Addr,
		ClusterID: clusterID, Message: fmt.Sprintf("%s approved the on_alert playbook %s v%d of cluster %s (digest %.12s)",
			by.Name, pb.Name, pb.Version, clusterID, cur),
		Data: map[string]any{"playbook": pb.Name, "version": pb.Version, "digest": cur}})
}

// ErrMoved: the digest approved is not the current one.
var ErrMoved = errors.New("the on_alert playbook changed")

// Config configures a Worker.
type Config struct {
	Runs    *runs.Engine
	Members *live.Value[nodes.Membership]
	// Nudge asks for a full sync of a cluster whose run was just made
	// (nil: none).
	Nudge func(clusterID string)
	// Interval is how often the clusters are looked at (DefaultInterval
	// when 0).
	Interval time.Duration
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
}

// Worker starts on_alert playbooks. It runs on every replica: each alert
// is counted on the cluster's stored state and its run's id derives from
// the cluster and that count, in the transaction that counts it, so two
// replicas never make two runs for one alert.
type Worker struct {
	startstop.Base
	cfg Config
	st  store.Store
	log *slog.Logger
}

var _ startstop.Service = (*Worker)(nil)

// New returns a worker; it starts nothing.
func New(cfg Config, st store.Store, log *slog.Logger) *Worker {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Worker{cfg: cfg, st: st, log: log.With("component", "on_alert")}
}

func (w *Worker) now() time.Time {
	if w.cfg.Now != nil {
		return action.UTC(w.cfg.Now())
	}
	return action.UTC(time.Now())
}

// Start runs the worker until ctx ends or Stop is called.
func (w *Worker) Start(ctx context.Context) error {
	ctx, done, err := w.StartInit(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer done()
		tick := time.NewTicker(w.cfg.Interval)
		defer tick.Stop()
		for {
			if err := w.Pass(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("on_alert pass failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return nil
}

// Pass looks once at every cluster naming an on_alert playbook.
func (w *Worker) Pass(ctx context.Context) error {
	m := w.cfg.Members.Load()
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(m)) {
		if m[id].OnAlert == nil {
			continue
		}
		if err := w.Check(ctx, id, m[id]); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// runSpace is the name space of the ids of on_alert runs (UUID v5).
var runSpace = uuid.MustParse("0b6a3c52-64e3-4f43-9c1e-7a4b0c2f9d13")

// RunID is the id of the run of the cluster's n-th alert.
func RunID(clusterID string, n int) string {
	return uuid.NewSHA1(runSpace, []byte(fmt.Sprintf("%s#%d", clusterID, n))).String()
}

// Check handles cluster clusterID, declaring e: an alert that began (the
// cluster ALERT with missing declared nodes, none handled) is counted and
// its run made (or why not said); an alert that ended (the cluster no
// longer ALERT) is closed; the run of the last alert, once final, is
// reported. It looks in a read first and opens a write transaction only
// when one of these is due, so that a cluster that stays as it is costs
// each replica no write at each look; the write decides again on what it
// reads.
func (w *Worker) Check(ctx context.Context, clusterID string, e nodes.Expect) error {
	due := false
	err := w.st.Read(ctx, func(rd store.Reader) error {
		var err error
		due, err = w.step(ctx, rd, nil, clusterID, e, w.now(), nil)
		return err
	})
	if err != nil || !due {
		return err
	}
	var made *store.Run
	var tried string
	err = w.st.Update(ctx, func(tx store.Tx) error {
		made, tried = nil, ""
		_, err := w.step(ctx, tx, tx, clusterID, e, w.now(), func(r *store.Run, id string) { made, tried = r, id })
		return err
	})
	if errors.Is(err, store.ErrExists) && tried != "" {
		// Another replica made this alert's run first, unless the id
		// was taken otherwise: say so.
		if rerr := w.st.Read(ctx, func(rd store.Reader) error {
			_, err := rd.Run(ctx, tried)
			return err
		}); rerr != nil {
			w.log.Warn("on_alert could not make its run: its id is taken but no run has it", "cluster", clusterID,
				"run", tried, "err", err, "read", rerr)
			return err
		}
		return nil
	}
	if err == nil && made != nil {
		w.log.Info("on_alert made a run", "cluster", clusterID, "run", made.ID)
		if w.cfg.Nudge != nil {
			w.cfg.Nudge(clusterID)
		}
	}
	return err
}

// step is Check's one decision, read in rd. With tx nil it only reports
// whether something is due; with tx (rd itself) it does it, calling made
// with the run it made (or the id it tried). While the run of an earlier
// alert is not final, a new alert starts nothing: it is counted, with one
// cluster.on_alert_skipped event saying so, and the earlier run's end is
// still reported.
func (w *Worker) step(ctx context.Context, rd store.Reader, tx store.Tx, clusterID string, e nodes.Expect, t time.Time,
	made func(*store.Run, string)) (bool, error) {
	cl, err := rd.Cluster(ctx, clusterID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	st, err := State(ctx, rd, clusterID)
	if err != nil {
		return false, err
	}
	var running, ended *store.Run
	if st.RunID != "" && st.Outcome == "" {
		r, err := rd.Run(ctx, st.RunID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
		switch {
		case r != nil && store.RunFinal(r.State):
			ended = r
		case r != nil:
			running = r
		}
	}
	// An alert lasts while the cluster is ALERT: a missing node's record
	// that changes (its grace counts from there) does not end it, nor
	// make a second one.
	ends := cl.Status != store.ClusterAlert && st.AlertSince != nil
	var missing []nodes.Missing
	if cl.Status == store.ClusterAlert && st.AlertSince == nil {
		all, err := rd.Nodes(ctx, clusterID)
		if err != nil {
			return false, err
		}
		members, _ := nodes.Membership{clusterID: e}.Of(clusterID, all, t)
		missing = members.Missing
	}
	begins := len(missing) > 0
	if !ends && !begins && ended == nil {
		return false, nil
	}
	if tx == nil {
		return true, nil
	}
	if ended != nil {
		st.Outcome = ended.State
		msg := fmt.Sprintf("the on_alert run %s of cluster %s ended %s", ended.ID, clusterID, ended.State)
		if ended.State != store.RunDone {
			msg += fmt.Sprintf(" (%s): the cluster stays %s", ended.StateReason, cl.Status)
		}
		if err := tx.AppendEvent(ctx, &store.Event{TS: t, Type: store.EventOnAlertFinished, Actor: store.ActorCore,
			ClusterID: clusterID, RunID: ended.ID, Message: msg,
			Data: map[string]any{"state": ended.State, "cluster_status": cl.Status}}); err != nil {
			return false, err
		}
	}
	switch {
	case ends:
		st.AlertSince = nil
	case begins && running != nil:
		if err := w.busy(ctx, tx, st, e.OnAlert, missing, running, t); err != nil {
			return false, err
		}
	case begins:
		r, err := w.start(ctx, tx, st, e.OnAlert, missing, t, func(id string) { made(nil, id) })
		if err != nil {
			return false, err
		}
		if r != nil {
			made(r, r.ID)
		}
	}
	st.UpdatedTS = t
	return true, tx.PutOnAlert(ctx, st)
}

// busy counts a new alert of the cluster of st, missing missing, while
// run, the earlier alert's, is not final: it starts nothing, and says so
// once (the alert is counted, so the next look finds it handled); st keeps
// the earlier run, whose end is reported still.
func (w *Worker) busy(ctx context.Context, tx store.Tx, st *store.OnAlert, a *nodes.OnAlert, missing []nodes.Missing,
	run *store.Run, t time.Time) error {
	st.Alerts++
	st.AlertSince = action.TimePtr(t)
	st.Missing = missingOf(missing)
	why := "previous recovery still running (run " + run.ID + ")"
	return tx.AppendEvent(ctx, &store.Event{TS: t, Type: store.EventOnAlertSkipped, Actor: store.ActorCore,
		ClusterID: st.ClusterID, RunID: run.ID,
		Message: fmt.Sprintf("cluster %s is ALERT (missing: %s) but its on_alert playbook %s was not started: %s",
			st.ClusterID, strings.Join(st.Missing, ", "), a.Playbook, why),
		Data: map[string]any{"playbook": a.Playbook, "missing": st.Missing, "reason": why}})
}

// missingOf is how st.Missing holds missing: ids, or a count's reason.
func missingOf(missing []nodes.Missing) []string {
	var out []string
	for _, m := range missing {
		if m.ID != "" {
			out = append(out, m.ID)
		} else {
			out = append(out, m.Reason)
		}
	}
	return out
}

// start counts a new alert of the cluster of st, missing missing, and
// makes its run from a when its approval holds; otherwise it says why
// not (a cluster.on_alert_skipped event). It returns the run made.
func (w *Worker) start(ctx context.Context, tx store.Tx, st *store.OnAlert, a *nodes.OnAlert, missing []nodes.Missing,
	t time.Time, trying func(id string)) (*store.Run, error) {
	st.Alerts++
	st.AlertSince, st.RunID, st.Outcome = action.TimePtr(t), "", ""
	st.Missing = missingOf(missing)
	skip := func(why string) (*store.Run, error) {
		st.Outcome = "not started: " + why
		return nil, tx.AppendEvent(ctx, &store.Event{TS: t, Type: store.EventOnAlertSkipped, Actor: store.ActorCore,
			ClusterID: st.ClusterID, Message: fmt.Sprintf("cluster %s is ALERT (missing: %s) but its on_alert playbook %s was not started: %s; the cluster stays ALERT",
				st.ClusterID, strings.Join(st.Missing, ", "), a.Playbook, why),
			Data: map[string]any{"playbook": a.Playbook, "missing": st.Missing, "reason": why}})
	}
	pb, cur, err := Current(ctx, tx, st.ClusterID, a)
	if errors.Is(err, store.ErrNotFound) {
		return skip(fmt.Sprintf("playbook %s version %s not found", a.Playbook, wire.VersionRef(a.Version)))
	} else if err != nil {
		return nil, err
	}
	switch {
	case st.Digest == "":
		return skip("nobody approved it (muster cluster approve-on-alert " + st.ClusterID + ")")
	case st.Digest != cur:
		return skip(fmt.Sprintf("the approval by %s is void: the playbook or its params changed since (approve it again)", st.ApprovedBy))
	}
	// As at a schedule's occurrence: an approver who may no longer
	// approve (token expired, revoked, role gone) starts nothing.
	if why, err := recur.ApproverGone(ctx, tx, st.ApprovedBy, t); err != nil {
		return nil, err
	} else if why != "" {
		return skip(why)
	}
	all, err := runs.ReadNodes(ctx, tx, st.ClusterID)
	if err != nil {
		return nil, err
	}
	p, err := playbook.Parse([]byte(pb.Document))
	if err != nil {
		return skip(err.Error())
	}
	params := maps.Clone(a.Params)
	if params == nil {
		params = map[string]string{}
	}
	params[nodes.OnAlertParam] = strings.Join(st.Missing, ",")
	plan, err := p.PlanOn(pb.Version, &wire.PlanRequest{ClusterID: st.ClusterID, Params: params}, all, w.cfg.Runs.KindLocks())
	if err != nil {
		return skip("its plan failed: " + err.Error())
	}
	id := RunID(st.ClusterID, st.Alerts)
	trying(id)
	origin := "on_alert of cluster " + st.ClusterID
	r, err := w.cfg.Runs.InsertOccurrence(ctx, tx, runs.Occurrence{ID: id, Schedule: origin, Origin: origin, At: t,
		Requester: store.ActorCore, ApprovedBy: st.ApprovedBy, Lock: plan.Lock}, plan.Cluster, plan.Stages, plan.Name, plan.Version)
	if err != nil {
		return nil, err
	}
	st.RunID = r.ID
	return r, tx.AppendEvent(ctx, &store.Event{TS: t, Type: store.EventOnAlertStarted, Actor: store.ActorCore,
		ClusterID: st.ClusterID, RunID: r.ID,
		Message: fmt.Sprintf("cluster %s is ALERT (missing: %s): started its on_alert playbook %s v%d as run %s, approved by %s",
			st.ClusterID, strings.Join(st.Missing, ", "), pb.Name, pb.Version, r.ID, st.ApprovedBy),
		Data: map[string]any{"playbook": pb.Name, "version": pb.Version, "missing": st.Missing}})
}
