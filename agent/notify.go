package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/musterhq/muster/agent/queue"
	"github.com/musterhq/muster/agent/runner"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/gossip"
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
// never blocks; a goroutine owned by Start/Stop sends, at most one note per
// NoteGap.
type notifier struct {
	to   teller
	note gossip.Note
	gap  time.Duration
	log  *slog.Logger

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newNotifier(cluster, node string, gap time.Duration, log *slog.Logger) *notifier {
	return &notifier{note: gossip.Note{Changed: &gossip.NodeRef{Cluster: cluster, Node: node}}, gap: gap, log: log,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// Changed asks for a note; calls between two notes make one.
func (n *notifier) Changed() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// Start runs the sender, telling the cores through to, until Stop or the
// end of ctx. Changes made before Start are told once it runs.
func (n *notifier) Start(ctx context.Context, to teller) error {
	n.to = to
	go func() {
		defer close(n.done)
		var last time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case <-n.stop:
				return
			case <-n.kick:
			}
			if wait := n.gap - time.Since(last); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-n.stop:
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
	}()
	return nil
}

// Stop ends the sender and waits for it; it is idempotent. Start must have
// been called.
func (n *notifier) Stop() {
	n.once.Do(func() { close(n.stop) })
	<-n.done
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
