-- Windows, freezes and later starts (docs/architecture.md): an action or a
-- run may wait until not_before (microseconds since the epoch), and an
-- approver may mark it urgent, with a reason, to pass a closed maintenance
-- window (never a freeze).
ALTER TABLE actions ADD COLUMN not_before INTEGER;
ALTER TABLE actions ADD COLUMN urgent TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN not_before INTEGER;
ALTER TABLE runs ADD COLUMN urgent TEXT NOT NULL DEFAULT '';
