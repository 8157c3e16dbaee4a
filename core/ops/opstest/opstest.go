// Package opstest helps the tests of the operations layer and of the
// transports that call it (docs/architecture.md, "The operations layer").
package opstest

import "sync"

// Syncs is an ops.Nudger that remembers every sync asked for: a cluster's
// full sync by the cluster's id, a node's sync as "node:CLUSTER/NODE", so
// that a test tells the two apart. It is safe for concurrent use.
type Syncs struct {
	mu  sync.Mutex
	ids []string
}

// Nudge remembers a full sync of cluster id.
func (s *Syncs) Nudge(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, id)
}

// NudgeNode remembers a sync of one node.
func (s *Syncs) NudgeNode(cluster, node string) { s.Nudge(Node(cluster, node)) }

// Node is how Syncs names the sync of node of cluster.
func Node(cluster, node string) string { return "node:" + cluster + "/" + node }

// List returns the syncs asked for so far, oldest first.
func (s *Syncs) List() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// Take returns the syncs asked for so far and forgets them.
func (s *Syncs) Take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.ids
	s.ids = nil
	return out
}

// Count returns how many times id (a cluster, or a Node) was asked for.
func (s *Syncs) Count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, x := range s.ids {
		if x == id {
			n++
		}
	}
	return n
}
