-- Join tokens that carry labels (docs/architecture.md, "Installing on a
-- fleet"): the labels a join token gives each node it enrolls, and those
-- an agent certificate was issued with (its join token's, kept by a
-- renewal). The core holds them for the node (nodes.core_labels).
ALTER TABLE tokens ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
ALTER TABLE agent_certs ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
