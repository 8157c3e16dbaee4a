package agent

import (
	"fmt"
	"log/slog"

	"github.com/musterhq/muster/shared/gossip"
)

// newGossip builds the agent's member of the gossip pool: it announces the
// node, its cluster and the API address api, and looks for a core. It is
// nil when gossip is disabled.
func newGossip(c Config, api string, log *slog.Logger) (*gossip.Service, error) {
	g := c.Gossip
	if !g.Enabled {
		return nil, nil
	}
	if g.AdvertiseAPI != "" {
		api = g.AdvertiseAPI
	}
	var key []byte
	if g.KeyFile != "" {
		var err error
		if key, err = gossip.ReadKeyFile(g.KeyFile); err != nil {
			return nil, fmt.Errorf("gossip.key_file: %w", err)
		}
	}
	return gossip.New(gossip.Config{
		// Unique while the node is: a second process announcing the same
		// node from elsewhere is a second member, which the core reports.
		Name:     c.ClusterID + "/" + c.NodeID + "@" + api,
		BindAddr: g.BindAddr,
		Join:     g.Join,
		Key:      key,
		Insecure: g.Insecure && len(key) == 0,
		Meta:     gossipMeta(c, api),
		Timing:   g.Timing,
		Seek:     gossip.RoleCore,
		Log:      log,
	})
}

// gossipMeta is what the agent announces: its cluster, node id, API address
// and labels.
func gossipMeta(c Config, api string) gossip.Meta {
	return gossip.Meta{Role: gossip.RoleAgent, Cluster: c.ClusterID, Node: c.NodeID, API: api, Labels: c.Labels}
}
