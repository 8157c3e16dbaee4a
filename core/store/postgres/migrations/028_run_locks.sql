-- Locks across runs (docs/architecture.md, "Runs and playbooks"): a run or
-- a stage may take a lock by name, per cluster or global; the run's own is
-- kept as JSON text ('' for none). run_locks holds who has each lock now:
-- its key ("cluster/CLUSTER/NAME" or "global/NAME"), the run and the stage
-- ('' for the run itself) holding it, taken in the transaction that
-- advances the run and released in the one that ends it. Two replicas
-- taking one lock at once: the primary key serializes them.
ALTER TABLE runs ADD COLUMN run_lock TEXT NOT NULL DEFAULT '';
CREATE TABLE run_locks (
    lock_key TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    run_id   TEXT COLLATE "C" NOT NULL,
    stage    TEXT COLLATE "C" NOT NULL DEFAULT '',
    taken_ts TIMESTAMPTZ NOT NULL
);
CREATE INDEX run_locks_run ON run_locks (run_id);
