-- A node's labels (docs/architecture.md, "Labels, targets and the disruption
-- budget"): the static labels of the core's configuration with the agent's own
-- laid over them, key by key. A JSON object.
ALTER TABLE nodes ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
