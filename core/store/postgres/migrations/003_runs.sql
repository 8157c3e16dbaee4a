-- The schema of core/store/sqlite's migrations 006 (token names unique
-- ignoring case), 009 (runs) and 010 (playbooks).

-- Names are ASCII (core/auth), where lower() is exact.
CREATE UNIQUE INDEX tokens_name_nocase ON tokens (lower(name));

CREATE TABLE runs (
    seq              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id               TEXT COLLATE "C" NOT NULL UNIQUE,
    cluster_id       TEXT COLLATE "C" NOT NULL,
    state            TEXT COLLATE "C" NOT NULL,
    state_reason     TEXT NOT NULL DEFAULT '',
    requester        TEXT NOT NULL DEFAULT '',
    approved_by      TEXT NOT NULL DEFAULT '',
    playbook         TEXT NOT NULL DEFAULT '',
    playbook_version INTEGER NOT NULL DEFAULT 0,
    digest           TEXT NOT NULL,
    -- The stages as JSON text: specs resolved to node lists, and their states.
    stages           TEXT NOT NULL,
    created_ts       TIMESTAMPTZ NOT NULL,
    updated_ts       TIMESTAMPTZ NOT NULL,
    finished_ts      TIMESTAMPTZ
);
CREATE INDEX runs_cluster_state ON runs (cluster_id, state);
CREATE INDEX runs_state_created ON runs (state, created_ts);
CREATE INDEX runs_created ON runs (created_ts, id);

ALTER TABLE actions ADD COLUMN run_id TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN stage TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN wave INTEGER NOT NULL DEFAULT 0;
-- A run never has two children for one stage and node.
CREATE UNIQUE INDEX actions_run_child ON actions (run_id, stage, node_id) WHERE run_id <> '';

ALTER TABLE events ADD COLUMN run_id TEXT NOT NULL DEFAULT '';

CREATE TABLE playbooks (
    name        TEXT COLLATE "C" NOT NULL,
    version     INTEGER NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    document    TEXT NOT NULL,
    digest      TEXT NOT NULL,
    created_by  TEXT NOT NULL DEFAULT '',
    created_ts  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (name, version)
);
