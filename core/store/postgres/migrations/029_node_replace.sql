-- The schema of core/store/sqlite's migration 029: the labels the core holds
-- for a node over the agent's own, and the declared place it took by a
-- replace ('' when none).
ALTER TABLE nodes ADD COLUMN core_labels JSONB NOT NULL DEFAULT '{}';
ALTER TABLE nodes ADD COLUMN replaces TEXT NOT NULL DEFAULT '';
