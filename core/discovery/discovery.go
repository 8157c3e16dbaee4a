// Package discovery tells the core which nodes exist: the static list of the
// core's configuration, and the gossip pool. Each source gives a snapshot of
// the nodes it knows; Sync writes the union into the store, adding new nodes
// as UNKNOWN and keeping what the orchestrator learnt about known ones
// (cursor, store id, status). The gossip pool also says when a node left,
// failed or is announced twice: Sync holds such a node DOWN until the pool
// sees it again.
package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"sort"

	"github.com/musterhq/muster/core/actions"
	corenodes "github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/labels"
)

// ClusterSpec is one entry of the core's `clusters:` configuration.
type ClusterSpec struct {
	ID    string     `mapstructure:"id" yaml:"id"`
	Nodes []NodeSpec `mapstructure:"nodes" yaml:"nodes"`
	// Labels are the cluster's labels: grants' label selectors match them
	// (docs/configuration.md, "Access").
	Labels map[string]string `mapstructure:"labels" yaml:"labels"`
	// Budget is the cluster's disruption budget (docs/architecture.md, "Labels,
	// targets and the disruption budget").
	Budget BudgetSpec `mapstructure:"budget" yaml:"budget"`
	// Windows and Freezes say when disruptive work may go to the cluster
	// (docs/architecture.md, "Windows, freezes and later starts").
	Windows []schedule.WindowSpec `mapstructure:"windows" yaml:"windows"`
	Freezes []schedule.FreezeSpec `mapstructure:"freezes" yaml:"freezes"`
	// Expect declares the nodes the cluster should have (docs/architecture.md,
	// "Declared membership"); nil: none declared.
	Expect *corenodes.Expect `mapstructure:"expect" yaml:"expect,omitempty"`
}

// BudgetSpec is a cluster's disruption budget as configured.
type BudgetSpec struct {
	// MaxUnavailable is a count ("1") or a percentage of the cluster's
	// nodes ("10%"); empty: no budget.
	MaxUnavailable string `mapstructure:"max_unavailable" yaml:"max_unavailable"`
}

// NodeSpec is one node of a ClusterSpec.
type NodeSpec struct {
	ID   string `mapstructure:"id" yaml:"id"`
	Addr string `mapstructure:"addr" yaml:"addr"`
	// Labels are the node's labels as the core's configuration gives them; the
	// agent's own labels win key by key (docs/architecture.md, "Labels, targets
	// and the disruption budget").
	Labels map[string]string `mapstructure:"labels" yaml:"labels"`
	// Enroll lets a join token of the cluster enroll this node's id (its
	// agent gets its certificate by enrollment). Without it, the id is
	// held: only an admin token asking to replace may enroll it
	// (docs/architecture.md, "Installing on a fleet").
	Enroll bool `mapstructure:"enroll" yaml:"enroll"`
}

// Node is a node as a source sees it.
type Node struct {
	ClusterID string
	ID        string
	Addr      string
	Source    string // store.SourceStatic or store.SourceGossip
	// Down is set by a source that knows the node is gone: its cause, one
	// of store.CauseLeft, store.CauseFailed, store.CauseDuplicate. Empty:
	// the source sees the node alive (the orchestrator finds out the rest).
	Down string
	// Detail completes Down in events (the two addresses of a duplicate).
	Detail string
	// Labels are the labels this source knows: the configuration's for the
	// static list, the agent's own for the gossip pool.
	Labels map[string]string
}

// Source is one way of discovering nodes.
type Source interface {
	// Name is the store.Node source this Source reports (store.SourceStatic, ...).
	// Sync removes the stored nodes of this source that the snapshot lacks.
	Name() string
	// Snapshot returns the nodes the source knows now.
	Snapshot() []Node
	// Changes receives a value (coalesced) whenever Snapshot would answer
	// differently. A nil channel means the source never changes.
	Changes() <-chan struct{}
}

// Claimant is implemented by a source that verifies who announces a node:
// Claims hands over, once each, the announcements it refused. Sync records
// each as a node.claim_refused event.
type Claimant interface {
	Claims() []Claim
}

// StaticSource is the fixed list of the configuration.
type StaticSource struct {
	clusters []string
	nodes    []Node
}

var _ Source = (*StaticSource)(nil)

// Static returns the source of the configured clusters. A cluster listed
// without nodes still exists.
func Static(clusters []ClusterSpec) *StaticSource {
	s := &StaticSource{}
	for _, c := range clusters {
		s.clusters = append(s.clusters, c.ID)
		for _, n := range c.Nodes {
			s.nodes = append(s.nodes, Node{ClusterID: c.ID, ID: n.ID, Addr: n.Addr, Source: store.SourceStatic,
				Labels: maps.Clone(n.Labels)})
		}
	}
	return s
}

// Partial is implemented by a source whose snapshot may lack nodes that
// exist: the gossip pool only knows the members it has heard from since the
// core started. Sync never deletes a node because a partial source lacks it.
type Partial interface {
	Partial() bool
}

// Name is store.SourceStatic.
func (s *StaticSource) Name() string { return store.SourceStatic }

// Snapshot returns the configured nodes.
func (s *StaticSource) Snapshot() []Node { return append([]Node(nil), s.nodes...) }

// Changes is nil: the configuration does not change while the core runs.
func (s *StaticSource) Changes() <-chan struct{} { return nil }

// Clusters lists the configured cluster ids, including clusters without nodes.
func (s *StaticSource) Clusters() []string { return append([]string(nil), s.clusters...) }

// Result says what a Sync changed.
type Result struct {
	Joined []Node // nodes added
	Left   []Node // nodes removed
	Moved  []Node // known nodes whose address or source changed
	Down   []Node // nodes a source now holds DOWN (left, failed, duplicate)
	Back   []Node // nodes held DOWN by a source that it sees alive again
	// Relabelled lists known nodes never contacted yet whose labels the
	// sources now give otherwise. Once the orchestrator has contacted a
	// node, it keeps its labels (from the agent's info) and discovery
	// leaves them alone.
	Relabelled []Node
	// Refused lists the claims of a node that failed verification (events
	// only: they change no node).
	Refused []Claim
}

// Clusters returns the ids of the clusters that gained, lost or changed a
// node, sorted: the clusters to nudge.
func (r Result) Clusters() []string {
	seen := map[string]bool{}
	for _, list := range [][]Node{r.Joined, r.Left, r.Moved, r.Down, r.Back} {
		for _, n := range list {
			seen[n.ClusterID] = true
		}
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Empty reports whether the Sync changed nothing.
func (r Result) Empty() bool {
	return len(r.Joined)+len(r.Left)+len(r.Moved)+len(r.Down)+len(r.Back)+len(r.Relabelled)+len(r.Refused) == 0
}

type key struct{ cluster, node string }

// Sync makes the store's nodes match the union of the sources, in one
// transaction, writing nothing when they already match. When two sources name
// the same node, the first one given wins. Clusters are created HEALTHY as
// needed (extra lists clusters to create even without nodes). A new node is
// UNKNOWN and gets a node.joined event; a stored node of one of these
// sources that no source reports any more is deleted (its actions stay) with
// a node.left event, unless its source is Partial. Nodes of other sources are
// left alone; known nodes keep their cursor, store id and status.
//
// A node a source reports Down becomes DOWN with that reason, with a
// node.left event (reason left) or node.down (failed, duplicate); a node
// held DOWN so that the source sees alive again becomes UNKNOWN with a
// node.joined event, for the orchestrator to contact.
func Sync(ctx context.Context, st store.Store, extra []string, sources ...Source) (Result, error) {
	want := map[key]Node{}
	var order []key
	owned := map[string]bool{}
	// A node's labels: the static list's, with the agent's own (from any
	// other source) laid over them.
	static, own := map[key]map[string]string{}, map[key]map[string]string{}
	for _, src := range sources {
		if p, ok := src.(Partial); !ok || !p.Partial() {
			owned[src.Name()] = true
		}
		for _, n := range src.Snapshot() {
			k := key{n.ClusterID, n.ID}
			if src.Name() == store.SourceStatic {
				static[k] = n.Labels
			} else if _, ok := own[k]; !ok && n.Labels != nil {
				own[k] = n.Labels
			}
			if _, ok := want[k]; ok {
				continue
			}
			if n.Source == "" {
				n.Source = src.Name()
			}
			want[k] = n
			order = append(order, k)
		}
	}
	for k, n := range want {
		n.Labels = nodeLabels(static[k], own[k])
		want[k] = n
	}
	var refused []Claim
	for _, src := range sources {
		if c, ok := src.(Claimant); ok {
			refused = append(refused, c.Claims()...)
		}
	}
	var res Result
	plan := func(ctx context.Context, r store.Reader) (clusters []string, err error) {
		res = Result{Refused: refused}
		have := map[string]bool{}
		cs, err := r.Clusters(ctx)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			have[c.ID] = true
		}
		nodes, err := r.Nodes(ctx, "")
		if err != nil {
			return nil, err
		}
		stored := map[key]store.Node{}
		for _, n := range nodes {
			k := key{n.ClusterID, n.ID}
			stored[k] = n
			if _, ok := want[k]; !ok && owned[n.Source] {
				res.Left = append(res.Left, Node{ClusterID: n.ClusterID, ID: n.ID, Addr: n.Addr, Source: n.Source})
			}
		}
		for _, k := range order {
			n := want[k]
			old, ok := stored[k]
			if !ok && !owned[n.Source] && (n.Down == store.CauseLeft || n.Down == store.CauseFailed || n.Down == store.CauseRevoked) {
				// A pool that only knows the node as gone (its member
				// failed or left) or revoked does not bring back a node
				// the store no longer holds: one forgotten, reaped or
				// replaced.
				continue
			}
			if ok {
				n.Labels = corenodes.Labels(nil, n.Labels, old.CoreLabels)
			}
			switch {
			case !ok:
				res.Joined = append(res.Joined, n)
			case old.Addr != n.Addr || old.Source != n.Source:
				res.Moved = append(res.Moved, n)
			}
			if ok && old.StoreID == "" && !labels.Equal(old.Labels, n.Labels) {
				res.Relabelled = append(res.Relabelled, n)
			}
			switch {
			case n.Down != "" && (!ok || old.Status != store.NodeDown || old.DownCause != n.Down):
				res.Down = append(res.Down, n)
			case n.Down == "" && ok && store.DownByDiscovery(&old):
				res.Back = append(res.Back, n)
			}
			if !have[n.ClusterID] {
				have[n.ClusterID] = true
				clusters = append(clusters, n.ClusterID)
			}
		}
		for _, c := range extra {
			if !have[c] {
				have[c] = true
				clusters = append(clusters, c)
			}
		}
		return clusters, nil
	}
	var newClusters []string
	err := st.Read(ctx, func(r store.Reader) error {
		var err error
		newClusters, err = plan(ctx, r)
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("discovery: %w", err)
	}
	if res.Empty() && len(newClusters) == 0 {
		return res, nil
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		newClusters, err := plan(ctx, tx)
		if err != nil {
			return err
		}
		for _, c := range newClusters {
			if err := tx.PutCluster(ctx, &store.Cluster{ID: c, Status: store.ClusterHealthy}); err != nil {
				return err
			}
		}
		for _, n := range res.Joined {
			// A node enrolled with a join token that carries labels: the
			// core holds them for it (its agent's announcement cannot
			// change them).
			held, err := corenodes.Joined(ctx, tx, n.ClusterID, n.ID)
			if err != nil {
				return err
			}
			err = corenodes.Save(ctx, tx, &store.Node{ClusterID: n.ClusterID, ID: n.ID, Addr: n.Addr,
				Source: n.Source, Status: store.NodeUnknown, Labels: corenodes.Labels(nil, n.Labels, held), CoreLabels: held})
			if err != nil {
				return err
			}
			if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventNodeJoined, Actor: actions.ActorCore,
				ClusterID: n.ClusterID, NodeID: n.ID,
				Message: fmt.Sprintf("node %s joined at %s (%s)", n.ID, n.Addr, n.Source)}); err != nil {
				return err
			}
		}
		for _, n := range res.Moved {
			if _, _, err := corenodes.Update(ctx, tx, n.ClusterID, n.ID, func(cur *store.Node) {
				cur.Addr, cur.Source = n.Addr, n.Source
			}); err != nil {
				return err
			}
		}
		for _, n := range res.Relabelled {
			if _, _, err := corenodes.Update(ctx, tx, n.ClusterID, n.ID, func(cur *store.Node) {
				cur.Labels = corenodes.Labels(nil, n.Labels, cur.CoreLabels)
			}); err != nil {
				return err
			}
		}
		for _, n := range res.Down {
			if err := markDown(ctx, tx, n); err != nil {
				return err
			}
		}
		for _, n := range res.Back {
			if _, _, err := corenodes.Update(ctx, tx, n.ClusterID, n.ID, func(cur *store.Node) {
				cur.Status, cur.StatusReason, cur.DownCause = store.NodeUnknown, "", ""
			}); err != nil {
				return err
			}
			if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventNodeJoined, Actor: actions.ActorCore,
				ClusterID: n.ClusterID, NodeID: n.ID,
				Message: fmt.Sprintf("node %s is back at %s (%s)", n.ID, n.Addr, n.Source)}); err != nil {
				return err
			}
		}
		for _, c := range res.Refused {
			if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventNodeClaimRefused, Actor: actions.ActorCore,
				ClusterID: c.ClusterID, NodeID: c.NodeID,
				Message: fmt.Sprintf("node %s: the claim of gossip member %s at %s was refused: %s", c.NodeID, c.Member, c.Addr, c.Reason),
				Data:    map[string]any{"addr": c.Addr, "member": c.Member, "reason": c.Reason}}); err != nil {
				return err
			}
		}
		for _, n := range res.Left {
			// Gone from its source (removed from the static list, say): like
			// a forgotten node, its open actions end, nothing waits for it.
			ended, err := corenodes.Remove(ctx, tx, n.ClusterID, n.ID, actions.Core)
			if err != nil {
				return err
			}
			if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventNodeLeft, Actor: actions.ActorCore,
				ClusterID: n.ClusterID, NodeID: n.ID,
				Message: fmt.Sprintf("node %s left (%s); %d open action(s) ended", n.ID, n.Source, ended),
				Data:    map[string]any{"actions_ended": ended}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("discovery: %w", err)
	}
	return res, nil
}

// markDown holds n DOWN for the reason its source gives, with its event.
func markDown(ctx context.Context, tx store.Tx, n Node) error {
	reason := store.CauseReason(n.Down)
	if _, _, err := corenodes.Update(ctx, tx, n.ClusterID, n.ID, func(cur *store.Node) {
		cur.Status, cur.StatusReason, cur.DownCause = store.NodeDown, reason, n.Down
	}); err != nil {
		return err
	}
	ev := &store.Event{Type: store.EventNodeDown, Actor: actions.ActorCore, ClusterID: n.ClusterID, NodeID: n.ID,
		Data: map[string]any{"reason": reason, "cause": n.Down, "source": n.Source}}
	switch n.Down {
	case store.CauseLeft:
		ev.Type, ev.Message = store.EventNodeLeft, fmt.Sprintf("node %s left (%s)", n.ID, n.Source)
	case store.CauseFailed:
		ev.Message = fmt.Sprintf("node %s failed: the %s pool lost it at %s", n.ID, n.Source, n.Addr)
	default:
		ev.Message = fmt.Sprintf("node %s is down: %s", n.ID, reason)
	}
	if n.Detail != "" {
		ev.Message += ": " + n.Detail
		ev.Data["detail"] = n.Detail
	}
	return tx.AppendEvent(ctx, ev)
}

// Watch syncs whenever one of the sources reports a change, and calls nudge
// for every cluster a sync changed. It blocks until ctx ends and returns nil
// then. A failed sync is logged and retried at the next change.
func Watch(ctx context.Context, st store.Store, log *slog.Logger, nudge func(clusterID string), extra []string, sources ...Source) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}}
	for _, src := range sources {
		if ch := src.Changes(); ch != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
	}
	for {
		chosen, _, ok := reflect.Select(cases)
		if chosen == 0 {
			return nil
		}
		if !ok { // a closed source reports nothing more
			cases = append(cases[:chosen], cases[chosen+1:]...)
			continue
		}
		res, err := Sync(ctx, st, extra, sources...)
		if err != nil {
			log.Warn("node discovery sync failed", "err", err)
			continue
		}
		for _, c := range res.Clusters() {
			nudge(c)
		}
	}
}

// nodeLabels lays the agent's own labels over the static ones, key by key;
// nil when there are none (the labels the core holds for a stored node go
// over both: corenodes.Labels).
func nodeLabels(static, own map[string]string) map[string]string {
	return corenodes.Labels(static, own, nil)
}

// StaticLabels returns the configured labels of every node, by cluster and
// node id (for the orchestrator, which lays the agent's labels over them).
func StaticLabels(clusters []ClusterSpec) map[string]map[string]map[string]string {
	out := map[string]map[string]map[string]string{}
	for _, c := range clusters {
		for _, n := range c.Nodes {
			if len(n.Labels) == 0 {
				continue
			}
			if out[c.ID] == nil {
				out[c.ID] = map[string]map[string]string{}
			}
			out[c.ID][n.ID] = maps.Clone(n.Labels)
		}
	}
	return out
}
