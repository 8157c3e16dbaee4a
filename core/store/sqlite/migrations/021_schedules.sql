-- Approved schedules (docs/architecture.md, "Windows and schedules"): a
-- playbook started on a cron expression, approved once. last_occurrence_ts
-- is the latest occurrence handled, so no replica handles one twice.
CREATE TABLE schedules (
    id                 TEXT NOT NULL PRIMARY KEY,
    name               TEXT NOT NULL UNIQUE,
    cluster_id         TEXT NOT NULL,
    playbook           TEXT NOT NULL,
    version            INTEGER NOT NULL DEFAULT 0,
    params             TEXT NOT NULL DEFAULT '{}',
    cron               TEXT NOT NULL,
    timezone           TEXT NOT NULL DEFAULT '',
    concurrency        TEXT NOT NULL,
    catch_up_s         INTEGER NOT NULL,
    state              TEXT NOT NULL,
    state_reason       TEXT NOT NULL DEFAULT '',
    requester          TEXT NOT NULL DEFAULT '',
    digest             TEXT NOT NULL,
    approved_by        TEXT NOT NULL DEFAULT '',
    approved_digest    TEXT NOT NULL DEFAULT '',
    approved_version   INTEGER NOT NULL DEFAULT 0,
    active_since_ts    INTEGER,
    last_occurrence_ts INTEGER,
    created_ts         INTEGER NOT NULL,
    updated_ts         INTEGER NOT NULL
);
-- A run made by a schedule's occurrence names it; its id derives from the
-- schedule and the occurrence, so the primary key makes one run per
-- occurrence.
ALTER TABLE runs ADD COLUMN schedule_id TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_schedule ON runs (schedule_id, created_ts) WHERE schedule_id != '';
