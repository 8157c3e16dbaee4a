-- The agent database (its store_id) a push of the action was last attempted
-- to, recorded before the push is sent: an action whose answer was lost and
-- whose agent database was then replaced is LOST, never pushed again.
ALTER TABLE actions ADD COLUMN pushed_store_id TEXT NOT NULL DEFAULT '';
