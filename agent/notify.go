package agent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/musterhq/muster/agent/queue"
	"github.com/musterhq/muster/agent/runner"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/startstop"
)

// NoteGap is the least time between two "changed" notes of one agent: a
// burst of state changes makes at most one note per gap, and the last change
// of a burst is always told (docs/architecture.md, "Node syncs and reactive
// progress").
const NoteGap = 200 * time.Millisecond

// teller sends a note to the members of a role: the gossip service.
type teller interface {
	Tell(role string, n gossip.Note) int
}

// notifier tells the cores, through the gossip pool, that this agent's
// actions changed state: a note naming the node, never action data. Changed
// never blocks; the notifier's goroutine, a shared/startstop part, sends at
// most one note per NoteGap.
type notifier struct {
	startstop.Base
	// to is the gossip service the notes go through, set before Start
	// (the notifier is made before the pool is joined).
	to   teller
	note gossip.Note
	gap  time.Duration
	log  *slog.Logger

	kick chan struct{}
}

var _ startstop.Service = (*notifier)(nil)

// newNotifier returns a notifier; it starts nothing.
func newNotifier(cluster, node string, gap time.Duration, log *slog.Logger) *notifier {
	return &notifier{note: gossip.Note{Changed: &gossip.NodeRef{Cluster: cluster, Node: node}}, gap: gap, log: log,
		kick: make(chan struct{}, 1)}
}

// Changed asks for a note; calls between two notes make one.
func (n *notifier) Changed() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// errNoTeller is Start's error when no gossip service was given.
var errNoTeller = errors.New("notifier: no gossip service to tell through")

// Start runs the sender, telling the cores through n.to, until Stop or the
// end of ctx. Changes made before Start are told once it runs. Stop
// (startstop.Base's) is idempotent and returns at once on a notifier never
// started.
func (n *notifier) Start(ctx context.Context) error {
	ctx, done, err := n.StartInit(ctx)
	if err != nil {
		return err
	}
	if n.to == nil {
		done()
		return errNoTeller
	}
	go func() {
		defer done()
		n.send(ctx)
	}()
	return nil
}

// send tells a note after each kick, at most one per gap, until ctx ends.
func (n *notifier) send(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		}
		if wait := n.gap - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		last = time.Now()
		if sent := n.to.Tell(gossip.RoleCore, n.note); sent == 0 {
			n.log.Debug("changed note reached no core")
		}
	}
}

// notifyingQueue is the runner's queue, calling changed after every commit
// that moved an action's state: a claim (NEW → RUNNING) and a final step.
type notifyingQueue struct {
	runner.Queue
	changed func()
}

func (q notifyingQueue) Claim(ctx context.Context, actor string) (*action.Action, bool, bool, error) {
	a, resumed, cancelReq, err := q.Queue.Claim(ctx, actor)
	if err == nil && a != nil && !resumed {
		q.changed()
	}
	return a, resumed, cancelReq, err
}

func (q notifyingQueue) SaveStep(ctx context.Context, id, actor string, s queue.Step) (*action.Action, error) {
	a, err := q.Queue.SaveStep(ctx, id, actor, s)
	if err == nil && s.State.Final() {
		q.changed()
	}
	return a, err
}

func (q notifyingQueue) Finish(ctx context.Context, id, actor string, s queue.Step) (*action.Action, bool, error) {
	next, cancelReq, err := q.Queue.Finish(ctx, id, actor, s)
	if err == nil {
		q.changed()
	}
	return next, cancelReq, err
}
