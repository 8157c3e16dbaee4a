-- Where a playbook version and a schedule came from: core/store/sqlite's
-- migration 032.
ALTER TABLE playbooks ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN source TEXT NOT NULL DEFAULT '';
