-- Who drained a node and why (muster node drain --reason); empty when the
-- node is not drained.
ALTER TABLE nodes ADD COLUMN drained_by TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN drain_reason TEXT NOT NULL DEFAULT '';
