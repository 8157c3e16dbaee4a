-- A leaner notification outbox (docs/notifications.md, "Cost"): a
-- delivery's id is its event's seq times 1024 plus its rank among the
-- event's destinations (store.DeliveryID), so that the rowid orders
-- deliveries by event and bounds reads and purges by event without an index
-- on creation time; the queue index holds the pending deliveries alone, so
-- that delivering one removes an entry instead of moving it.
CREATE TABLE notify_deliveries_new (
    id          INTEGER PRIMARY KEY,
    destination TEXT NOT NULL,
    event_seq   INTEGER NOT NULL,
    state       TEXT NOT NULL DEFAULT 'pending',
    attempts    INTEGER NOT NULL DEFAULT 0,
    created_ts  INTEGER NOT NULL,
    next_ts     INTEGER NOT NULL,
    updated_ts  INTEGER NOT NULL,
    last_status INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT NOT NULL DEFAULT ''
);
INSERT INTO notify_deliveries_new (id, destination, event_seq, state, attempts, created_ts, next_ts, updated_ts,
        last_status, last_error)
    SELECT event_seq * 1024 + ROW_NUMBER() OVER (PARTITION BY event_seq ORDER BY id) - 1, destination, event_seq,
        state, attempts, created_ts, next_ts, updated_ts, last_status, last_error
    FROM notify_deliveries;
DROP TABLE notify_deliveries;
ALTER TABLE notify_deliveries_new RENAME TO notify_deliveries;
CREATE INDEX notify_deliveries_pending ON notify_deliveries (destination, id) WHERE state = 'pending';
CREATE INDEX notify_deliveries_dead ON notify_deliveries (destination, id) WHERE state = 'dead';
