package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// Running core-side steps (docs/architecture.md, "Runs and playbooks"):
// the planner admits a gate or a call as it admits a child, within the
// stage's max_concurrency, but stores it in the run's row (RunStage.Core,
// PENDING) rather than creating an action. RunCore, called by the
// orchestrator beside each pass of the cluster whose lease it holds, and
// never inside its loop, reads what is due, evaluates it outside any
// transaction with bounded concurrency and a timeout each, and records
// the verdicts through the run's change path (runChange); the planner
// reads them as it reads children. While a canary waits for its promote
// with auto_promote_after_s or abort_on, RunCore watches the canary
// nodes' gates too: held long enough, the canary promotes itself; an
// abort_on gate that fails aborts the run.

// Core step states besides those of actions.
const (
	CorePending   = "PENDING"
	CoreRunning   = "RUNNING"
	CoreCancelled = "CANCELLED"
)

// ActorRule is who a canary's automatic promote and a gate's abort are by.
const ActorRule = "rule"

// Prober evaluates gates and sends calls (core/probe); each call ends
// within timeout.
type Prober interface {
	// Gate evaluates g: the value seen, and whether it passes with why
	// (or why not).
	Gate(ctx context.Context, g wire.Gate, timeout time.Duration) (value string, pass bool, reason string)
	// Call sends c: the answer's status, and whether it succeeded.
	Call(ctx context.Context, c wire.Call, timeout time.Duration) (value string, ok bool, reason string)
}

// coreChild is what the planner reads of a core step: a child without an
// id.
func coreChild(stage, node string, cs store.CoreStep) Child {
	c := Child{Stage: stage, Node: node, Step: cs.Step, Attempt: cs.Attempt, Reason: cs.Reason}
	switch cs.State {
	case CorePending:
		c.State = action.PendingSchedule
	case CoreRunning:
		c.State = action.Running
	case string(action.Done):
		c.State = action.Done
	case CoreCancelled:
		c.State = action.Cancelled
	default:
		c.State = action.Failed
	}
	if cs.Finished != nil {
		c.Finished = *cs.Finished
	}
	return c
}

// admitCore stores the core step the planner admitted (n, with args
// rendered for its node), PENDING, in place of its earlier attempt.
func admitCore(st *store.RunStage, n New, args json.RawMessage, t time.Time) {
	if st.Core == nil {
		st.Core = map[string][]store.CoreStep{}
	}
	cs := store.CoreStep{Step: n.Step, Attempt: max(n.Attempt, 1), State: CorePending, Args: args, Created: t}
	list := st.Core[n.Node]
	if i := slices.IndexFunc(list, func(c store.CoreStep) bool { return c.Step == n.Step }); i >= 0 {
		list[i] = cs
	} else {
		list = append(list, cs)
	}
	st.Core[n.Node] = list
}

// cancelCore ends the core steps of r not finished, but for those of
// when: always steps and rollbacks when keep says so, with why.
func cancelCore(r *store.Run, why string, keep func(st *store.RunStage, step string) bool, t time.Time) {
	for i := range r.Stages {
		st := &r.Stages[i]
		for _, list := range st.Core {
			for j := range list {
				if cs := &list[j]; (cs.State == CorePending || cs.State == CoreRunning) && (keep == nil || !keep(st, cs.Step)) {
					cs.State, cs.Reason, cs.Finished = CoreCancelled, why, action.TimePtr(t)
				}
			}
		}
	}
}

// coreJob is one evaluation RunCore makes.
type coreJob struct {
	run, stage, node, step string
	attempt                int
	kind                   string
	args                   json.RawMessage
	timeout                time.Duration
	// watch: a canary's gate evaluated while it waits for its promote.
	watch bool

	value, reason string
	pass          bool
	at            time.Time
}

// coreEvery is how often a gate under watch (its soak, or a canary
// waiting for its promote over s seconds) is evaluated: a fifth of s,
// between 1 and 10 seconds.
func coreEvery(s int) time.Duration {
	return min(max(time.Duration(s)*time.Second/5, time.Second), 10*time.Second)
}

// Bounds of what a run keeps of an evaluation: the value seen and the
// verdict's words (they come from other servers).
const (
	maxCoreValue  = 256
	maxCoreReason = 512
)

// clip cuts s to at most n bytes, on a character's boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// MaxCoreConcurrency bounds the evaluations RunCore makes at once.
const MaxCoreConcurrency = 16

// SetProber gives the engine what evaluates gates and sends calls; without
// one, RunCore does nothing (core-side steps wait).
func (e *Engine) SetProber(p Prober) { e.Advancer.prober = p }

// RunCore evaluates what is due of the core-side steps of clusterID's
// active runs and records the verdicts, each run in its own transaction
// of st (under ctx's fencing epoch). It reports whether it changed a run
// (the cluster's runs should advance), and when something will next be
// due (zero: nothing waits).
func (e *Engine) RunCore(ctx context.Context, st store.Store, clusterID string) (changed bool, next time.Time, err error) {
	if e.Advancer.prober == nil {
		return false, time.Time{}, nil
	}
	now := e.Advancer.now()
	var jobs []*coreJob
	soon := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	err = st.Read(ctx, func(rd store.Reader) error {
		active, err := rd.RunsInState(ctx, clusterID, store.RunRunning, store.RunPaused)
		if err != nil {
			return err
		}
		ids := map[string]bool{}
		for i := range active {
			r := &active[i]
			if r.Brief {
				if r, err = rd.Run(ctx, r.ID); err != nil {
					return err
				}
			}
			ids[r.ID] = true
			jobs = append(jobs, dueCore(r, now, soon, e.watchedAt.last)...)
		}
		e.watchedAt.keep(clusterID, ids)
		return nil
	})
	if err != nil || len(jobs) == 0 {
		return false, next, err
	}
	e.evaluate(ctx, jobs)
	byRun := map[string][]*coreJob{}
	var order []string
	for _, j := range jobs {
		if _, ok := byRun[j.run]; !ok {
			order = append(order, j.run)
		}
		byRun[j.run] = append(byRun[j.run], j)
	}
	for _, id := range order {
		var did bool
		err := st.Update(ctx, func(tx store.Tx) error {
			var err error
			did, err = e.recordCore(ctx, tx, id, byRun[id])
			return err
		})
		if err != nil {
			return changed, next, err
		}
		changed = changed || did
	}
	// What was just evaluated is due again (a soak, a watch, a retry):
	// the caller calls again by then.
	for _, j := range jobs {
		soon(j.at.Add(time.Second))
	}
	return changed, next, nil
}

// dueCore lists the evaluations of run r due at now, and tells soon when
// the next one not yet due will be.
// A watched gate evaluated last at last(key) (nil: never here) is due
// again coreEvery after the later of that and its stored At.
func dueCore(r *store.Run, now time.Time, soon func(time.Time), last func(watchKey) *time.Time) []*coreJob {
	var jobs []*coreJob
	for i := range r.Stages {
		st := &r.Stages[i]
		for _, node := range sortedKeys(st.Core) {
			for _, cs := range st.Core[node] {
				sp := stepOf(st, cs.Step)
				switch {
				case cs.State == CorePending && r.State != store.RunRunning:
					continue // held while its run is paused, as unsent children are
				case cs.State == CorePending:
				case cs.State == CoreRunning && cs.At != nil:
					due := cs.At.Add(coreEvery(sp.SoakS))
					if now.Before(due) {
						soon(due)
						continue
					}
				case cs.State == string(action.Failed) && cs.Attempt < sp.Attempts() && cs.Finished != nil:
					soon(cs.Finished.Add(retryDelay(sp.Retry, cs.Attempt))) // the planner admits the retry then
					continue
				default:
					continue
				}
				jobs = append(jobs, &coreJob{run: r.ID, stage: st.Name, node: node, step: cs.Step, attempt: cs.Attempt,
					kind: sp.Kind, args: cs.Args, timeout: time.Duration(coreTimeout(&sp)) * time.Second})
			}
		}
		if !watched(r, st) {
			continue
		}
		every := coreEvery(max(st.AutoPromoteAfterS, 5))
		for _, node := range sortedKeys(st.Core) {
			for _, cs := range st.Core[node] {
				sp := stepOf(st, cs.Step)
				if sp.Kind != KindGate || cs.State != string(action.Done) {
					continue
				}
				at := cs.At
				if seen := last(watchKey{r.ClusterID, r.ID, st.Name, node, cs.Step, cs.Attempt}); seen != nil &&
					(at == nil || seen.After(*at)) {
					at = seen
				}
				if at != nil && now.Before(at.Add(every)) {
					soon(at.Add(every))
					continue
				}
				jobs = append(jobs, &coreJob{run: r.ID, stage: st.Name, node: node, step: cs.Step, attempt: cs.Attempt,
					kind: sp.Kind, args: cs.Args, timeout: time.Duration(coreTimeout(&sp)) * time.Second, watch: true})
			}
		}
	}
	return jobs
}

// watched reports whether stage st of r is a canary waiting for its
// promote whose gates the core watches (auto_promote_after_s or abort_on).
func watched(r *store.Run, st *store.RunStage) bool {
	return PausedFor(r) == PauseCanary && st.State == store.StageRunning && st.Canary > 0 && !st.Promoted &&
		(st.AutoPromoteAfterS > 0 || len(st.AbortOn) > 0)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// evaluate runs jobs, at most MaxCoreConcurrency at once; the jobs of one
// pass that ask the same thing (a stage's gate, whose args name no node)
// are asked once.
func (e *Engine) evaluate(ctx context.Context, jobs []*coreJob) {
	type key struct{ kind, args string }
	groups := map[key][]*coreJob{}
	var keys []key
	for _, j := range jobs {
		k := key{j.kind, string(j.args)}
		if j.kind == KindCall {
			k.args += "\x00" + j.run + "\x00" + j.node // a call is sent for each node
		}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], j)
	}
	sem := make(chan struct{}, MaxCoreConcurrency)
	var wg sync.WaitGroup
	for _, k := range keys {
		js := groups[k]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			j := js[0]
			value, pass, reason := e.probe(ctx, j)
			value, reason = clip(value, maxCoreValue), clip(reason, maxCoreReason)
			at := e.Advancer.now()
			for _, o := range js {
				o.value, o.pass, o.reason, o.at = value, pass, reason, at
			}
		}()
	}
	wg.Wait()
}

// probe evaluates one job.
func (e *Engine) probe(ctx context.Context, j *coreJob) (string, bool, string) {
	if j.kind == KindGate {
		g, err := DecodeGate(j.args)
		if err != nil {
			return "", false, err.Error()
		}
		return e.Advancer.prober.Gate(ctx, g, j.timeout)
	}
	c, err := DecodeCall(j.args)
	if err != nil {
		return "", false, err.Error()
	}
	return e.Advancer.prober.Call(ctx, c, j.timeout)
}

// recordCore stores the verdicts of jobs, all of run id, in tx, if the
// steps they evaluated are still where they were; it aborts the run when
// an abort_on gate failed during its canary or its soak, and promotes a
// canary whose gates held auto_promote_after_s. It reports whether the
// run changed.
func (e *Engine) recordCore(ctx context.Context, tx store.Tx, id string, jobs []*coreJob) (bool, error) {
	r, err := tx.Run(ctx, id)
	if err != nil {
		return false, err
	}
	if r.State != store.RunRunning && r.State != store.RunPaused {
		return false, nil
	}
	c := changeOf(r)
	t := e.Advancer.now()
	changed := false
	var abort string // why an abort_on gate aborts the run
	watch := map[string][]*coreJob{}
	for _, j := range jobs {
		i := stageIndex(r, j.stage)
		if i < 0 {
			continue
		}
		st := &r.Stages[i]
		list := st.Core[j.node]
		k := slices.IndexFunc(list, func(c store.CoreStep) bool { return c.Step == j.step && c.Attempt == j.attempt })
		if k < 0 {
			continue
		}
		cs := &list[k]
		sp := stepOf(st, j.step)
		if j.watch {
			if cs.State != string(action.Done) || !watched(r, st) {
				continue
			}
			// A check that sees what the run holds writes nothing: when
			// it was made is kept here, for its next (dueCore).
			e.watchedAt.note(watchKey{r.ClusterID, r.ID, st.Name, j.node, j.step, j.attempt}, j.at)
			if j.value != cs.Value {
				cs.At, cs.Value, cs.Checks = action.TimePtr(j.at), j.value, cs.Checks+1
				changed = true
			}
			watch[st.Name] = append(watch[st.Name], j)
			if !j.pass && slices.Contains(st.AbortOn, j.step) && abort == "" {
				abort = fmt.Sprintf("gate %s failed on node %s while the canary of stage %s waited for its promote: %s",
					j.step, j.node, st.Name, j.reason)
			}
			continue
		}
		if cs.State != CorePending && cs.State != CoreRunning {
			continue
		}
		changed = true
		cs.At, cs.Value, cs.Checks = action.TimePtr(j.at), j.value, cs.Checks+1
		soaking := cs.Passed != nil
		switch {
		case j.pass && sp.Kind == KindGate && sp.SoakS > 0 && !soaking:
			cs.State, cs.Passed, cs.Reason = CoreRunning, action.TimePtr(j.at), j.reason
			continue
		case j.pass && soaking && j.at.Sub(*cs.Passed) < time.Duration(sp.SoakS)*time.Second:
			cs.Reason = j.reason
			continue
		case j.pass:
			cs.State, cs.Reason = string(action.Done), j.reason
			if soaking {
				cs.Reason = fmt.Sprintf("%s; held for its soak of %ds (%d checks)", j.reason, sp.SoakS, cs.Checks)
			}
		default:
			cs.State, cs.Reason = string(action.Failed), j.reason
			if soaking {
				cs.Reason = fmt.Sprintf("failed during its soak, %s after it passed: %s",
					j.at.Sub(*cs.Passed).Round(time.Second), j.reason)
			}
			last := cs.Attempt >= sp.Attempts()
			if slices.Contains(st.AbortOn, j.step) && abort == "" && (soaking || (last && st.Canary > 0 && !st.Promoted)) {
				abort = fmt.Sprintf("gate %s failed on node %s: %s", j.step, j.node, cs.Reason)
			}
		}
		cs.Finished = action.TimePtr(j.at)
		what := "gate"
		if sp.Kind == KindCall {
			what = "call"
		}
		c.event(store.EventRunCoreStep, actions.Core, t,
			fmt.Sprintf("run %s: stage %s: node %s: %s %s %s (attempt %d of %d): %s", r.ID, st.Name, j.node, what, j.step,
				cs.State, cs.Attempt, sp.Attempts(), cs.Reason),
			map[string]any{"stage": st.Name, "node": j.node, "step": j.step, "attempt": cs.Attempt, "state": cs.State,
				"value": cs.Value, "kind": sp.Kind})
	}
	rule := actions.Actor{Name: ActorRule}
	if abort != "" {
		if err := c.save(ctx, tx); err != nil {
			return false, err
		}
		if Aborting(r) {
			return true, nil
		}
		_, err := e.Decider.abort(ctx, tx, r, rule, abort)
		return true, err
	}
	promoted, held := e.autoPromote(r, c, watch, t)
	if !changed && !promoted && !held {
		return false, nil
	}
	r.UpdatedTS = t
	if err := c.save(ctx, tx); err != nil {
		return false, err
	}
	if promoted {
		_, err := e.Advancer.advance(ctx, tx, r, t)
		return true, err
	}
	return true, nil
}

// autoPromote promotes the canaries of r whose gates, just evaluated
// (watch, by stage), all passed and have held auto_promote_after_s; it
// notes when they began to hold, and forgets it when one fails. It
// reports whether it promoted, and whether it changed when a canary's
// gates began to hold.
func (e *Engine) autoPromote(r *store.Run, c *runChange, watch map[string][]*coreJob, t time.Time) (bool, bool) {
	var promoted, values []string
	changed := false
	for i := range r.Stages {
		st := &r.Stages[i]
		js, ok := watch[st.Name]
		if !ok || st.AutoPromoteAfterS == 0 {
			continue
		}
		held := true
		for _, j := range js {
			held = held && j.pass
		}
		if !held {
			changed = changed || st.HeldSince != nil
			st.HeldSince = nil
			continue
		}
		if st.HeldSince == nil {
			st.HeldSince, changed = action.TimePtr(t), true
		}
		if t.Sub(*st.HeldSince) < time.Duration(st.AutoPromoteAfterS)*time.Second {
			continue
		}
		var seen []string
		for _, j := range js {
			seen = append(seen, fmt.Sprintf("%s on %s: %s", j.step, j.node, j.value))
		}
		slices.Sort(seen)
		why := fmt.Sprintf("promoted by the rule auto_promote_after_s: its gates held %ds (%s)", st.AutoPromoteAfterS,
			strings.Join(seen, ", "))
		st.Promoted, st.PromotedBy, st.HeldSince = true, why, nil
		promoted = append(promoted, st.Name)
		values = append(values, seen...)
	}
	if len(promoted) == 0 {
		return false, changed
	}
	why := r.Stages[stageIndex(r, promoted[0])].PromotedBy
	r.State, r.StateReason = store.RunRunning, why
	c.event(store.EventRunPromoted, actions.Actor{Name: ActorRule}, t,
		fmt.Sprintf("the rule auto_promote_after_s promoted the canary of stage(s) %s of run %s: %s",
			strings.Join(promoted, ", "), r.ID, why),
		map[string]any{"stages": promoted, "reason": why, "gates": values, "rule": "auto_promote_after_s"})
	return true, true
}

// watchKey names one attempt of a gate watched on a node of a run's
// canary; its cluster keeps the keys of a cluster apart.
type watchKey struct {
	cluster, run, stage, node, step string
	attempt                         int
}

// watchTimes holds when each watched gate was last evaluated by this
// core, which the run's row keeps only when the value seen changed: so a
// canary whose gates say the same writes nothing, and its checks still
// come every coreEvery. A core that did not evaluate it yet goes by the
// row's At.
type watchTimes struct {
	mu sync.Mutex
	at map[watchKey]time.Time
}

// note records that key was evaluated at t.
func (w *watchTimes) note(key watchKey, t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at == nil {
		w.at = map[watchKey]time.Time{}
	}
	w.at[key] = t
}

// last is when key was last evaluated here (nil: never).
func (w *watchTimes) last(key watchKey) *time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.at[key]; ok {
		return &t
	}
	return nil
}

// keep forgets the gates of cluster's runs other than active.
func (w *watchTimes) keep(cluster string, active map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.at {
		if k.cluster == cluster && !active[k.run] {
			delete(w.at, k)
		}
	}
}
