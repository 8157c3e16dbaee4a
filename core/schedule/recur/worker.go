package recur

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/wire"
)

// Grace is how late the worker may handle an occurrence while a core runs
// (a slow store, a pass that took long), whatever the schedule's catch_up.
const Grace = 30 * time.Second

// DefaultInterval is how often the worker looks at the schedules.
const DefaultInterval = time.Second

// Config configures a Worker.
type Config struct {
	Runs *runs.Engine
	// Nudge asks for a full sync of a cluster whose run was just made (nil: none).
	Nudge func(clusterID string)
	// Interval is how often the schedules are looked at (DefaultInterval
	// when 0).
	Interval time.Duration
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
}

// Worker makes the runs of active schedules, one per occurrence. It runs on
// every replica: the run's id derives from the schedule and the occurrence
// (schedule.RunID) and each occurrence is handled in one transaction that
// also records it on the schedule, so two replicas, or a core restarted
// after a crash, never make a second run for one occurrence
// (docs/architecture.md, "Windows and schedules").
type Worker struct {
	startstop.Base
	cfg Config
	st  store.Store
	log *slog.Logger
	// planned, when set (tests), is called once an occurrence's run is
	// planned, before the write transaction.
	planned func()
}

// New returns a worker; it starts nothing.
func New(cfg Config, st store.Store, log *slog.Logger) *Worker {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	return &Worker{cfg: cfg, st: st, log: log.With("component", "schedules")}
}

var _ startstop.Service = (*Worker)(nil)

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
				w.log.Warn("schedules pass failed", "err", err)
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

// Pass looks at every active schedule once: one whose playbook moved under
// `latest` goes back to approval; one with an occurrence due handles it.
func (w *Worker) Pass(ctx context.Context) error {
	var list []store.Schedule
	latest := map[string]int{}
	err := w.st.Read(ctx, func(r store.Reader) error {
		var err error
		if list, err = r.Schedules(ctx); err != nil {
			return err
		}
		for _, sc := range list {
			if sc.State != store.ScheduleActive || sc.Version != 0 {
				continue
			}
			if _, ok := latest[sc.Playbook]; ok {
				continue
			}
			pb, err := r.Playbook(ctx, sc.Playbook, 0)
			if errors.Is(err, store.ErrNotFound) {
				// Occur sends that schedule back; the others go on.
				latest[sc.Playbook] = -1
				continue
			}
			if err != nil {
				return err
			}
			latest[sc.Playbook] = pb.Version
		}
		return nil
	})
	if err != nil {
		return err
	}
	now := w.now()
	var errs []error
	for i := range list {
		sc := &list[i]
		if sc.State != store.ScheduleActive {
			continue
		}
		c, err := schedule.ParseCron(sc.Cron, sc.Timezone)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", sc.Name, err))
			continue
		}
		at, due := schedule.Due(c, now, max(time.Duration(sc.CatchUpS)*time.Second, Grace), sc.ActiveSince, sc.LastOccurrence)
		moved := sc.Version == 0 && latest[sc.Playbook] != sc.ApprovedVersion
		if !due && !moved {
			continue
		}
		if err := w.Occur(ctx, sc.Name, at, due); err != nil && ctx.Err() == nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", sc.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Occur handles schedule name at the occurrence at (when due; else it only
// checks that the approval still holds), in one transaction: the schedule
// goes back to approval when its playbook moved; the occurrence is skipped
// when concurrency is forbid and its previous run is open; otherwise it
// makes its run. Either way the occurrence is recorded as handled. An
// occurrence handled already (by another replica) is left alone.
//
// The run is planned outside the write transaction, as every run is
// (runs.Engine.CreateIn): the transaction takes the plan only when the
// playbook version and the cluster's nodes are still those it was made
// on, and plans again otherwise.
func (w *Worker) Occur(ctx context.Context, name string, at time.Time, due bool) error {
	var made *store.Run
	occur := func(tx store.Tx, op *occurrencePlan) error {
		made = nil
		sc, err := tx.Schedule(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil || sc.State != store.ScheduleActive {
			return err
		}
		if due && sc.LastOccurrence != nil && !at.After(*sc.LastOccurrence) {
			return nil // handled by another replica
		}
		t := w.now()
		pb, err := resolve(ctx, tx, sc)
		if errors.Is(err, store.ErrNotFound) {
			// Its playbook (or the version it pins) is gone: nothing may
			// run, and it says so once rather than failing every pass.
			why := fmt.Sprintf("playbook %s version %s not found", sc.Playbook, wire.VersionRef(sc.Version))
			return sendBack(ctx, tx, sc, t, why, why, "playbook gone", map[string]any{"playbook": sc.Playbook})
		}
		if err != nil {
			return err
		}
		if cur := schedule.Digest(sc, pb.Version, pb.Digest); cur != sc.ApprovedDigest {
			return unapprove(ctx, tx, sc, pb, cur, t)
		}
		if !due {
			return nil
		}
		if why, err := ApproverGone(ctx, tx, sc.ApprovedBy, t); err != nil || why != "" {
			if err != nil {
				return err
			}
			return sendBack(ctx, tx, sc, t, why, "approver "+sc.ApprovedBy+" may no longer approve", "approver gone",
				map[string]any{"approved_by": sc.ApprovedBy, "occurrence": at.UTC()})
		}
		sc.LastOccurrence, sc.UpdatedTS = action.TimePtr(at), t
		if err := tx.UpdateSchedule(ctx, sc); err != nil {
			return err
		}
		id := schedule.RunID(sc.ID, at)
		if ok, err := store.RunExists(ctx, tx, id); err != nil || ok {
			return err
		}
		core := actions.Actor{Name: store.ActorCore}
		when := at.UTC().Format(time.RFC3339)
		if sc.Concurrency == store.ConcurrencyForbid {
			last, err := tx.ScheduleRuns(ctx, sc.ID, 1)
			if err != nil {
				return err
			}
			if len(last) > 0 && !store.RunFinal(last[0].State) {
				return tx.AppendEvent(ctx, event(sc, store.EventScheduleSkipped, core, t,
					fmt.Sprintf("schedule %s skipped its occurrence at %s: its previous run %s is still %s (concurrency: forbid)",
						sc.Name, when, last[0].ID, last[0].State),
					map[string]any{"occurrence": at.UTC(), "reason": "previous run open", "run_id": last[0].ID}))
			}
		}
		if op == nil || op.version != pb.Version || op.digest != pb.Digest || op.cluster != sc.ClusterID || op.params != string(sc.Params) {
			return fmt.Errorf("%w: schedule %s changed while its run was planned", runs.ErrReplan, sc.Name)
		}
		// The nodes are re-checked whether the plan succeeded or failed: a
		// failure on nodes that changed since is planned again, not
		// recorded.
		plan, err := op.plan, op.err
		if rerr := (&runs.Planned{Cluster: op.cluster, Nodes: op.nodes}).Recheck(ctx, tx); errors.Is(rerr, runs.ErrReplan) {
			return rerr
		} else if err == nil {
			err = rerr
		}
		if err != nil {
			if !errors.Is(err, runs.ErrInvalid) && !errors.Is(err, runs.ErrUnresolvable) && !errors.Is(err, playbook.ErrInvalid) &&
				!errors.Is(err, store.ErrNotFound) {
				return err
			}
			return tx.AppendEvent(ctx, event(sc, store.EventScheduleSkipped, core, t,
				fmt.Sprintf("schedule %s made no run for its occurrence at %s: %v", sc.Name, when, err),
				map[string]any{"occurrence": at.UTC(), "reason": "plan failed"}))
		}
		made, err = w.cfg.Runs.InsertOccurrence(ctx, tx, runs.Occurrence{ID: id, ScheduleID: sc.ID, Schedule: sc.Name, At: at,
			Requester: sc.Requester, ApprovedBy: sc.ApprovedBy, Lock: plan.Lock}, plan.Cluster, plan.Stages, plan.Name, plan.Version)
		if err != nil {
			return err
		}
		ev := event(sc, store.EventScheduleOccurrence, core, t,
			fmt.Sprintf("schedule %s made run %s for its occurrence at %s", sc.Name, id, when),
			map[string]any{"occurrence": at.UTC()})
		ev.RunID = id
		return tx.AppendEvent(ctx, ev)
	}
	_, err := runs.Replanning(ctx, w.st, func() (*occurrencePlan, error) {
		return w.planOccurrence(ctx, name, due), nil
	}, func(tx store.Tx, op *occurrencePlan) (struct{}, error) {
		return struct{}{}, occur(tx, op)
	})
	if errors.Is(err, store.ErrExists) {
		return nil // another replica made this occurrence's run first
	}
	if err == nil && made != nil {
		w.log.Info("schedule made a run", "schedule", name, "run", made.ID, "occurrence", at)
		if w.cfg.Nudge != nil {
			w.cfg.Nudge(made.ClusterID)
		}
	}
	return err
}

// occurrencePlan is the run of a schedule's occurrence, planned outside
// the write transaction from the playbook version, cluster and parameters
// it names; err says why it could not be planned (the occurrence is then
// skipped, saying so). nil: nothing to plan (not due, or gone).
type occurrencePlan struct {
	version         int
	digest, cluster string
	params          string
	// nodes is the runs.NodesDigest of the cluster's nodes it was planned
	// on, kept when planning failed too ("" when they could not be read).
	nodes string
	plan  *playbook.Planned
	err   error
}

// planOccurrence plans schedule name's run as it is now, reading the
// schedule, its playbook and the cluster's nodes in short reads.
func (w *Worker) planOccurrence(ctx context.Context, name string, due bool) *occurrencePlan {
	if !due {
		return nil
	}
	var sc *store.Schedule
	var pb *store.Playbook
	var nodes []store.Node
	var nodesErr error
	err := w.st.Read(ctx, func(r store.Reader) error {
		var err error
		if sc, err = r.Schedule(ctx, name); err != nil {
			return err
		}
		if pb, err = resolve(ctx, r, sc); err != nil {
			return err
		}
		nodes, nodesErr = runs.ReadNodes(ctx, r, sc.ClusterID)
		return nil
	})
	if err != nil {
		return nil // the transaction finds out why, and says so
	}
	op := &occurrencePlan{version: pb.Version, digest: pb.Digest, cluster: sc.ClusterID, params: string(sc.Params)}
	if err = nodesErr; err == nil {
		op.nodes, err = runs.NodesDigest(nodes)
	}
	if err == nil {
		var p *playbook.Playbook
		if p, err = playbook.Parse([]byte(pb.Document)); err == nil {
			var params map[string]string
			if err = json.Unmarshal(sc.Params, &params); err == nil {
				op.plan, err = p.PlanOn(pb.Version, &wire.PlanRequest{ClusterID: sc.ClusterID, Params: params}, nodes, w.cfg.Runs.KindLocks())
			}
		}
	}
	if w.planned != nil {
		w.planned()
	}
	op.err = err
	return op
}
