package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// Clusters and nodes, in both stores. Each store puts a node itself (a
// missing cluster is a failed foreign key in SQLite, no row written in
// PostgreSQL).

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

// LabelsColumn is how both stores keep a set of labels: a JSON object,
// "{}" when empty.
func LabelsColumn(l map[string]string) (string, error) {
	if len(l) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(l)
	return string(b), err
}

// NodeColumns are the columns of a node row, in the order Reads scans
// them and each store's PutNode writes them.
const NodeColumns = `cluster_id, id, addr, source, status, status_reason, down_cause, drained, store_id, cursor, kinds, version, last_contact, updated_ts, labels, drained_by, drain_reason, core_labels, replaces`

func (d Dialect) scanNode(row Row) (Node, error) {
	var n Node
	var labels, coreLabels string
	var kinds []string
	err := row.Scan(&n.ClusterID, &n.ID, &n.Addr, &n.Source, &n.Status, &n.StatusReason, &n.DownCause, &n.Drained,
		&n.StoreID, &n.Cursor, d.ListInto(&kinds), &n.Version, d.nullTimeInto(&n.LastContact), d.timeInto(&n.UpdatedTS),
		&labels, &n.DrainedBy, &n.DrainReason, &coreLabels, &n.Replaces)
	if err != nil {
		return n, err
	}
	n.Kinds, n.ArgsSchemas, n.Secrets = FromKindsColumn(kinds)
	if err := json.Unmarshal([]byte(labels), &n.Labels); err != nil {
		return n, fmt.Errorf("node %s/%s: labels: %w", n.ClusterID, n.ID, err)
	}
	if len(n.Labels) == 0 {
		n.Labels = nil
	}
	if err := json.Unmarshal([]byte(coreLabels), &n.CoreLabels); err != nil {
		return n, fmt.Errorf("node %s/%s: core labels: %w", n.ClusterID, n.ID, err)
	}
	if len(n.CoreLabels) == 0 {
		n.CoreLabels = nil
	}
	return n, nil
}

// Nodes is Reader.Nodes of both stores.
func (r Reads) Nodes(ctx context.Context, clusterID string) ([]Node, error) {
	stmt := `SELECT ` + NodeColumns + ` FROM nodes`
	var args []any
	if clusterID != "" {
		stmt += ` WHERE cluster_id = ` + r.Dialect.Placeholder(1)
		args = append(args, clusterID)
	}
	var out []Node
	err := r.Query(ctx, stmt+` ORDER BY cluster_id, id`, args, func(row Row) error {
		n, err := r.Dialect.scanNode(row)
		if err != nil {
			return err
		}
		out = append(out, n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	return out, nil
}

// Node is Reader.Node of both stores.
func (r Reads) Node(ctx context.Context, clusterID, nodeID string) (*Node, error) {
	ph := r.Dialect.Placeholder
	var n Node
	found, err := r.one(ctx, `SELECT `+NodeColumns+` FROM nodes WHERE cluster_id = `+ph(1)+` AND id = `+ph(2),
		[]any{clusterID, nodeID}, func(row Row) (err error) {
			n, err = r.Dialect.scanNode(row)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("node %s/%s: %w", clusterID, nodeID, err)
	}
	if !found {
		return nil, fmt.Errorf("node %s/%s: %w", clusterID, nodeID, ErrNotFound)
	}
	return &n, nil
}

// DownNodes is Reader.DownNodes of both stores.
func (r Reads) DownNodes(ctx context.Context, clusterID string) ([]string, error) {
	ph := r.Dialect.Placeholder
	out, err := strs(ctx, r.Query, `SELECT id FROM nodes WHERE cluster_id = `+ph(1)+` AND status = `+ph(2)+` ORDER BY id`,
		clusterID, NodeDown)
	if err != nil {
		return nil, fmt.Errorf("down nodes: %w", err)
	}
	return out, nil
}
