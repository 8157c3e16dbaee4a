-- A run's change sequence and its children's numbers in it:
-- core/store/sqlite's migration 034.
ALTER TABLE runs ADD COLUMN child_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE actions ADD COLUMN run_seq BIGINT NOT NULL DEFAULT 0;
CREATE INDEX actions_run_seq ON actions (run_id, run_seq) WHERE run_id <> '';
