package store

import (
	"context"
	"fmt"
	"time"
)

// Replace requests (SQLite and PostgreSQL migration 031): a node that
// enrolled with `replaces: OLD` asks to take OLD's declared place. The
// request waits for an admin: their replace of OLD with the node (muster
// node replace) approves it and removes it in the same transaction.

// EventNodeReplaceRequested: a node enrolled asking to replace another;
// an admin approves with a replace.
const EventNodeReplaceRequested = "node.replace_requested"

// ReplaceRequest is one pending request of NodeID to replace Replaces in
// ClusterID, made at its enrollment with join token Token.
type ReplaceRequest struct {
	ClusterID   string    `json:"cluster_id"`
	NodeID      string    `json:"node_id"`
	Replaces    string    `json:"replaces"`
	Token       string    `json:"token"`
	RequestedTS time.Time `json:"requested_ts"`
}

const replaceRequestColumns = `cluster_id, node_id, replaces, token, requested_ts`

// ReplaceRequests is Reader.ReplaceRequests of both stores: by node.
func (r Reads) ReplaceRequests(ctx context.Context, clusterID string) ([]ReplaceRequest, error) {
	d := r.Dialect
	out := []ReplaceRequest{}
	err := r.Query(ctx, `SELECT `+replaceRequestColumns+` FROM replace_requests WHERE cluster_id = `+d.Placeholder(1)+
		` ORDER BY node_id`, []any{clusterID}, func(row Row) error {
		var q ReplaceRequest
		if err := row.Scan(&q.ClusterID, &q.NodeID, &q.Replaces, &q.Token, d.timeInto(&q.RequestedTS)); err != nil {
			return err
		}
		out = append(out, q)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replace requests of cluster %s: %w", clusterID, err)
	}
	return out, nil
}

// PutReplaceRequest is Tx.PutReplaceRequest of both stores: a node's
// newer request takes the place of its older one.
func (w Writes) PutReplaceRequest(ctx context.Context, q *ReplaceRequest) error {
	d := w.Dialect
	if q.RequestedTS.IsZero() {
		q.RequestedTS = Now()
	}
	ps, args := d.values(1, q.ClusterID, q.NodeID, q.Replaces, q.Token, d.Time(q.RequestedTS))
	_, err := w.Exec(ctx, fmt.Sprintf("replace request of node %s", q.NodeID), `INSERT INTO replace_requests (`+
		replaceRequestColumns+`) VALUES (`+ps+`) ON CONFLICT (cluster_id, node_id) DO UPDATE SET replaces = excluded.replaces,
		token = excluded.token, requested_ts = excluded.requested_ts`, args...)
	return err
}

// DeleteReplaceRequest is Tx.DeleteReplaceRequest of both stores: it
// removes the node's request and returns what it asked to replace ("":
// there was none).
func (w Writes) DeleteReplaceRequest(ctx context.Context, clusterID, nodeID string) (string, error) {
	d := w.Dialect
	what := fmt.Sprintf("delete replace request of node %s", nodeID)
	replaces := ""
	err := w.Returning(ctx, what, `DELETE FROM replace_requests WHERE cluster_id = `+d.Placeholder(1)+
		` AND node_id = `+d.Placeholder(2)+` RETURNING replaces`, []any{clusterID, nodeID}, func(row Row) error {
		return row.Scan(&replaces)
	})
	return replaces, err
}
