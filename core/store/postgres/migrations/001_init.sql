-- The schema of core/store/sqlite (its migrations 001 and 002) in
-- PostgreSQL's types. Text that is sorted or compared by prefix uses the C
-- collation: byte order, as in SQLite. JSON the record carried (args,
-- progress) is kept as the raw text, so its approval digest never changes.

CREATE TABLE clusters (
    id            TEXT COLLATE "C" PRIMARY KEY,
    status        TEXT NOT NULL,
    status_reason TEXT NOT NULL DEFAULT '',
    updated_ts    TIMESTAMPTZ NOT NULL
);

CREATE TABLE nodes (
    cluster_id    TEXT COLLATE "C" NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    id            TEXT COLLATE "C" NOT NULL,
    addr          TEXT NOT NULL,
    source        TEXT NOT NULL,
    status        TEXT NOT NULL,
    status_reason TEXT NOT NULL DEFAULT '',
    store_id      TEXT NOT NULL DEFAULT '',
    cursor        BIGINT NOT NULL DEFAULT 0,
    kinds         TEXT[] NOT NULL DEFAULT '{}',
    version       TEXT NOT NULL DEFAULT '',
    last_contact  TIMESTAMPTZ,
    updated_ts    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (cluster_id, id)
);

CREATE TABLE actions (
    -- seq is the insertion order: the tie-breaker of creation order.
    seq              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id               TEXT COLLATE "C" NOT NULL UNIQUE,
    cluster_id       TEXT COLLATE "C" NOT NULL,
    node_id          TEXT COLLATE "C" NOT NULL,
    kind             TEXT COLLATE "C" NOT NULL,
    args             TEXT NOT NULL DEFAULT '',
    state            TEXT COLLATE "C" NOT NULL,
    state_reason     TEXT NOT NULL DEFAULT '',
    progress         TEXT NOT NULL DEFAULT '',
    output           TEXT NOT NULL DEFAULT '',
    origin           TEXT NOT NULL,
    requester        TEXT NOT NULL DEFAULT '',
    approved_by      TEXT NOT NULL DEFAULT '',
    timeout_s        INTEGER NOT NULL DEFAULT 0,
    created_ts       TIMESTAMPTZ NOT NULL,
    scheduled_ts     TIMESTAMPTZ,
    started_ts       TIMESTAMPTZ,
    finished_ts      TIMESTAMPTZ,
    updated_ts       TIMESTAMPTZ NOT NULL,
    retry_of         TEXT NOT NULL DEFAULT '',
    approval_digest  TEXT NOT NULL DEFAULT '',
    cancel_requested BOOLEAN NOT NULL DEFAULT false,
    seen_on_agent    BOOLEAN NOT NULL DEFAULT false,
    pushed_store_id  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX actions_node_state ON actions (cluster_id, node_id, state, created_ts, seq);
CREATE INDEX actions_state_created ON actions (state, created_ts, seq);
CREATE INDEX actions_created ON actions (created_ts, id);

CREATE TABLE action_history (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action_id  TEXT COLLATE "C" NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
    ts         TIMESTAMPTZ NOT NULL,
    from_state TEXT NOT NULL,
    to_state   TEXT NOT NULL,
    actor      TEXT NOT NULL,
    reason     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX action_history_action ON action_history (action_id, seq);

-- Events are numbered in commit order: a transaction takes an advisory lock
-- before it draws its first number and holds it until it ends (see
-- appendEvent), so a reader that saw event n never sees a smaller one later.
CREATE TABLE events (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts          TIMESTAMPTZ NOT NULL,
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
    name       TEXT COLLATE "C" PRIMARY KEY,
    roles      TEXT[] NOT NULL,
    hash       TEXT NOT NULL UNIQUE,
    created_ts TIMESTAMPTZ NOT NULL
);
