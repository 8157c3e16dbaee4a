package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// OutboxEntry is an event's row in the outbox: the destinations it goes
// to, by rank.
type OutboxEntry struct {
	Seq          int64
	CreatedTS    time.Time
	Destinations []string
}

// rank is the rank of destination among e's destinations (-1: not one).
func (e OutboxEntry) rank(destination string) int {
	return slices.Index(e.Destinations, destination)
}

// Cursor is a destination's place in the outbox: every delivery to it of an
// event up to Seq that has no row of its own is delivered.
type Cursor struct {
	Destination string
	Seq         int64
	LastSuccess *time.Time
	LastFailure *time.Time
	LastError   string
}

// OutboxScan selects outbox rows: events after After and up to Through (0:
// no bound), created between FromTS and ToTS (zero: no bound), going to
// Destination (empty: any), by seq, at most Limit (0: no limit).
type OutboxScan struct {
	After, Through int64
	FromTS, ToTS   time.Time
	Destination    string
	Desc           bool
	Limit          int
}

// DeliveryScan selects delivery rows (the deliveries that have one): of
// Destination (empty: any), in State (empty: any), with ids from FromID to
// ToID (both inclusive; ToID 0: no bound), by id, at most Limit (0: no
// limit).
type DeliveryScan struct {
	Destination  string
	State        string
	FromID, ToID int64
	Desc         bool
	Limit        int
}

// DeliveryRowCount counts the delivery rows of a destination in a state,
// of events up to its cursor or after it.
type DeliveryRowCount struct {
	Destination string
	State       string
	AfterCursor bool
	N           int
}

// OutboxRows are the reads of the outbox's tables each store makes with the
// statements of this file (outboxEntriesSQL and the rest); the functions
// below make the OutboxReader of both stores from them.
type OutboxRows interface {
	OutboxEntries(ctx context.Context, q OutboxScan) ([]OutboxEntry, error)
	DeliveryRows(ctx context.Context, q DeliveryScan) ([]Delivery, error)
	// Cursors returns the cursor of destination, or every cursor when
	// destination is empty.
	Cursors(ctx context.Context, destination string) ([]Cursor, error)
	// OutboxCount counts the outbox rows after seq going to destination.
	OutboxCount(ctx context.Context, destination string, after int64) (int, error)
	DeliveryRowCounts(ctx context.Context) ([]DeliveryRowCount, error)
}

// outboxList is how the destinations of an outbox row are stored: their
// names between commas, ",a,b,", so that a row going to d is one whose
// list holds ",d," (names have no comma: names.CheckID).
func outboxList(dests []string) string { return "," + strings.Join(dests, ",") + "," }

// parseOutboxList reads the destinations of an outbox row.
func parseOutboxList(s string) []string {
	s = strings.Trim(s, ",")
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// deliveryColumns are the columns of a delivery row, in the order each
// store scans them.
const deliveryColumns = `id, destination, event_seq, state, attempts, created_ts, next_ts, updated_ts, last_status, last_error`

// outboxEntriesSQL is the statement of OutboxRows.OutboxEntries: it selects
// seq, created_ts and destinations.
func outboxEntriesSQL(d Dialect, q OutboxScan) (string, []any) {
	b := &listSQL{ph: d.Placeholder}
	b.where = append(b.where, "seq > "+b.arg(q.After))
	if q.Through > 0 {
		b.where = append(b.where, "seq <= "+b.arg(q.Through))
	}
	if !q.FromTS.IsZero() {
		b.where = append(b.where, "created_ts >= "+b.arg(d.Time(q.FromTS)))
	}
	if !q.ToTS.IsZero() {
		b.where = append(b.where, "created_ts <= "+b.arg(d.Time(q.ToTS)))
	}
	if q.Destination != "" {
		b.where = append(b.where, d.contains("destinations", b.arg(","+q.Destination+",")))
	}
	stmt := `SELECT seq, created_ts, destinations FROM notify_outbox WHERE ` + strings.Join(b.where, " AND ") +
		` ORDER BY seq` + desc(q.Desc)
	if q.Limit > 0 {
		stmt += " LIMIT " + b.arg(q.Limit)
	}
	return stmt, b.args
}

// deliveryRowsSQL is the statement of OutboxRows.DeliveryRows: it selects
// deliveryColumns.
func deliveryRowsSQL(d Dialect, q DeliveryScan) (string, []any) {
	b := &listSQL{ph: d.Placeholder}
	b.where = append(b.where, "id >= "+b.arg(q.FromID))
	if q.ToID > 0 {
		b.where = append(b.where, "id <= "+b.arg(q.ToID))
	}
	if q.Destination != "" {
		b.where = append(b.where, "destination = "+b.arg(q.Destination))
	}
	switch q.State {
	case "":
	case DeliveryPending, DeliveryDead:
		// A literal, so that the partial index of the state serves the read.
		b.where = append(b.where, "state = '"+q.State+"'")
	default:
		b.where = append(b.where, "state = "+b.arg(q.State))
	}
	stmt := `SELECT ` + deliveryColumns + ` FROM notify_deliveries WHERE ` + strings.Join(b.where, " AND ") +
		` ORDER BY id` + desc(q.Desc)
	if q.Limit > 0 {
		stmt += " LIMIT " + b.arg(q.Limit)
	}
	return stmt, b.args
}

// cursorsSQL is the statement of OutboxRows.Cursors: it selects
// destination, seq, last_success_ts, last_failure_ts (both may be NULL)
// and last_error.
func cursorsSQL(d Dialect, destination string) (string, []any) {
	stmt := `SELECT destination, seq, last_success_ts, last_failure_ts, last_error FROM notify_cursors`
	if destination == "" {
		return stmt + ` ORDER BY destination`, nil
	}
	return stmt + ` WHERE destination = ` + d.Placeholder(1), []any{destination}
}

// outboxCountSQL is the statement of OutboxRows.OutboxCount.
func outboxCountSQL(d Dialect, destination string, after int64) (string, []any) {
	return `SELECT COUNT(*) FROM notify_outbox WHERE seq > ` + d.Placeholder(1) + ` AND ` +
		d.contains("destinations", d.Placeholder(2)), []any{after, "," + destination + ","}
}

// deliveryRowCountsSQL is the statement of OutboxRows.DeliveryRowCounts: it
// selects destination, state, after the cursor (0 or 1) and the count.
const deliveryRowCountsSQL = `SELECT d.destination, d.state,
	CASE WHEN d.event_seq > COALESCE(c.seq, 0) THEN 1 ELSE 0 END, COUNT(*)
	FROM notify_deliveries d LEFT JOIN notify_cursors c ON c.destination = d.destination
	GROUP BY 1, 2, 3`

var (
	_ OutboxRows   = Reads{}
	_ OutboxReader = Reads{}
)

// OutboxEntries is OutboxRows.OutboxEntries of both stores.
func (r Reads) OutboxEntries(ctx context.Context, q OutboxScan) ([]OutboxEntry, error) {
	stmt, args := outboxEntriesSQL(r.Dialect, q)
	var out []OutboxEntry
	err := r.Query(ctx, stmt, args, func(row Row) error {
		var e OutboxEntry
		var dests string
		if err := row.Scan(&e.Seq, r.Dialect.timeInto(&e.CreatedTS), &dests); err != nil {
			return err
		}
		e.Destinations = parseOutboxList(dests)
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return out, nil
}

// DeliveryRows is OutboxRows.DeliveryRows of both stores.
func (r Reads) DeliveryRows(ctx context.Context, q DeliveryScan) ([]Delivery, error) {
	d := r.Dialect
	stmt, args := deliveryRowsSQL(d, q)
	var out []Delivery
	err := r.Query(ctx, stmt, args, func(row Row) error {
		var dv Delivery
		if err := row.Scan(&dv.ID, &dv.Destination, &dv.EventSeq, &dv.State, &dv.Attempts, d.timeInto(&dv.CreatedTS),
			d.timeInto(&dv.NextTS), d.timeInto(&dv.UpdatedTS), &dv.LastStatus, &dv.LastError); err != nil {
			return err
		}
		out = append(out, dv)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("deliveries: %w", err)
	}
	return out, nil
}

// Cursors is OutboxRows.Cursors of both stores.
func (r Reads) Cursors(ctx context.Context, destination string) ([]Cursor, error) {
	d := r.Dialect
	stmt, args := cursorsSQL(d, destination)
	var out []Cursor
	err := r.Query(ctx, stmt, args, func(row Row) error {
		var c Cursor
		if err := row.Scan(&c.Destination, &c.Seq, d.nullTimeInto(&c.LastSuccess), d.nullTimeInto(&c.LastFailure),
			&c.LastError); err != nil {
			return err
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox cursors: %w", err)
	}
	return out, nil
}

// OutboxCount is OutboxRows.OutboxCount of both stores.
func (r Reads) OutboxCount(ctx context.Context, destination string, after int64) (int, error) {
	stmt, args := outboxCountSQL(r.Dialect, destination, after)
	var n int
	if _, err := r.one(ctx, stmt, args, func(row Row) error { return row.Scan(&n) }); err != nil {
		return 0, fmt.Errorf("outbox backlog of %s: %w", destination, err)
	}
	return n, nil
}

// DeliveryRowCounts is OutboxRows.DeliveryRowCounts of both stores.
func (r Reads) DeliveryRowCounts(ctx context.Context) ([]DeliveryRowCount, error) {
	var out []DeliveryRowCount
	err := r.Query(ctx, deliveryRowCountsSQL, nil, func(row Row) error {
		var c DeliveryRowCount
		var after int
		if err := row.Scan(&c.Destination, &c.State, &after, &c.N); err != nil {
			return err
		}
		c.AfterCursor = after == 1
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delivery counts: %w", err)
	}
	return out, nil
}

// Delivery is OutboxReader.Delivery of both stores.
func (r Reads) Delivery(ctx context.Context, id int64) (*Delivery, error) {
	return readDelivery(ctx, r, id)
}

// Deliveries is OutboxReader.Deliveries of both stores.
func (r Reads) Deliveries(ctx context.Context, q DeliveryQuery) ([]Delivery, error) {
	return listDeliveries(ctx, r, q)
}

// EventDeliveries is OutboxReader.EventDeliveries of both stores.
func (r Reads) EventDeliveries(ctx context.Context, q EventDeliveryQuery) ([]Delivery, error) {
	return listEventDeliveries(ctx, r, q)
}

// PendingDeliveries is OutboxReader.PendingDeliveries of both stores.
func (r Reads) PendingDeliveries(ctx context.Context, destination string, limit int) ([]Delivery, error) {
	return listPending(ctx, r, destination, limit)
}

// DeliveryStats is OutboxReader.DeliveryStats of both stores.
func (r Reads) DeliveryStats(ctx context.Context, destinations ...string) ([]DeliveryStat, error) {
	return readDeliveryStats(ctx, r, destinations...)
}

func desc(on bool) string {
	if on {
		return " DESC"
	}
	return ""
}

// contains is the condition "column holds the string of placeholder ph".
func (d Dialect) contains(column, ph string) string {
	return d.Position + "(" + column + ", " + ph + ") > 0"
}

// cursorOf returns a destination's cursor (seq 0 when it has none).
func cursorOf(ctx context.Context, r OutboxRows, destination string) (Cursor, error) {
	cs, err := r.Cursors(ctx, destination)
	if err != nil || len(cs) == 0 {
		return Cursor{Destination: destination}, err
	}
	return cs[0], nil
}

// implied is the delivery of entry e to its rank-th destination as its
// destination's cursor says, for a delivery without a row of its own.
func implied(e OutboxEntry, rank int, cursor int64) Delivery {
	d := Delivery{ID: DeliveryID(e.Seq, rank), Destination: e.Destinations[rank], EventSeq: e.Seq,
		State: DeliveryPending, CreatedTS: e.CreatedTS, NextTS: e.CreatedTS, UpdatedTS: e.CreatedTS}
	if e.Seq <= cursor {
		d.State, d.Attempts = DeliveryDelivered, 1
	}
	return d
}

// rowsByID indexes delivery rows by id.
func rowsByID(ds []Delivery) map[int64]Delivery {
	m := make(map[int64]Delivery, len(ds))
	for _, d := range ds {
		m[d.ID] = d
	}
	return m
}

// views are the deliveries to destination of the outbox rows es (which go
// to it, in seq order either way), each as its own row says or else as the
// cursor does: one read of the rows of their range.
func views(ctx context.Context, r OutboxRows, destination string, es []OutboxEntry, cursor int64) ([]Delivery, error) {
	lo, hi := es[0].Seq, es[len(es)-1].Seq
	if lo > hi {
		lo, hi = hi, lo
	}
	rows, err := r.DeliveryRows(ctx, DeliveryScan{Destination: destination,
		FromID: DeliveryID(lo, 0), ToID: DeliveryID(hi, MaxDestinations-1)})
	if err != nil {
		return nil, err
	}
	own := rowsByID(rows)
	out := make([]Delivery, len(es))
	for i, e := range es {
		rank := e.rank(destination)
		d, ok := own[DeliveryID(e.Seq, rank)]
		if !ok {
			d = implied(e, rank, cursor)
		}
		out[i] = d
	}
	return out, nil
}

// readDelivery is OutboxReader.Delivery of both stores.
func readDelivery(ctx context.Context, r OutboxRows, id int64) (*Delivery, error) {
	notFound := fmt.Errorf("delivery %d: %w", id, ErrNotFound)
	if id <= 0 {
		return nil, notFound
	}
	rows, err := r.DeliveryRows(ctx, DeliveryScan{FromID: id, ToID: id})
	if err != nil {
		return nil, err
	}
	if len(rows) == 1 {
		return &rows[0], nil
	}
	seq, rank := splitDeliveryID(id)
	es, err := r.OutboxEntries(ctx, OutboxScan{After: seq - 1, Through: seq})
	if err != nil {
		return nil, err
	}
	if len(es) == 0 || rank >= len(es[0].Destinations) {
		return nil, notFound
	}
	c, err := cursorOf(ctx, r, es[0].Destinations[rank])
	if err != nil {
		return nil, err
	}
	d := implied(es[0], rank, c.Seq)
	return &d, nil
}

// scanPage bounds the outbox rows read at a time while looking for a
// destination's deliveries.
const scanPage = 1024

// listDeliveries is OutboxReader.Deliveries of both stores.
func listDeliveries(ctx context.Context, r OutboxRows, q DeliveryQuery) ([]Delivery, error) {
	switch q.State {
	case DeliveryPending:
		if q.Oldest {
			return listPending(ctx, r, q.Destination, q.Limit)
		}
	case DeliveryDead:
		// Every dead delivery has a row of its own.
		scan := DeliveryScan{Destination: q.Destination, State: DeliveryDead, Desc: !q.Oldest, Limit: q.Limit}
		if !q.Oldest && q.Before > 0 {
			scan.ToID = q.Before - 1
		}
		return r.DeliveryRows(ctx, scan)
	}
	c, err := cursorOf(ctx, r, q.Destination)
	if err != nil {
		return nil, err
	}
	// Every delivery has its event's outbox row: walk them, a page at a
	// time, each delivery as its own row says or else as the cursor does.
	scan := OutboxScan{Destination: q.Destination, Desc: !q.Oldest, Limit: scanPage}
	if !q.Oldest && q.Before > 0 {
		seq, _ := splitDeliveryID(q.Before - 1)
		if seq <= 0 {
			return nil, nil // nothing before the first event
		}
		scan.Through = seq
	}
	pendingDesc := q.State == DeliveryPending // newest first: Oldest is served above
	if pendingDesc {
		// Pending deliveries lie after the cursor, but for those
		// redelivered, which have a row of their own.
		scan.After = c.Seq
	}
	var out []Delivery
	exhausted := false
	for {
		var es []OutboxEntry
		if !exhausted {
			if es, err = r.OutboxEntries(ctx, scan); err != nil {
				return nil, err
			}
		}
		if len(es) == 0 {
			if !pendingDesc {
				return out, nil
			}
			below := DeliveryScan{Destination: q.Destination, State: DeliveryPending,
				ToID: DeliveryID(c.Seq, MaxDestinations-1), Desc: true}
			if q.Before > 0 {
				below.ToID = min(below.ToID, q.Before-1)
			}
			if q.Limit > 0 {
				below.Limit = q.Limit - len(out)
				if below.Limit == 0 {
					return out, nil
				}
			}
			rows, err := r.DeliveryRows(ctx, below)
			return append(out, rows...), err
		}
		ds, err := views(ctx, r, q.Destination, es, c.Seq)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if (q.State != "" && d.State != q.State) || (!q.Oldest && q.Before > 0 && d.ID >= q.Before) {
				continue
			}
			out = append(out, d)
			if q.Limit > 0 && len(out) == q.Limit {
				return out, nil
			}
		}
		if q.Oldest {
			scan.After = es[len(es)-1].Seq
		} else {
			scan.Through = es[len(es)-1].Seq - 1
			exhausted = scan.Through <= scan.After // Through 0 would be no bound
		}
	}
}

// listPending is OutboxReader.PendingDeliveries of both stores: the
// deliveries redelivered or retried that have a row of their own, and
// those of the events after the cursor, merged in id order.
func listPending(ctx context.Context, r OutboxRows, destination string, limit int) ([]Delivery, error) {
	c, err := cursorOf(ctx, r, destination)
	if err != nil {
		return nil, err
	}
	// Pending rows of events up to the cursor (redelivered): few.
	below, err := r.DeliveryRows(ctx, DeliveryScan{Destination: destination, State: DeliveryPending,
		ToID: DeliveryID(c.Seq, MaxDestinations-1), Limit: limit})
	if err != nil {
		return nil, err
	}
	var after []Delivery
	scan := OutboxScan{After: c.Seq, Destination: destination, Limit: scanPage}
	for limit <= 0 || len(after) < limit {
		es, err := r.OutboxEntries(ctx, scan)
		if err != nil {
			return nil, err
		}
		if len(es) == 0 {
			break
		}
		ds, err := views(ctx, r, destination, es, c.Seq)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if d.State == DeliveryPending {
				after = append(after, d)
			}
		}
		if len(es) < scan.Limit {
			break
		}
		scan.After = es[len(es)-1].Seq
	}
	// Every id up to the cursor's event is below every id after it.
	out := append(below, after...)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// listEventDeliveries is OutboxReader.EventDeliveries of both stores.
func listEventDeliveries(ctx context.Context, r OutboxRows, q EventDeliveryQuery) ([]Delivery, error) {
	if q.ToSeq < q.FromSeq || q.Limit <= 0 {
		return nil, nil
	}
	es, err := r.OutboxEntries(ctx, OutboxScan{After: q.FromSeq - 1, Through: q.ToSeq, FromTS: q.FromTS, ToTS: q.ToTS,
		Desc: true, Limit: q.Limit})
	if err != nil || len(es) == 0 {
		return nil, err
	}
	rows, err := r.DeliveryRows(ctx, DeliveryScan{FromID: DeliveryID(es[len(es)-1].Seq, 0),
		ToID: DeliveryID(es[0].Seq, MaxDestinations-1)})
	if err != nil {
		return nil, err
	}
	own := rowsByID(rows)
	cursors, err := r.Cursors(ctx, "")
	if err != nil {
		return nil, err
	}
	at := map[string]int64{}
	for _, c := range cursors {
		at[c.Destination] = c.Seq
	}
	var out []Delivery
	for _, e := range es {
		byName := slices.Clone(e.Destinations)
		slices.Sort(byName)
		for _, name := range byName {
			rank := e.rank(name)
			d, ok := own[DeliveryID(e.Seq, rank)]
			if !ok {
				d = implied(e, rank, at[name])
			}
			out = append(out, d)
			if len(out) == q.Limit {
				return out, nil
			}
		}
	}
	return out, nil
}

// readDeliveryStats is OutboxReader.DeliveryStats of both stores: the
// destinations named (all when none is) that have a cursor, which the
// first event routed to them gives them.
func readDeliveryStats(ctx context.Context, r OutboxRows, destinations ...string) ([]DeliveryStat, error) {
	cursors, err := r.Cursors(ctx, "")
	if err != nil {
		return nil, err
	}
	if len(destinations) > 0 {
		cursors = slices.DeleteFunc(cursors, func(c Cursor) bool { return !slices.Contains(destinations, c.Destination) })
	}
	counts, err := r.DeliveryRowCounts(ctx)
	if err != nil {
		return nil, err
	}
	var out []DeliveryStat
	for _, c := range cursors {
		s := DeliveryStat{Destination: c.Destination, LastSuccess: c.LastSuccess, LastFailure: c.LastFailure,
			LastError: c.LastError}
		after, err := r.OutboxCount(ctx, c.Destination, c.Seq)
		if err != nil {
			return nil, err
		}
		s.Backlog = after
		for _, n := range counts {
			if n.Destination != c.Destination {
				continue
			}
			if n.State == DeliveryDead {
				s.Dead += n.N
			}
			switch {
			case n.AfterCursor && n.State != DeliveryPending:
				s.Backlog -= n.N // after the cursor, but done
			case !n.AfterCursor && n.State == DeliveryPending:
				s.Backlog += n.N // redelivered
			}
		}
		if s.Backlog > 0 {
			head, err := listPending(ctx, r, c.Destination, 1)
			if err != nil {
				return nil, err
			}
			if len(head) == 1 {
				ts := head[0].CreatedTS
				s.OldestPending = &ts
			}
		}
		out = append(out, s)
	}
	return out, nil
}
