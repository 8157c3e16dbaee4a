package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Coordinate runs one round of lease coordination for replica me, in one
// transaction, with database time: it records me's heartbeat, reads the live
// replicas (a heartbeat younger than ttl), the clusters and the leases, asks
// assign which clusters me should hold, then renews those me holds, takes
// those that are free or expired (the epoch grows), and gives up (expires)
// those me holds but should not. It returns the leases me holds afterwards:
// cluster → epoch. A cluster another replica still holds validly is left to
// it; that replica gives it up in its own round. Replicas silent for an
// hour are forgotten. These writes are not counted in RowsWritten, which
// counts the writes of Update (the orchestration's).
func (s *Store) Coordinate(ctx context.Context, me store.Replica, ttl time.Duration,
	assign func(v store.LeaseView) []string) (map[string]int64, error) {
	var held map[string]int64
	err := s.serializable(ctx, func(tx pgx.Tx) error {
		held = map[string]int64{}
		started := me.StartedTS
		if started.IsZero() {
			started = now()
		}
		_, err := tx.Exec(ctx, `INSERT INTO replicas (id, addr, version, started_ts, heartbeat_ts)
			VALUES ($1, $2, $3, $4, now())
			ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, version = excluded.version,
				started_ts = excluded.started_ts, heartbeat_ts = now()`,
			me.ID, me.Addr, me.Version, action.UTC(started))
		if err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		// Replicas silent for an hour are gone (a default replica id is new
		// at every start): their rows go.
		if _, err := tx.Exec(ctx, `DELETE FROM replicas WHERE heartbeat_ts < now() - interval '1 hour'`); err != nil {
			return fmt.Errorf("forget replicas: %w", err)
		}
		v := store.LeaseView{Me: me.ID}
		rows, err := tx.Query(ctx, `SELECT id FROM replicas WHERE heartbeat_ts > now() - $1::interval ORDER BY id`, ttl)
		if err != nil {
			return err
		}
		if v.Live, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT id FROM clusters ORDER BY id`)
		if err != nil {
			return err
		}
		if v.Clusters, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		// The outbox, when there is one, is leased as a cluster is: one
		// replica delivers it.
		if s.Outbox() != nil {
			v.Clusters = append(v.Clusters, store.OutboxLease)
		}
		if v.Leases, err = leases(ctx, tx); err != nil {
			return err
		}
		want := map[string]bool{}
		for _, c := range assign(v) {
			want[c] = true
		}
		current := map[string]store.Lease{}
		for _, l := range v.Leases {
			current[l.ClusterID] = l
		}
		for _, c := range v.Clusters {
			l, exists := current[c]
			mine := exists && l.Holder == me.ID && l.Valid
			var epoch int64
			switch {
			case want[c] && mine: // renew
				err = tx.QueryRow(ctx, `UPDATE leases SET expires_ts = now() + $2::interval
					WHERE cluster_id = $1 RETURNING epoch`, c, ttl).Scan(&epoch)
			case want[c] && !exists:
				err = tx.QueryRow(ctx, `INSERT INTO leases (cluster_id, holder, epoch, acquired_ts, expires_ts)
					VALUES ($1, $2, 1, now(), now() + $3::interval) RETURNING epoch`, c, me.ID, ttl).Scan(&epoch)
			case want[c] && !l.Valid: // free or expired: take it
				err = tx.QueryRow(ctx, `UPDATE leases SET holder = $2, epoch = epoch + 1, acquired_ts = now(),
					expires_ts = now() + $3::interval WHERE cluster_id = $1 RETURNING epoch`, c, me.ID, ttl).Scan(&epoch)
			case !want[c] && mine: // give it up now, not at expiry
				if _, err = tx.Exec(ctx, `UPDATE leases SET expires_ts = now() WHERE cluster_id = $1`, c); err != nil {
					return fmt.Errorf("give up the lease of %s: %w", c, err)
				}
				continue
			default:
				continue
			}
			if err != nil {
				return fmt.Errorf("lease of %s: %w", c, err)
			}
			held[c] = epoch
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("coordinate leases: %w", err)
	}
	return held, nil
}

// Release gives up every lease me holds and removes its heartbeat, so that
// the other replicas take its clusters at their next round (a replica
// stopping cleanly).
func (s *Store) Release(ctx context.Context, me string) error {
	err := s.serializable(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE leases SET expires_ts = now() WHERE holder = $1 AND expires_ts > now()`, me); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, me)
		return err
	})
	if err != nil {
		return fmt.Errorf("release leases: %w", err)
	}
	return nil
}

// LeaseStatus returns the replicas (live: a heartbeat younger than ttl) and
// the leases, in one snapshot.
func (s *Store) LeaseStatus(ctx context.Context, ttl time.Duration) ([]store.Replica, []store.Lease, error) {
	var reps []store.Replica
	var ls []store.Lease
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, addr, version, started_ts, heartbeat_ts,
			heartbeat_ts > now() - $1::interval FROM replicas ORDER BY id`, ttl)
		if err != nil {
			return err
		}
		reps, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Replica, error) {
			var r store.Replica
			err := row.Scan(&r.ID, &r.Addr, &r.Version, &r.StartedTS, &r.HeartbeatTS, &r.Live)
			r.StartedTS, r.HeartbeatTS = r.StartedTS.UTC(), r.HeartbeatTS.UTC()
			return r, err
		})
		if err != nil {
			return err
		}
		ls, err = leases(ctx, tx)
		return err
	})
	if err != nil {
		return nil, nil, translateConn(fmt.Errorf("lease status: %w", err))
	}
	return reps, ls, nil
}

func leases(ctx context.Context, tx pgx.Tx) ([]store.Lease, error) {
	rows, err := tx.Query(ctx, `SELECT cluster_id, holder, epoch, acquired_ts, expires_ts, expires_ts > now()
		FROM leases ORDER BY cluster_id`)
	if err != nil {
		return nil, err
	}
	ls, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Lease, error) {
		var l store.Lease
		err := row.Scan(&l.ClusterID, &l.Holder, &l.Epoch, &l.AcquiredTS, &l.ExpiresTS, &l.Valid)
		l.AcquiredTS, l.ExpiresTS = l.AcquiredTS.UTC(), l.ExpiresTS.UTC()
		return l, err
	})
	return ls, err
}
