-- The schema of core/store/sqlite's migration 005: a node's labels (the
-- static ones with the agent's own laid over them), a JSON object.
ALTER TABLE nodes ADD COLUMN labels JSONB NOT NULL DEFAULT '{}';
