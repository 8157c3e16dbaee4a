-- Approved schedules: core/store/sqlite's migration 021.
CREATE TABLE schedules (
    id                 TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    name               TEXT COLLATE "C" NOT NULL UNIQUE,
    cluster_id         TEXT COLLATE "C" NOT NULL,
    playbook           TEXT COLLATE "C" NOT NULL,
    version            INTEGER NOT NULL DEFAULT 0,
    params             TEXT NOT NULL DEFAULT '{}',
    cron               TEXT NOT NULL,
    timezone           TEXT NOT NULL DEFAULT '',
    concurrency        TEXT NOT NULL,
    catch_up_s         INTEGER NOT NULL,
    state              TEXT COLLATE "C" NOT NULL,
    state_reason       TEXT NOT NULL DEFAULT '',
    requester          TEXT NOT NULL DEFAULT '',
    digest             TEXT NOT NULL,
    approved_by        TEXT NOT NULL DEFAULT '',
    approved_digest    TEXT NOT NULL DEFAULT '',
    approved_version   INTEGER NOT NULL DEFAULT 0,
    active_since_ts    TIMESTAMPTZ,
    last_occurrence_ts TIMESTAMPTZ,
    created_ts         TIMESTAMPTZ NOT NULL,
    updated_ts         TIMESTAMPTZ NOT NULL
);
ALTER TABLE runs ADD COLUMN schedule_id TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX runs_schedule ON runs (schedule_id, created_ts) WHERE schedule_id <> '';
