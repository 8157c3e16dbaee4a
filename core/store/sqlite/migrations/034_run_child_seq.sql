-- Run advances read only what changed (docs/architecture.md, "Runs and
-- playbooks"): every write of a run's child takes the next number of its
-- run (runs.child_seq, taken in the child's own transaction, so the writers
-- of one run are serialized by the run's row and its numbers commit in
-- order) and stores it on the child (actions.run_seq). An advancer that
-- knows a run's children up to a number reads only those written after it
-- (Reader.RunChildrenSince). Children written before this migration keep 0:
-- a full read sees them, and their next write numbers them.
ALTER TABLE runs ADD COLUMN child_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE actions ADD COLUMN run_seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX actions_run_seq ON actions (run_id, run_seq) WHERE run_id != '';
