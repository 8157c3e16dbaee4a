-- Times are integer microseconds since the Unix epoch, UTC; NULL for an unset
-- optional time. JSON columns hold the raw text the record carried.

CREATE TABLE clusters (
    id            TEXT PRIMARY KEY,
    status        TEXT NOT NULL,
    status_reason TEXT NOT NULL DEFAULT '',
    updated_ts    INTEGER NOT NULL
);

CREATE TABLE nodes (
    cluster_id    TEXT NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    id            TEXT NOT NULL,
    addr          TEXT NOT NULL,
    source        TEXT NOT NULL,
    status        TEXT NOT NULL,
    status_reason TEXT NOT NULL DEFAULT '',
    store_id      TEXT NOT NULL DEFAULT '',
    cursor        INTEGER NOT NULL DEFAULT 0,
    kinds         TEXT NOT NULL DEFAULT '[]',
    version       TEXT NOT NULL DEFAULT '',
    last_contact  INTEGER,
    updated_ts    INTEGER NOT NULL,
    PRIMARY KEY (cluster_id, id)
);

CREATE TABLE actions (
    -- seq is the insertion order: the tie-breaker of creation order.
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT NOT NULL UNIQUE,
    cluster_id       TEXT NOT NULL,
    node_id          TEXT NOT NULL,
    kind             TEXT NOT NULL,
    args             TEXT NOT NULL DEFAULT '',
    state            TEXT NOT NULL,
    state_reason     TEXT NOT NULL DEFAULT '',
    progress         TEXT NOT NULL DEFAULT '',
    output           TEXT NOT NULL DEFAULT '',
    origin           TEXT NOT NULL,
    requester        TEXT NOT NULL DEFAULT '',
    approved_by      TEXT NOT NULL DEFAULT '',
    timeout_s        INTEGER NOT NULL DEFAULT 0,
    created_ts       INTEGER NOT NULL,
    scheduled_ts     INTEGER,
    started_ts       INTEGER,
    finished_ts      INTEGER,
    updated_ts       INTEGER NOT NULL,
    retry_of         TEXT NOT NULL DEFAULT '',
    approval_digest  TEXT NOT NULL DEFAULT '',
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    seen_on_agent    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX actions_node_state ON actions (cluster_id, node_id, state, created_ts, seq);
CREATE INDEX actions_state_created ON actions (state, created_ts, seq);
CREATE INDEX actions_created ON actions (created_ts, id);

CREATE TABLE action_history (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    action_id  TEXT NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
    ts         INTEGER NOT NULL,
    from_state TEXT NOT NULL,
    to_state   TEXT NOT NULL,
    actor      TEXT NOT NULL,
    reason     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX action_history_action ON action_history (action_id, seq);

CREATE TABLE events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    ts          INTEGER NOT NULL,
    type        TEXT NOT NULL,
    actor       TEXT NOT NULL,
    client_addr TEXT NOT NULL DEFAULT '',
    cluster_id  TEXT NOT NULL DEFAULT '',
    node_id     TEXT NOT NULL DEFAULT '',
    action_id   TEXT NOT NULL DEFAULT '',
    message     TEXT NOT NULL DEFAULT '',
    data        TEXT NOT NULL DEFAULT ''
);

CREATE TABLE tokens (
    name       TEXT PRIMARY KEY,
    roles      TEXT NOT NULL,
    hash       TEXT NOT NULL UNIQUE,
    created_ts INTEGER NOT NULL
);
