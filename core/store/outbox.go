package store

import (
	"context"
	"fmt"
	"time"
)

// Outbox chooses the notification destinations (core/notify) an event goes
// to. A store given one with SetOutbox writes, in the same transaction as
// the event (AppendEvent), one outbox row naming them: the outbox never
// disagrees with the event log, and a crash loses no delivery.
//
// The outbox keeps one row per event, whatever the number of its
// destinations, and one cursor per destination: every delivery to a
// destination of an event up to its cursor is delivered, unless a delivery
// row of its own says otherwise. Only deliveries that needed more than one
// try, died or were redelivered have such a row (docs/notifications.md,
// "Cost").
type Outbox func(e *Event) []string

// OutboxLease is the lease (core/lease) of the replica that delivers the
// outbox, held beside the cluster leases under a name no cluster can have.
const OutboxLease = "~notify"

// MaxDestinations bounds the destinations of one event: a delivery's id is
// DeliveryID(event seq, its rank among them).
const MaxDestinations = 1024

// DeliveryID is the id of the delivery of event seq to its rank-th
// destination (from 0): deliveries are ordered by event, and the deliveries
// of a range of events are a range of ids (docs/notifications.md, "Cost").
func DeliveryID(seq int64, rank int) int64 { return seq*MaxDestinations + int64(rank) }

// splitDeliveryID is the event seq and the rank of a delivery id.
func splitDeliveryID(id int64) (seq int64, rank int) {
	return id / MaxDestinations, int(id % MaxDestinations)
}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryDead      = "dead"
)

// Delivery is one event to send to one destination. A delivery delivered
// at its first try has no row of its own: it shows one try, no status,
// and its event's time as UpdatedTS.
type Delivery struct {
	ID          int64     `json:"id"`
	Destination string    `json:"destination"`
	EventSeq    int64     `json:"event_seq"`
	State       string    `json:"state"`
	Attempts    int       `json:"attempts"`
	CreatedTS   time.Time `json:"created_ts"`
	// NextTS is when the next try may start (pending deliveries).
	NextTS    time.Time `json:"next_ts"`
	UpdatedTS time.Time `json:"updated_ts"`
	// LastStatus is the HTTP status of the last try (0: no answer, or
	// not kept).
	LastStatus int    `json:"last_status"`
	LastError  string `json:"last_error,omitempty"`
}

// DeliveryQuery selects deliveries of one destination, newest first
// unless Oldest.
type DeliveryQuery struct {
	Destination string
	// State filters when not empty.
	State string
	// Before is the id of the last delivery of the previous page (0: none).
	Before int64
	Limit  int
	// Oldest lists oldest first (Before is then ignored).
	Oldest bool
}

// EventDeliveryQuery selects the deliveries of the events numbered FromSeq
// to ToSeq whose times lie between FromTS and ToTS (both inclusive).
type EventDeliveryQuery struct {
	FromSeq, ToSeq int64
	FromTS, ToTS   time.Time
	Limit          int
}

// DeliveryStat sums up the deliveries of one destination.
type DeliveryStat struct {
	Destination string
	// Backlog counts the pending deliveries.
	Backlog       int
	OldestPending *time.Time
	LastSuccess   *time.Time
	LastFailure   *time.Time
	// LastError is why the last failed try failed.
	LastError string
	Dead      int
}

// OutboxReader reads the notification outbox (a part of Reader). Both
// stores answer it with Reads, by the functions of this package
// (readDelivery and the rest) over its OutboxRows.
type OutboxReader interface {
	// Delivery returns one delivery (ErrNotFound when there is none).
	Delivery(ctx context.Context, id int64) (*Delivery, error)
	// Deliveries lists the deliveries q selects, newest first.
	Deliveries(ctx context.Context, q DeliveryQuery) ([]Delivery, error)
	// EventDeliveries lists the deliveries q selects, newest event first,
	// then by destination.
	EventDeliveries(ctx context.Context, q EventDeliveryQuery) ([]Delivery, error)
	// PendingDeliveries lists up to limit pending deliveries of a
	// destination, oldest first: the first is the one in flight.
	PendingDeliveries(ctx context.Context, destination string, limit int) ([]Delivery, error)
	// DeliveryStats sums up the destinations named that have had
	// deliveries (every one when none is named), by name.
	DeliveryStats(ctx context.Context, destinations ...string) ([]DeliveryStat, error)
}

// OutboxTx writes the notification outbox (a part of Tx). Both stores
// write it with Writes.
type OutboxTx interface {
	// UpdateDelivery stores d's state, attempts, next_ts, last status and
	// error as the delivery's own row (ErrNotFound when the outbox has no
	// such delivery). A zero UpdatedTS is set to now. A try that failed
	// (LastError set) is also its destination's last failure.
	UpdateDelivery(ctx context.Context, d *Delivery) error
	// MarkDelivered records that the deliveries ids to destination, the
	// head of its queue in order (PendingDeliveries), were each delivered
	// by one more try answered with status at ts: the destination's
	// cursor moves to the last, and those that had a row of their own are
	// made delivered.
	MarkDelivered(ctx context.Context, destination string, ids []int64, status int, ts time.Time) error
	// SkipTo moves a destination's cursor to seq when no delivery to it
	// is pending up to seq (a destination caught up, whose next delivery
	// would otherwise be looked for among every event since its last).
	SkipTo(ctx context.Context, destination string, seq int64) error
	// PurgeDeliveries deletes the outbox rows of up to limit events
	// created before t, oldest first, with their deliveries' rows, and
	// returns how many events' rows it deleted.
	PurgeDeliveries(ctx context.Context, before time.Time, limit int) (int, error)
}

// NextDelivery returns the oldest pending delivery of a destination
// (ErrNotFound when there is none): the one in flight, in event order.
func NextDelivery(ctx context.Context, r Reader, destination string) (*Delivery, error) {
	ds, err := r.PendingDeliveries(ctx, destination, 1)
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("next delivery to %s: %w", destination, ErrNotFound)
	}
	return &ds[0], nil
}

// EventBySeq returns the event numbered seq (ErrNotFound when it is not,
// or no longer, stored).
func EventBySeq(ctx context.Context, r Reader, seq int64) (*Event, error) {
	evs, err := r.Events(ctx, seq-1, 1)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 || evs[0].Seq != seq {
		return nil, ErrNotFound
	}
	return &evs[0], nil
}

// Notification events.
const (
	// EventApprovalWaiting: an action or a run starts waiting for an
	// approver.
	EventApprovalWaiting = "approval.waiting"
	// EventNotifyDead: a delivery was given up (Data: destination,
	// delivery, event_seq), or the pending deliveries of a destination
	// no longer configured were dropped (Data: destination, dropped,
	// reason).
	EventNotifyDead = "notify.dead"
)
