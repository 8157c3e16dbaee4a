package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/core/lease"
	"github.com/musterhq/muster/core/orchestrate"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/postgres"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/version"
	"github.com/musterhq/muster/shared/wire"
)

// coordination is what several replicas on one database need of the store
// beside store.Store (docs/architecture.md, "Several core replicas"): the
// cluster leases, nudges between replicas, and the replicas' status.
// core/store/postgres provides it; on SQLite there is none.
type coordination interface {
	// Start listens for the other replicas' commits and nudges until Stop.
	startstop.Service
	lease.Store
	// PublishNudge asks every replica for a sync of the cluster now.
	PublishNudge(ctx context.Context, clusterID string) error
	// Nudges receives the clusters nudged by PublishNudge on any replica.
	Nudges() <-chan string
	// LeaseStatus returns the replicas (live: a heartbeat younger than ttl)
	// and the leases.
	LeaseStatus(ctx context.Context, ttl time.Duration) ([]store.Replica, []store.Lease, error)
}

var _ coordination = (*postgres.Store)(nil)

// replication is what several replicas on one PostgreSQL database add to a core
// (docs/architecture.md, "Several core replicas"): the cluster leases, nudges
// that reach the replica holding a cluster's lease, and the list of replicas.
// On SQLite there is one core: no leases, and nudges stay local.
//
// It is a startstop part: newReplication starts nothing; Start takes the
// first leases and relays nudges between replicas until Stop.
type replication struct {
	startstop.Base
	// drift is where this replica's configuration and the store's policy
	// disagree (nil: nothing to say).
	drift  func() []string
	self   store.Replica
	ttl    time.Duration
	coord  coordination   // nil on SQLite
	leases *lease.Manager // nil on SQLite
	log    *slog.Logger
	// local receives the nudges meant for this replica's orchestrator, and
	// localNode its syncs of single nodes (deliver sets them).
	local     func(clusterID string)
	localNode func(clusterID, nodeID string)
	publish   chan string
	// st, when set, takes the replica membership events; members is the
	// live set the last lease round saw (nil before the first).
	st      store.Store
	members []string
	// onOutbox is called when this replica takes the outbox's lease.
	onOutbox func()
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

// newReplication builds the replication of a core whose store coordinates
// replicas through coord (nil on SQLite). It starts nothing.
func newReplication(cfg Config, coord coordination, addr string, log *slog.Logger, reg prometheus.Registerer) (*replication, error) {
	r := &replication{
		self: store.Replica{ID: replicaID(cfg.HA.ReplicaID), Addr: addr, Version: version.Version, StartedTS: time.Now().UTC()},
		ttl:  cfg.HA.LeaseTTL, log: log, publish: make(chan string, 64),
	}
	if coord == nil {
		return r, nil
	}
	r.coord = coord
	m, err := lease.New(lease.Config{TTL: r.ttl, Replica: r.self, OnAcquire: r.nudgeLocal, OnView: r.membership}, coord, log, reg)
	if err != nil {
		return nil, err
	}
	r.leases = m
	return r, nil
}

// orchestrateLeases is what the orchestrator asks before each sync: nil on
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

// Nudge asks for a full sync of the cluster now: here, and through the database
// on the replica that holds its lease. It never blocks.
func (r *replication) Nudge(clusterID string) {
	r.nudgeLocal(clusterID)
	if r.coord == nil {
		return
	}
	select {
	case r.publish <- clusterID:
	default: // a nudge is a hint; the interval brings the full sync anyway
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
	if r.coord == nil {
		return
	}
	select {
	case r.publish <- clusterID:
	default: // a nudge is a hint; the interval brings the full sync anyway
	}
}

// deliver names where this replica's own nudges go: local for a cluster,
// localNode for one node (the orchestrator's). It is called before Start.
func (r *replication) deliver(local func(clusterID string), localNode func(clusterID, nodeID string)) {
	r.local, r.localNode = local, localNode
}

// Start takes the first leases and relays nudges between replicas until
// Stop or the end of ctx; on SQLite it has nothing to run. Stop
// (startstop.Base's) gives up this replica's leases (cancelling its syncs)
// and stops relaying nudges; it is idempotent, and returns at once on a
// replication never started.
func (r *replication) Start(ctx context.Context) error {
	ctx, done, err := r.StartInit(ctx)
	if err != nil {
		return err
	}
	if r.coord == nil {
		done()
		return nil
	}
	if err := r.leases.Start(ctx); err != nil {
		done()
		return err
	}
	go func() {
		defer done()
		defer r.leases.Stop() // gives the leases up before Stop returns
		r.relay(ctx)
	}()
	return nil
}

// relay publishes this replica's nudges to the others and hands theirs to
// the local orchestrator, until ctx ends.
func (r *replication) relay(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-r.publish:
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			if err := r.coord.PublishNudge(pctx, c); err != nil && ctx.Err() == nil {
				r.log.Debug("nudge not published", "cluster", c, "err", err)
			}
			cancel()
		case c := <-r.coord.Nudges():
			r.nudgeLocal(c)
		}
	}
}

// forgetReplicaAfter is how long a replica that stopped heartbeating stays
// listed (as not live) by Replicas: long enough to be seen, then gone.
func (r *replication) forgetReplicaAfter() time.Duration { return max(10*r.ttl, time.Minute) }

// listed reports whether a replica is still shown: live, or its last
// heartbeat within forget of now.
func listed(live bool, heartbeat, now time.Time, forget time.Duration) bool {
	return live || now.Sub(heartbeat) <= forget
}

// membership appends core.replica_joined and core.replica_lost events for
// the replicas that joined or left the live set since the last lease round.
// The first live replica (by id) writes them, so that one change is told
// once; a replica's first round only learns the set.
func (r *replication) membership(live []string) {
	prev := r.members
	r.members = live
	if r.st == nil || prev == nil || len(live) == 0 || live[0] != r.self.ID {
		return
	}
	var evs []store.Event
	now := time.Now().UTC()
	for _, id := range live {
		if !slices.Contains(prev, id) {
			evs = append(evs, store.Event{TS: now, Type: store.EventCoreReplicaJoined, Actor: store.ActorCore,
				Message: fmt.Sprintf("core replica %s joined (%d live)", id, len(live)), Data: map[string]any{"replica": id}})
		}
	}
	for _, id := range prev {
		if !slices.Contains(live, id) {
			evs = append(evs, store.Event{TS: now, Type: store.EventCoreReplicaLost, Actor: store.ActorCore,
				Message: fmt.Sprintf("core replica %s stopped heartbeating for %s; its leases move (%d live)", id, r.ttl, len(live)),
				Data:    map[string]any{"replica": id}})
		}
	}
	if len(evs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.ttl/3)
	defer cancel()
	if err := r.st.Update(ctx, func(tx store.Tx) error {
		for i := range evs {
			if err := tx.AppendEvent(ctx, &evs[i]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		r.log.Warn("replica membership events not written", "err", err)
	}
	for _, e := range evs {
		r.log.Info(e.Message)
	}
}

// Replicas answers GET /api/v1/core/replicas. A replica that stopped
// heartbeating is listed, not live, for forgetReplicaAfter, then no more.
func (r *replication) Replicas(ctx context.Context) (*wire.CoreReplicas, error) {
	var drift []string
	if r.drift != nil {
		drift = r.drift()
	}
	if r.coord == nil {
		return &wire.CoreReplicas{Store: DriverSQLite, Self: r.self.ID, PolicyDrift: drift, Replicas: []wire.CoreReplica{{
			ID: r.self.ID, Addr: r.self.Addr, Version: r.self.Version, StartedTS: r.self.StartedTS,
			HeartbeatTS: time.Now().UTC(), Live: true, Leases: []wire.ClusterLease{},
		}}}, nil
	}
	reps, ls, err := r.coord.LeaseStatus(ctx, r.ttl)
	if err != nil {
		return nil, fmt.Errorf("replicas: %w", err)
	}
	out := &wire.CoreReplicas{Store: DriverPostgres, Self: r.self.ID, LeaseTTLS: r.ttl.Seconds(), PolicyDrift: drift,
		Replicas: []wire.CoreReplica{}}
	for _, rep := range reps {
		if !listed(rep.Live, rep.HeartbeatTS, time.Now(), r.forgetReplicaAfter()) {
			continue
		}
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
