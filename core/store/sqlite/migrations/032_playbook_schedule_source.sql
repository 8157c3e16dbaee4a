-- Where a playbook version and a schedule came from (docs/policy-as-data.md):
-- 'file:NAME' when muster apply -f NAME made it, '' when made by hand.
-- Apply deletes only the schedules of the same file that it no longer
-- declares, and never a playbook version (runs and schedules refer to them).
ALTER TABLE playbooks ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN source TEXT NOT NULL DEFAULT '';
