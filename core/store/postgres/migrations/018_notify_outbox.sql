-- One outbox row per event and a cursor per destination: core/store/sqlite's
-- migration 023.
CREATE TABLE notify_outbox (
    seq          BIGINT PRIMARY KEY,
    created_ts   TIMESTAMPTZ NOT NULL,
    destinations TEXT COLLATE "C" NOT NULL
);
CREATE TABLE notify_cursors (
    destination     TEXT COLLATE "C" PRIMARY KEY,
    seq             BIGINT NOT NULL,
    last_success_ts TIMESTAMPTZ,
    last_failure_ts TIMESTAMPTZ,
    last_error      TEXT NOT NULL DEFAULT ''
);
INSERT INTO notify_outbox (seq, created_ts, destinations)
    SELECT event_seq, MIN(created_ts), ',' || string_agg(destination, ',' ORDER BY id) || ','
    FROM notify_deliveries GROUP BY event_seq
    HAVING MIN(id) = event_seq * 1024 AND COUNT(*) = MAX(id) - MIN(id) + 1;
DELETE FROM notify_deliveries WHERE NOT EXISTS (SELECT 1 FROM notify_outbox o WHERE o.seq = notify_deliveries.event_seq);
INSERT INTO notify_cursors (destination, seq, last_success_ts, last_failure_ts, last_error)
    SELECT destination, COALESCE(MIN(CASE WHEN state = 'pending' THEN event_seq END) - 1, MAX(event_seq)),
        MAX(CASE WHEN state = 'delivered' THEN updated_ts END), MAX(CASE WHEN last_error <> '' THEN updated_ts END),
        COALESCE((SELECT f.last_error FROM notify_deliveries f WHERE f.destination = d.destination
            AND f.last_error <> '' ORDER BY f.updated_ts DESC, f.id DESC LIMIT 1), '')
    FROM notify_deliveries d GROUP BY destination;
DELETE FROM notify_deliveries WHERE state = 'delivered' AND attempts <= 1
    AND event_seq <= (SELECT c.seq FROM notify_cursors c WHERE c.destination = notify_deliveries.destination);
