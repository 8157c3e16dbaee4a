-- The agent's durable action queue.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

-- One row: the change sequence bumped by every write, and what the core acknowledged.
CREATE TABLE counters (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    change_seq INTEGER NOT NULL,
    acked_seq  INTEGER NOT NULL
) STRICT;
INSERT INTO counters (id, change_seq, acked_seq) VALUES (1, 0, 0);

CREATE TABLE actions (
    accept_seq       INTEGER PRIMARY KEY AUTOINCREMENT, -- the order the agent accepted them
    id               TEXT    NOT NULL UNIQUE,
    cluster_id       TEXT    NOT NULL,
    node_id          TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    args             TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    state_reason     TEXT    NOT NULL DEFAULT '',
    progress         TEXT    NOT NULL DEFAULT '{}',
    output           TEXT    NOT NULL DEFAULT '',
    origin           TEXT    NOT NULL,
    requester        TEXT    NOT NULL DEFAULT '',
    approved_by      TEXT    NOT NULL DEFAULT '',
    timeout_s        INTEGER NOT NULL,
    created_us       INTEGER NOT NULL,
    scheduled_us     INTEGER,
    started_us       INTEGER,
    finished_us      INTEGER,
    updated_us       INTEGER NOT NULL,
    change_seq       INTEGER NOT NULL,
    cancel_requested INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX actions_by_change ON actions (change_seq);
CREATE INDEX actions_by_queue ON actions (state, created_us, accept_seq);
CREATE INDEX actions_by_finish ON actions (finished_us) WHERE finished_us IS NOT NULL;
-- Guarantee 2, held by the database itself: at most one RUNNING action.
CREATE UNIQUE INDEX actions_one_running ON actions (state) WHERE state = 'RUNNING';

CREATE TABLE history (
    action_id  TEXT    NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
    ts_us      INTEGER NOT NULL,
    from_state TEXT    NOT NULL,
    to_state   TEXT    NOT NULL,
    actor      TEXT    NOT NULL,
    reason     TEXT    NOT NULL
) STRICT;
CREATE INDEX history_by_action ON history (action_id);

-- Guarantee 4: an id once accepted is never run again, even after its record is purged.
CREATE TABLE tombstones (
    id          TEXT    PRIMARY KEY,
    state       TEXT    NOT NULL,
    finished_us INTEGER NOT NULL,
    purged_us   INTEGER NOT NULL
) STRICT;
CREATE INDEX tombstones_by_purge ON tombstones (purged_us);
