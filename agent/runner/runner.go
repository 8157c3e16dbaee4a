// Package runner is the agent's sequential executor: it takes the oldest NEW
// action from the queue, runs it step by step through its handler, commits
// after every step, and only then takes the next one. It is a service with
// Start and Stop (shared/startstop); stopping lets the step in progress
// finish and commit.
package runner

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/musterhq/muster/agent/exposition"
	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/agent/queue"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/testsignal"
)

// Queue is what the runner needs of the queue.
type Queue interface {
	Claim(ctx context.Context, actor string) (a *action.Action, resumed, cancelRequested bool, err error)
	SaveStep(ctx context.Context, id, actor string, s queue.Step) (*action.Action, error)
	Finish(ctx context.Context, id, actor string, s queue.Step) (next *action.Action, cancelRequested bool, err error)
}

var _ Queue = (*queue.Queue)(nil)

// Causes of an action's context ending.
var (
	errCancelled = errors.New("cancelled")
	errTimeout   = errors.New("timeout")
)

// Config configures a Runner.
type Config struct {
	Queue    Queue
	Handlers *handlers.Registry
	// Actor names the runner in history rows (the node id).
	Actor string
	// DefaultTimeout applies when an action has no timeout_s and its kind none.
	DefaultTimeout time.Duration
	// Idle is how often an idle runner looks at the queue without a Wake (default 1s).
	Idle    time.Duration
	Log     *slog.Logger
	Metrics *Metrics
	// OutputEvery is the least time between two commits of a RUNNING
	// action that change only its output (default 1s): the output tail is
	// in the record as it grows, at a bounded cost.
	OutputEvery time.Duration
	// OnOutput, when set, is called after a commit that changed a RUNNING
	// action's output (the agent sends a change note).
	OnOutput func()
}

// DefaultOutputEvery is Config.OutputEvery's default.
const DefaultOutputEvery = time.Second

// Runner executes actions one at a time.
type Runner struct {
	cfg  Config
	wake chan struct{}

	mu        sync.Mutex
	current   string
	cancelRun context.CancelCauseFunc
	cancelled map[string]bool // cancel requests that arrived before the run began

	startstop.Base
	stopped <-chan struct{} // the service's context's Done, set by Start

	// TestSignals lets a test wait for the runner to reach a point; they do
	// nothing unless a test calls Init.
	TestSignals TestSignals
}

// TestSignals are the points a test can wait for.
type TestSignals struct {
	// Claimed carries the id of every action the runner starts or resumes
	// (it is RUNNING in the queue).
	Claimed testsignal.Signal[string]
	// Committed carries every step the runner committed, final or not.
	Committed testsignal.Signal[Committed]
}

// Committed is one step the runner committed.
type Committed struct {
	ID       string
	State    action.State
	Progress []byte
}

// Init readies every signal for the test tb.
func (ts *TestSignals) Init(tb testsignal.TB) {
	ts.Claimed.Init(tb)
	ts.Committed.Init(tb)
}

// New returns a runner; it starts nothing.
func New(cfg Config) *Runner {
	if cfg.Idle <= 0 {
		cfg.Idle = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = time.Hour
	}
	if cfg.OutputEvery <= 0 {
		cfg.OutputEvery = DefaultOutputEvery
	}
	return &Runner{
		cfg:       cfg,
		wake:      make(chan struct{}, 1),
		cancelled: map[string]bool{},
	}
}

// Start starts the loop; it runs until ctx ends or Stop is called, and
// either lets the step in progress finish and commit first (the action stays
// RUNNING and is resumed by the next start). Stop is the one of
// startstop.Base: idempotent, and it returns once the loop has ended.
func (r *Runner) Start(ctx context.Context) error {
	ctx, done, err := r.StartInit(ctx)
	if err != nil {
		return err
	}
	r.stopped = ctx.Done()
	go func() {
		defer done()
		r.loop()
	}()
	return nil
}

// Wake tells the runner that the queue changed.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Cancel asks the runner to cancel the action id if it runs it now or is
// about to. The queue has already recorded the request.
func (r *Runner) Cancel(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current == id && r.cancelRun != nil {
		r.cancelRun(errCancelled)
		return
	}
	r.cancelled[id] = true
}

func (r *Runner) loop() {
	backoff := r.cfg.Idle
	var next *action.Action // claimed by the transaction that finished the last one
	var nextCancel bool
	for {
		select {
		case <-r.stopped:
			return
		default:
		}
		a, resumed, cancelReq, err := next, false, nextCancel, error(nil)
		next = nil
		if a == nil {
			a, resumed, cancelReq, err = r.cfg.Queue.Claim(context.Background(), r.cfg.Actor)
		}
		if err != nil {
			r.cfg.Log.Error("claim the next action", "err", err)
			if !r.wait(backoff) {
				return
			}
			continue
		}
		if a == nil {
			if !r.wait(r.cfg.Idle) {
				return
			}
			continue
		}
		var ok bool
		if next, nextCancel, ok = r.run(a, resumed, cancelReq); !ok {
			return
		}
	}
}

// wait waits for d, a wake-up or stop; it returns false on stop.
func (r *Runner) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.stopped:
		return false
	case <-r.wake:
		return true
	case <-t.C:
		return true
	}
}

// run runs one action to its end and returns the next action, claimed in the
// transaction that finished this one (nil when the queue was empty). It
// returns ok false when the runner was stopped in between two steps (the
// action stays RUNNING).
func (r *Runner) run(a *action.Action, resumed, cancelReq bool) (next *action.Action, nextCancel, ok bool) {
	log := r.cfg.Log.With("action", a.ID, "kind", a.Kind)
	r.TestSignals.Claimed.Send(a.ID)
	if resumed {
		log.Info("resuming action after restart")
	}
	h, ok := r.cfg.Handlers.Get(a.Kind)
	if !ok {
		_, err := r.save(a.ID, queue.Step{State: action.Failed, Reason: "unknown kind " + a.Kind, Progress: a.Progress, Output: a.Output})
		return nil, false, err == nil
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	timeout := time.Duration(a.TimeoutS) * time.Second
	if timeout <= 0 {
		timeout = r.cfg.Handlers.Timeout(a.Kind)
	}
	if timeout <= 0 {
		timeout = r.cfg.DefaultTimeout
	}
	started := time.Now()
	if a.StartedTS != nil {
		started = *a.StartedTS
	}
	deadline := started.Add(timeout)
	if !time.Now().Before(deadline) {
		cancel(errTimeout) // resumed past its deadline: no step may succeed
	}
	timer := time.AfterFunc(time.Until(deadline), func() { cancel(errTimeout) })
	defer timer.Stop()

	r.mu.Lock()
	r.current, r.cancelRun = a.ID, cancel
	if cancelReq || r.cancelled[a.ID] {
		cancel(errCancelled)
	}
	// Requests for other ids are in the queue too (the API records them
	// before calling Cancel), and Claim reads them: the map only bridges the
	// moment between a claim and this point, so it can be emptied.
	clear(r.cancelled)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.current, r.cancelRun = "", nil
		r.mu.Unlock()
	}()

	x := handlers.NewExec(a, resumed)
	// What the queue holds of the running action: a step that changes only
	// the output is committed once OutputEvery has passed since the last
	// output commit; until then the output is pending, and committed when
	// that time comes even if the handler's next step is later.
	savedProgress, savedOutput := string(a.Progress), a.Output
	var outputAt time.Time
	saveRunning := func() bool {
		step := queue.Step{State: action.Running, Progress: x.Progress, Output: x.LiveOutput()}
		if _, err := r.save(a.ID, step); err != nil {
			return false
		}
		if step.Output != savedOutput {
			outputAt = time.Now()
			if r.cfg.OnOutput != nil {
				r.cfg.OnOutput()
			}
		}
		savedProgress, savedOutput = string(step.Progress), step.Output
		return true
	}
	for {
		t0 := time.Now()
		res := h.Step(ctx, x)
		r.cfg.Metrics.observeStep(a.Kind, time.Since(t0))

		step := queue.Step{Progress: x.Progress, Output: x.LiveOutput()}
		step.State, step.Reason = finalState(res, context.Cause(ctx))
		if step.State.Final() {
			step.Output = x.Output()
			step.Outputs = x.Outputs
			next, nextCancel, err := r.finish(a.ID, step)
			if err != nil {
				return nil, false, false // stopped while the store refused the write
			}
			log.Info("action finished", "state", step.State, "reason", step.Reason)
			r.cfg.Metrics.finished(a.Kind, step.State)
			return next, nextCancel, true
		}
		onlyOutput := string(step.Progress) == savedProgress && step.Output != savedOutput
		if !onlyOutput || time.Since(outputAt) >= r.cfg.OutputEvery {
			if !saveRunning() {
				return nil, false, false // stopped while the store refused the write; resumed on restart
			}
		}
		// Between steps: the next step is due, or the action was cancelled or
		// timed out (step at once so the handler can stop), or the agent
		// stops; a pending output is committed when its time comes.
		wait := time.NewTimer(max(res.After, 0))
		var ctxDone <-chan struct{}
		if ctx.Err() == nil {
			ctxDone = ctx.Done()
		}
		for waiting := true; waiting; {
			var flush <-chan time.Time
			var ft *time.Timer
			if x.LiveOutput() != savedOutput {
				ft = time.NewTimer(time.Until(outputAt.Add(r.cfg.OutputEvery)))
				flush = ft.C
			}
			select {
			case <-wait.C:
				waiting = false
			case <-flush:
				ft = nil
				if !saveRunning() {
					wait.Stop()
					return nil, false, false
				}
			case <-ctxDone:
				wait.Stop()
				waiting = false
			case <-r.stopped:
				wait.Stop()
				log.Info("agent stopping; action stays RUNNING and resumes at next start")
				return nil, false, false
			}
			if ft != nil {
				ft.Stop()
			}
		}
	}
}

// finalState is the state a step's result puts the action in, with its
// reason. Work that ended by itself is judged by how it ended, even when the
// runner sees it only after a cancel or the deadline (an agent frozen while
// its command exited): only work stopped by them (handlers.Stopped) takes
// their reason.
func finalState(res handlers.Result, cause error) (action.State, string) {
	switch res.Status {
	case handlers.Running:
		return action.Running, ""
	case handlers.Done:
		return action.Done, ""
	case handlers.Failed:
		return action.Failed, res.Message
	}
	switch cause {
	case errCancelled:
		return action.Cancelled, action.ReasonCancelled
	case errTimeout:
		return action.Failed, action.ReasonTimeout
	}
	return action.Failed, "stopped"
}

// save commits a step, retrying while the store fails (a full disk, a locked
// file) until it succeeds or the runner stops.
func (r *Runner) save(id string, s queue.Step) (*action.Action, error) {
	var rec *action.Action
	err := r.retry(id, func() (err error) {
		rec, err = r.cfg.Queue.SaveStep(context.Background(), id, r.cfg.Actor, s)
		return err
	})
	if err == nil {
		r.TestSignals.Committed.Send(Committed{ID: id, State: s.State, Progress: s.Progress})
	}
	return rec, err
}

// finish commits the final step and claims the next action, with save's
// retries. Once Stop was called it claims nothing: an action claimed now
// would only start at the next start, its timeout already counting.
func (r *Runner) finish(id string, s queue.Step) (next *action.Action, cancelReq bool, err error) {
	err = r.retry(id, func() (err error) {
		if r.stopping() {
			_, err = r.cfg.Queue.SaveStep(context.Background(), id, r.cfg.Actor, s)
			return err
		}
		next, cancelReq, err = r.cfg.Queue.Finish(context.Background(), id, r.cfg.Actor, s)
		return err
	})
	if err == nil {
		r.TestSignals.Committed.Send(Committed{ID: id, State: s.State, Progress: s.Progress})
	}
	return next, cancelReq, err
}

func (r *Runner) stopping() bool {
	select {
	case <-r.stopped:
		return true
	default:
		return false
	}
}

func (r *Runner) retry(id string, write func() error) error {
	backoff := 100 * time.Millisecond
	for {
		err := write()
		if err == nil {
			return nil
		}
		if errors.Is(err, action.ErrTransition) || errors.Is(err, queue.ErrNotFound) {
			r.cfg.Log.Error("step refused by the queue", "action", id, "err", err)
			return nil
		}
		r.cfg.Log.Error("save step; retrying", "action", id, "err", err)
		select {
		case <-r.stopped:
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// Metrics are the runner's Prometheus metrics.
type Metrics struct {
	steps, finishes *exposition.Family
}

// stepBuckets are the upper bounds of muster_agent_step_duration_seconds:
// 100 µs to 26 s, each four times the last.
var stepBuckets = metrics.ExponentialBuckets(0.0001, 4, 10)

// NewMetrics registers the runner's metrics on reg.
func NewMetrics(reg *exposition.Registry) *Metrics {
	return &Metrics{
		steps: reg.Family("muster_agent_step_duration_seconds", exposition.Histogram,
			"Time a handler took for one step."),
		finishes: reg.Family("muster_agent_actions_finished_total", exposition.Counter,
			"Actions that reached a final state, by kind and state."),
	}
}

func (m *Metrics) observeStep(kind string, d time.Duration) {
	if m != nil {
		m.steps.Histogram(stepBuckets, "kind", kind).Update(d.Seconds())
	}
}

func (m *Metrics) finished(kind string, st action.State) {
	if m != nil {
		m.finishes.Counter("kind", kind, "state", string(st)).Inc()
	}
}
