package store

import (
	"context"
	"fmt"
)

// The writes of clusters and nodes both stores make with the same SQL.
// Each store reads nodes and puts them itself: their kinds are a JSON list
// in SQLite, an array in PostgreSQL.

// PutCluster is Tx.PutCluster of both stores: it creates or replaces a
// cluster. A zero UpdatedTS is set to now.
func (w Writes) PutCluster(ctx context.Context, c *Cluster) error {
	d := w.Dialect
	if c.UpdatedTS.IsZero() {
		c.UpdatedTS = Now()
	}
	ps, args := d.values(1, c.ID, c.Status, c.StatusReason, d.Time(c.UpdatedTS))
	_, err := w.Exec(ctx, fmt.Sprintf("put cluster %q", c.ID),
		`INSERT INTO clusters (id, status, status_reason, updated_ts) VALUES (`+ps+`)
		ON CONFLICT (id) DO UPDATE SET status = excluded.status,
			status_reason = excluded.status_reason, updated_ts = excluded.updated_ts`, args...)
	return err
}

// DeleteNode is Tx.DeleteNode of both stores: it removes a node
// (ErrNotFound when there is none). Its actions stay.
func (w Writes) DeleteNode(ctx context.Context, clusterID, nodeID string) error {
	d := w.Dialect
	what := fmt.Sprintf("delete node %s/%s", clusterID, nodeID)
	n, err := w.Exec(ctx, what, `DELETE FROM nodes WHERE cluster_id = `+d.Placeholder(1)+` AND id = `+d.Placeholder(2),
		clusterID, nodeID)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}
