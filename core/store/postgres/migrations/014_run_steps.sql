-- Procedures: a run's child is one step of one stage on one node, in one
-- attempt; the command's outputs are kept with the child, as JSON.
ALTER TABLE actions ADD COLUMN step TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE actions ADD COLUMN outputs TEXT NOT NULL DEFAULT '';
-- A run never has two children for one stage, node, step and attempt.
DROP INDEX actions_run_child;
CREATE UNIQUE INDEX actions_run_child ON actions (run_id, stage, node_id, step, attempt) WHERE run_id <> '';
-- A run made by retry names the run whose failed and skipped nodes it retries.
ALTER TABLE runs ADD COLUMN retry_of TEXT NOT NULL DEFAULT '';
-- A run's deadline: its duration, and the moment it falls once the run runs.
ALTER TABLE runs ADD COLUMN deadline_s INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN deadline_ts TIMESTAMPTZ;
