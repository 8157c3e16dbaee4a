-- What an action's command passed on through $MUSTER_OUTPUTS: a JSON object
-- of strings, or '' for none.
ALTER TABLE actions ADD COLUMN outputs TEXT NOT NULL DEFAULT '';
