-- The notification outbox (docs/notifications.md): one row per event and
-- destination, written in the transaction of the event. Times are
-- microseconds since the Unix epoch.
CREATE TABLE notify_deliveries (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
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
CREATE INDEX notify_deliveries_queue ON notify_deliveries (destination, state, id);
CREATE INDEX notify_deliveries_created ON notify_deliveries (created_ts);
