-- Procedures (docs/architecture.md, "Runs and playbooks"): a run's child is
-- one step of one stage on one node, in one attempt; an attempt that failed
-- is tried again as a new child. The command's outputs ($MUSTER_OUTPUTS)
-- are kept with the child, as JSON.
ALTER TABLE actions ADD COLUMN step TEXT NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE actions ADD COLUMN outputs TEXT NOT NULL DEFAULT '';
-- A run never has two children for one stage, node, step and attempt: a
-- child is created once, whatever restarts happen between steps.
DROP INDEX actions_run_child;
CREATE UNIQUE INDEX actions_run_child ON actions (run_id, stage, node_id, step, attempt) WHERE run_id != '';
-- A run made by retry names the run whose failed and skipped nodes it retries.
ALTER TABLE runs ADD COLUMN retry_of TEXT NOT NULL DEFAULT '';
-- A run's deadline: its duration, and the moment it falls once the run runs.
ALTER TABLE runs ADD COLUMN deadline_s INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN deadline_ts INTEGER;
