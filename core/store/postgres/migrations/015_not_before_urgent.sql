-- Windows, freezes and later starts (docs/architecture.md): an action or a
-- run may wait until not_before, and an approver may mark it urgent, with a
-- reason, to pass a closed maintenance window (never a freeze).
ALTER TABLE actions ADD COLUMN not_before TIMESTAMPTZ;
ALTER TABLE actions ADD COLUMN urgent TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN not_before TIMESTAMPTZ;
ALTER TABLE runs ADD COLUMN urgent TEXT NOT NULL DEFAULT '';
