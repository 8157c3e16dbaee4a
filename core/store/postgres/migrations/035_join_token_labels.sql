-- The schema of core/store/sqlite's migration 035: the labels a join token
-- gives each node it enrolls, and those an agent certificate was issued
-- with (its join token's, kept by a renewal).
ALTER TABLE tokens ADD COLUMN labels JSONB NOT NULL DEFAULT '{}';
ALTER TABLE agent_certs ADD COLUMN labels JSONB NOT NULL DEFAULT '{}';
