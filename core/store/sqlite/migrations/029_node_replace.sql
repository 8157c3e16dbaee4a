-- Replacing a node (docs/architecture.md, "Declared membership"): the labels the core
-- holds for a node over the agent's own (those of the node it replaced), and
-- the declared place it took ('' when it replaced none). A node replaces at
-- most one other in its cluster.
ALTER TABLE nodes ADD COLUMN core_labels TEXT NOT NULL DEFAULT '{}';
ALTER TABLE nodes ADD COLUMN replaces TEXT NOT NULL DEFAULT '';
