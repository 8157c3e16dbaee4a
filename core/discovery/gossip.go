package discovery

import (
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/names"
)

// GossipSource is the gossip pool's view of the nodes: its Handle method is
// the gossip service's handler, and it reports every agent it has heard of
// since the core started, alive or gone.
type GossipSource struct {
	log *slog.Logger
	ch  chan struct{}

	mu      sync.Mutex
	seq     int
	members map[string]member // by member name
}

// member is one agent process in the pool.
type member struct {
	meta  gossip.Meta
	addr  string // gossip address
	gone  string // "" alive, or store.ReasonLeft / store.ReasonFailed
	order int    // when it was last seen joining: the earlier claim wins a duplicate
}

var (
	_ Source  = (*GossipSource)(nil)
	_ Partial = (*GossipSource)(nil)
)

// NewGossipSource returns an empty source.
func NewGossipSource(log *slog.Logger) *GossipSource {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &GossipSource{log: log, ch: make(chan struct{}, 1), members: map[string]member{}}
}

// Name is store.SourceGossip.
func (g *GossipSource) Name() string { return store.SourceGossip }

// Partial is true: the pool only knows who it has heard from.
func (g *GossipSource) Partial() bool { return true }

// Changes receives a value after every event that may change the snapshot.
func (g *GossipSource) Changes() <-chan struct{} { return g.ch }

// Handle records one membership event. Members other than agents, and
// agents whose cluster or node id is not a valid name, are ignored.
func (g *GossipSource) Handle(ev gossip.Event) {
	m := ev.Meta
	if m.Role != gossip.RoleAgent {
		return
	}
	if names.CheckID(m.Cluster) != nil || names.CheckID(m.Node) != nil || m.API == "" {
		g.log.Warn("gossip: agent with an invalid announcement ignored", "member", ev.Name, "addr", ev.Addr,
			"cluster", m.Cluster, "node", m.Node, "api", m.API)
		return
	}
	g.mu.Lock()
	cur, known := g.members[ev.Name]
	switch ev.Kind {
	case gossip.KindJoin, gossip.KindUpdate:
		if !known || cur.gone != "" || ev.Kind == gossip.KindJoin {
			g.seq++
			cur.order = g.seq
		}
		cur.meta, cur.addr, cur.gone = m, ev.Addr, ""
		// Forget gone members that announced the same node under another
		// name: this one replaces them.
		for name, o := range g.members {
			if name != ev.Name && o.gone != "" && o.meta.Cluster == m.Cluster && o.meta.Node == m.Node {
				delete(g.members, name)
			}
		}
	case gossip.KindLeave, gossip.KindFail:
		if !known {
			g.mu.Unlock()
			return
		}
		cur.gone = store.ReasonFailed
		if ev.Kind == gossip.KindLeave {
			cur.gone = store.ReasonLeft
		}
	default:
		g.mu.Unlock()
		return
	}
	g.members[ev.Name] = cur
	g.mu.Unlock()
	select {
	case g.ch <- struct{}{}:
	default:
	}
}

// Snapshot returns one Node per announced (cluster, node): alive at the
// address it announced; DOWN with the reason it went when no member
// announcing it is alive; DOWN as a duplicate when two live members announce
// it at different addresses (the address stays the one announced first).
func (g *GossipSource) Snapshot() []Node {
	g.mu.Lock()
	byNode := map[key][]member{}
	for _, m := range g.members {
		k := key{m.meta.Cluster, m.meta.Node}
		byNode[k] = append(byNode[k], m)
	}
	g.mu.Unlock()
	out := make([]Node, 0, len(byNode))
	for k, ms := range byNode {
		sort.Slice(ms, func(i, j int) bool { return ms[i].order < ms[j].order })
		var alive []member
		for _, m := range ms {
			if m.gone == "" {
				alive = append(alive, m)
			}
		}
		n := Node{ClusterID: k.cluster, ID: k.node, Source: store.SourceGossip}
		switch {
		case len(alive) == 0:
			last := ms[len(ms)-1]
			n.Addr, n.Down = last.meta.API, last.gone
		default:
			n.Addr = alive[0].meta.API
			addrs := []string{alive[0].meta.API}
			for _, m := range alive[1:] {
				if m.meta.API != alive[0].meta.API {
					addrs = append(addrs, m.meta.API)
				}
			}
			if len(addrs) > 1 {
				n.Down = store.ReasonDuplicate
				n.Detail = strings.Join(addrs, " and ")
			}
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ClusterID != out[j].ClusterID {
			return out[i].ClusterID < out[j].ClusterID
		}
		return out[i].ID < out[j].ID
	})
	return out
}
