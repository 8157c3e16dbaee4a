-- Runs (one approved operation across many nodes) and their child actions.
CREATE TABLE runs (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT NOT NULL UNIQUE,
    cluster_id       TEXT NOT NULL,
    state            TEXT NOT NULL,
    state_reason     TEXT NOT NULL DEFAULT '',
    requester        TEXT NOT NULL DEFAULT '',
    approved_by      TEXT NOT NULL DEFAULT '',
    playbook         TEXT NOT NULL DEFAULT '',
    playbook_version INTEGER NOT NULL DEFAULT 0,
    digest           TEXT NOT NULL,
    -- The stages as JSON: specs resolved to node lists, and their states.
    stages           TEXT NOT NULL,
    created_ts       INTEGER NOT NULL,
    updated_ts       INTEGER NOT NULL,
    finished_ts      INTEGER
);
CREATE INDEX runs_cluster_state ON runs (cluster_id, state);
CREATE INDEX runs_state_created ON runs (state, created_ts);
CREATE INDEX runs_created ON runs (created_ts, id);

ALTER TABLE actions ADD COLUMN run_id TEXT NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN stage TEXT NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN wave INTEGER NOT NULL DEFAULT 0;
-- A run never has two children for one stage and node: a child is created
-- once, whatever restarts happen between waves.
CREATE UNIQUE INDEX actions_run_child ON actions (run_id, stage, node_id) WHERE run_id != '';

ALTER TABLE events ADD COLUMN run_id TEXT NOT NULL DEFAULT '';
