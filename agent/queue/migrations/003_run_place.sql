-- A run's child keeps its place in its run, as the core pushed it: the run,
-- its stage, step (within a stage of steps), wave and attempt. Empty (and 0)
-- for an action of no run, and for one a core of an earlier release pushed.
-- Not content: a push of the same id and content with another place is the
-- same action.
ALTER TABLE actions ADD COLUMN run_id  TEXT    NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN stage   TEXT    NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN step    TEXT    NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN wave    INTEGER NOT NULL DEFAULT 0;
ALTER TABLE actions ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
