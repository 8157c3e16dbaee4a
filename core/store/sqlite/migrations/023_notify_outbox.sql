-- One outbox row per event, whatever the number of its destinations, and a
-- cursor per destination (docs/notifications.md, "Cost"): every delivery to
-- a destination of an event up to its cursor is delivered, unless a row of
-- its own in notify_deliveries says otherwise. Only deliveries retried,
-- dead or redelivered keep such a row. An outbox row's destinations are
-- their names between commas, in rank order (store.DeliveryID).
CREATE TABLE notify_outbox (
    seq          INTEGER PRIMARY KEY,
    created_ts   INTEGER NOT NULL,
    destinations TEXT NOT NULL
);
CREATE TABLE notify_cursors (
    destination     TEXT PRIMARY KEY,
    seq             INTEGER NOT NULL,
    last_success_ts INTEGER,
    last_failure_ts INTEGER,
    last_error      TEXT NOT NULL DEFAULT ''
);
-- The events whose deliveries are all still stored (a purge may have cut
-- the oldest one short), their destinations by rank.
INSERT INTO notify_outbox (seq, created_ts, destinations)
    SELECT event_seq, MIN(created_ts), ',' || group_concat(destination, ',' ORDER BY id) || ','
    FROM notify_deliveries GROUP BY event_seq
    HAVING MIN(id) = event_seq * 1024 AND COUNT(*) = MAX(id) - MIN(id) + 1;
DELETE FROM notify_deliveries WHERE NOT EXISTS (SELECT 1 FROM notify_outbox o WHERE o.seq = notify_deliveries.event_seq);
INSERT INTO notify_cursors (destination, seq, last_success_ts, last_failure_ts, last_error)
    SELECT destination, COALESCE(MIN(CASE WHEN state = 'pending' THEN event_seq END) - 1, MAX(event_seq)),
        MAX(CASE WHEN state = 'delivered' THEN updated_ts END), MAX(CASE WHEN last_error != '' THEN updated_ts END),
        COALESCE((SELECT f.last_error FROM notify_deliveries f WHERE f.destination = d.destination
            AND f.last_error != '' ORDER BY f.updated_ts DESC, f.id DESC LIMIT 1), '')
    FROM notify_deliveries d GROUP BY destination;
-- Deliveries delivered at their first try, up to their cursor, need no row.
DELETE FROM notify_deliveries WHERE state = 'delivered' AND attempts <= 1
    AND event_seq <= (SELECT c.seq FROM notify_cursors c WHERE c.destination = notify_deliveries.destination);
