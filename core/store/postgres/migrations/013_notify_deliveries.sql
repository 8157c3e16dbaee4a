-- The notification outbox (docs/notifications.md): one row per event and
-- destination, written in the transaction of the event.
CREATE TABLE notify_deliveries (
    id          BIGSERIAL PRIMARY KEY,
    destination TEXT COLLATE "C" NOT NULL,
    event_seq   BIGINT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'pending',
    attempts    INTEGER NOT NULL DEFAULT 0,
    created_ts  TIMESTAMPTZ NOT NULL,
    next_ts     TIMESTAMPTZ NOT NULL,
    updated_ts  TIMESTAMPTZ NOT NULL,
    last_status INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX notify_deliveries_queue ON notify_deliveries (destination, state, id);
CREATE INDEX notify_deliveries_created ON notify_deliveries (created_ts);
