-- A node's labels (DESIGN.md §9): the static labels of the core's
-- configuration with the agent's own laid over them, key by key. A JSON object.
ALTER TABLE nodes ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
