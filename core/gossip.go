package core

import (
	"fmt"
	"log/slog"

	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/shared/gossip"
)

// newGossip builds the core's member of the gossip pool, which feeds src;
// an agent's "changed" note calls changed with its cluster and node. It is
// nil when gossip is disabled.
func newGossip(c GossipConfig, api string, src *discovery.GossipSource, changed func(cluster, node string), log *slog.Logger) (*gossip.Service, error) {
	if !c.Enabled {
		return nil, nil
	}
	var key []byte
	if c.KeyFile != "" {
		var err error
		if key, err = gossip.ReadKeyFile(c.KeyFile); err != nil {
			return nil, fmt.Errorf("gossip.key_file: %w", err)
		}
	}
	return gossip.New(gossip.Config{
		Name:     "core@" + api,
		BindAddr: c.BindAddr,
		Join:     c.Join,
		Key:      key,
		Insecure: c.Insecure && len(key) == 0,
		Meta:     gossip.Meta{Role: gossip.RoleCore, API: api},
		Timing:   c.Timing,
		Handler: func(ev gossip.Event) {
			if ev.Kind == gossip.KindChanged {
				changed(ev.Meta.Cluster, ev.Meta.Node)
				return
			}
			src.Handle(ev)
		},
		Log: log,
	})
}
