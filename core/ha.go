package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/core/lease"
	"github.com/musterhq/muster/core/orchestrate"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/postgres"
	"github.com/musterhq/muster/shared/version"
	"github.com/musterhq/muster/shared/wire"
)

// replication is what several replicas on one PostgreSQL database add to a core
// (docs/architecture.md, "Several core replicas"): the cluster leases, nudges
// that reach the replica holding a cluster's lease, and the list of replicas.
// On SQLite there is one core: no leases, and nudges stay local.
type replication struct {
	self   store.Replica
	ttl    time.Duration
	pg     *postgres.Store // nil on SQLite
	leases *lease.Manager  // nil on SQLite
	log    *slog.Logger
	local  func(clusterID string)
	// localNode asks this replica's orchestrator for a sync of one node.
	localNode func(clusterID, nodeID string)
	publish   chan string
	// onOutbox is called when this replica takes the outbox's lease.
	onOutbox func()

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// replicaID returns the configured ha.replica_id, or the host name with a
// random suffix (a restarted replica is a new one: it takes leases anew).
func replicaID(configured string) string {
	if configured != "" {
		return configured
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "core"
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

func newReplication(cfg Config, st store.Store, addr string, log *slog.Logger, reg prometheus.Registerer) (*replication, error) {
	r := &replication{
		self: store.Replica{ID: replicaID(cfg.HA.ReplicaID), Addr: addr, Version: version.Version, StartedTS: time.Now().UTC()},
		ttl:  cfg.HA.LeaseTTL, log: log, publish: make(chan string, 64),
	}
	pg, ok := st.(*postgres.Store)
	if !ok {
		return r, nil
	}
	r.pg = pg
	m, err := lease.New(lease.Config{TTL: r.ttl, Replica: r.self, OnAcquire: r.nudgeLocal}, pg, log, reg)
	if err != nil {
		return nil, err
	}
	r.leases = m
	return r, nil
}

// orchestrateLeases is what the orchestrator asks before each pass: nil on
// SQLite (every cluster is this core's).
func (r *replication) orchestrateLeases() orchestrate.Leases {
	if r.leases == nil {
		return nil
	}
	return r.leases
}

func (r *replication) nudgeLocal(clusterID string) {
	if clusterID == store.OutboxLease {
		if r.onOutbox != nil {
			r.onOutbox()
		}
		return
	}
	if r.local != nil {
		r.local(clusterID)
	}
}

// outboxLease is the notify worker's Lease: nil on SQLite (one core
// delivers), else the outbox's lease, whose context carries its fence.
func (r *replication) outboxLease(onAcquire func()) func(ctx context.Context) (context.Context, context.CancelFunc, bool) {
	if r.leases == nil {
		return nil
	}
	r.onOutbox = onAcquire
	return func(ctx context.Context) (context.Context, context.CancelFunc, bool) {
		return r.leases.PassContext(ctx, store.OutboxLease)
	}
}

// Nudge asks for a pass of the cluster now: here, and through the database
// on the replica that holds its lease. It never blocks.
func (r *replication) Nudge(clusterID string) {
	r.nudgeLocal(clusterID)
	if r.pg == nil {
		return
	}
	select {
	case r.publish <- clusterID:
	default: // a nudge is a hint; the interval brings the pass anyway
	}
}

// NudgeNode asks for a sync of one node now (docs/architecture.md, "Node syncs
// and reactive progress"). The sync runs where the cluster's lease is: here
// when this replica holds it; with several replicas, the holder gets a nudge of
// the whole cluster through the database, since nudges between replicas name
// clusters. It never blocks.
func (r *replication) NudgeNode(clusterID, nodeID string) {
	if r.localNode != nil {
		r.localNode(clusterID, nodeID)
	}
	if r.pg == nil {
		return
	}
	select {
	case r.publish <- clusterID:
	default: // a nudge is a hint; the interval brings the pass anyway
	}
}

// Start takes the first leases and relays nudges between replicas until
// Stop; local receives the nudges meant for this replica's orchestrator, and
// localNode its syncs of single nodes.
func (r *replication) Start(ctx context.Context, local func(clusterID string), localNode func(clusterID, nodeID string)) error {
	r.local, r.localNode = local, localNode
	if r.pg == nil {
		return nil
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-r.publish:
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				if err := r.pg.PublishNudge(pctx, c); err != nil && ctx.Err() == nil {
					r.log.Debug("nudge not published", "cluster", c, "err", err)
				}
				cancel()
			case c := <-r.pg.Nudges():
				local(c)
			}
		}
	}()
	return r.leases.Start(ctx)
}

// Stop gives up this replica's leases (cancelling its passes) and stops
// relaying nudges. It is idempotent.
func (r *replication) Stop() {
	if r.cancel == nil {
		return
	}
	r.leases.Stop()
	r.cancel()
	r.wg.Wait()
}

// Replicas answers GET /api/v1/core/replicas.
func (r *replication) Replicas(ctx context.Context) (*wire.CoreReplicas, error) {
	if r.pg == nil {
		return &wire.CoreReplicas{Store: DriverSQLite, Self: r.self.ID, Replicas: []wire.CoreReplica{{
			ID: r.self.ID, Addr: r.self.Addr, Version: r.self.Version, StartedTS: r.self.StartedTS,
			HeartbeatTS: time.Now().UTC(), Live: true, Leases: []wire.ClusterLease{},
		}}}, nil
	}
	reps, ls, err := r.pg.LeaseStatus(ctx, r.ttl)
	if err != nil {
		return nil, fmt.Errorf("replicas: %w", err)
	}
	out := &wire.CoreReplicas{Store: DriverPostgres, Self: r.self.ID, LeaseTTLS: r.ttl.Seconds(), Replicas: []wire.CoreReplica{}}
	for _, rep := range reps {
		cr := wire.CoreReplica{ID: rep.ID, Addr: rep.Addr, Version: rep.Version, StartedTS: rep.StartedTS,
			HeartbeatTS: rep.HeartbeatTS, Live: rep.Live, Leases: []wire.ClusterLease{}}
		for _, l := range ls {
			if l.Holder == rep.ID && l.Valid {
				cr.Leases = append(cr.Leases, wire.ClusterLease{ClusterID: l.ClusterID, Epoch: l.Epoch, ExpiresTS: l.ExpiresTS})
			}
		}
		out.Replicas = append(out.Replicas, cr)
	}
	return out, nil
}
