package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/musterhq/muster/shared/action"
)

// Dialect is what the statements core/store writes for both stores (the
// appends here, the action list in list.go) need to know of one store's SQL.
type Dialect struct {
	Placeholder Placeholder
	// Time is a time as the store binds it (SQLite: microseconds since the
	// epoch; PostgreSQL: a timestamptz).
	Time func(time.Time) any
}

// nullTime binds an optional time: NULL for nil.
func (d Dialect) nullTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return d.Time(*t)
}

// values writes one placeholder a value, from the first, and returns them
// with the values.
func (d Dialect) values(first int, vals ...any) (string, []any) {
	ps := make([]string, len(vals))
	for i := range vals {
		ps[i] = d.Placeholder(first + i)
	}
	return strings.Join(ps, ", "), vals
}

// Exec runs a statement in a store's transaction and returns the rows it
// changed (for the store's count of rows written). what names the write in
// errors.
type Exec func(ctx context.Context, what, stmt string, args ...any) (int64, error)

// Now is the time a store records for a zero timestamp.
func Now() time.Time { return action.UTC(time.Now()) }

// AppendHistory is Tx.AppendHistory of both stores: it adds one transition
// to an action's history (ErrNotFound when the action does not exist,
// without failing the transaction: PostgreSQL aborts one whose statement
// fails). A zero TS is set to now.
func AppendHistory(ctx context.Context, d Dialect, exec Exec, actionID string, t action.Transition) error {
	if t.TS.IsZero() {
		t.TS = Now()
	}
	what := fmt.Sprintf("history of %q", actionID)
	ps, args := d.values(1, actionID, d.Time(t.TS), string(t.From), string(t.To), t.Actor, t.Reason)
	n, err := exec(ctx, what, `INSERT INTO action_history (action_id, ts, from_state, to_state, actor, reason)
		SELECT `+ps+` WHERE EXISTS (SELECT 1 FROM actions WHERE id = `+d.Placeholder(len(args)+1)+`)`,
		append(args, actionID)...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

// AppendEvent is Tx.AppendEvent of both stores: it stores e and sets e.Seq
// and, when zero, e.TS. insert runs the statement, an INSERT ... RETURNING
// seq, and returns that seq.
func AppendEvent(ctx context.Context, d Dialect, insert func(ctx context.Context, what, stmt string, args ...any) (int64, error), e *Event) error {
	if e.TS.IsZero() {
		e.TS = Now()
	}
	var data string
	if len(e.Data) > 0 {
		b, err := json.Marshal(e.Data)
		if err != nil {
			return fmt.Errorf("event %s: data: %w", e.Type, err)
		}
		data = string(b)
	}
	ps, args := d.values(1, d.Time(e.TS), e.Type, e.Actor, e.ClientAddr, e.ClusterID, e.NodeID, e.ActionID, e.RunID, e.Message, data)
	seq, err := insert(ctx, "append event "+e.Type,
		`INSERT INTO events (ts, type, actor, client_addr, cluster_id, node_id, action_id, run_id, message, data)
		VALUES (`+ps+`) RETURNING seq`, args...)
	if err != nil {
		return err
	}
	e.Seq = seq
	return nil
}
