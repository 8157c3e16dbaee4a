-- A leaner notification outbox: core/store/sqlite's migration 022. A
-- delivery's id is its event's seq times 1024 plus its rank among the
-- event's destinations (store.DeliveryID); the queue index holds the
-- pending deliveries alone; no index on creation time.
CREATE TABLE notify_deliveries_new (
    id          BIGINT PRIMARY KEY,
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
INSERT INTO notify_deliveries_new (id, destination, event_seq, state, attempts, created_ts, next_ts, updated_ts,
        last_status, last_error)
    SELECT event_seq * 1024 + ROW_NUMBER() OVER (PARTITION BY event_seq ORDER BY id) - 1, destination, event_seq,
        state, attempts, created_ts, next_ts, updated_ts, last_status, last_error
    FROM notify_deliveries;
DROP TABLE notify_deliveries;
ALTER TABLE notify_deliveries_new RENAME TO notify_deliveries;
ALTER INDEX notify_deliveries_new_pkey RENAME TO notify_deliveries_pkey;
CREATE INDEX notify_deliveries_pending ON notify_deliveries (destination, id) WHERE state = 'pending';
CREATE INDEX notify_deliveries_dead ON notify_deliveries (destination, id) WHERE state = 'dead';
