-- Lists of runs read what they show without reading every child or every
-- node (docs/architecture.md, "Runs and playbooks").
--
-- stages_brief holds the stages as stages does, with each stage's node list
-- cut to its first nodes and node_count beside it. It is written with
-- stages; '' (runs stored before this migration) means "read stages".
ALTER TABLE runs ADD COLUMN stages_brief TEXT NOT NULL DEFAULT '';

-- run_child_counts counts a run's children by stage, state, approver and,
-- for CANCELLED children only, state reason: what a run's progress and its
-- errors are worked out from. The triggers below keep it in the same
-- transaction as the children; rows that reach 0 stay (few per run).
CREATE TABLE run_child_counts (
    run_id      TEXT NOT NULL,
    stage       TEXT NOT NULL,
    state       TEXT NOT NULL,
    approved_by TEXT NOT NULL,
    reason      TEXT NOT NULL,
    n           INTEGER NOT NULL,
    PRIMARY KEY (run_id, stage, state, approved_by, reason)
) WITHOUT ROWID;

INSERT INTO run_child_counts (run_id, stage, state, approved_by, reason, n)
SELECT run_id, stage, state, approved_by, CASE WHEN state = 'CANCELLED' THEN state_reason ELSE '' END, COUNT(*)
FROM actions WHERE run_id != '' GROUP BY 1, 2, 3, 4, 5;

CREATE TRIGGER run_child_counts_insert AFTER INSERT ON actions WHEN NEW.run_id != ''
BEGIN
    INSERT INTO run_child_counts (run_id, stage, state, approved_by, reason, n)
    VALUES (NEW.run_id, NEW.stage, NEW.state, NEW.approved_by,
            CASE WHEN NEW.state = 'CANCELLED' THEN NEW.state_reason ELSE '' END, 1)
    ON CONFLICT (run_id, stage, state, approved_by, reason) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER run_child_counts_delete AFTER DELETE ON actions WHEN OLD.run_id != ''
BEGIN
    UPDATE run_child_counts SET n = n - 1
    WHERE run_id = OLD.run_id AND stage = OLD.stage AND state = OLD.state AND approved_by = OLD.approved_by
      AND reason = CASE WHEN OLD.state = 'CANCELLED' THEN OLD.state_reason ELSE '' END;
END;

CREATE TRIGGER run_child_counts_update AFTER UPDATE OF run_id, stage, state, approved_by, state_reason ON actions
WHEN (OLD.run_id != '' OR NEW.run_id != '') AND (
    OLD.run_id != NEW.run_id OR OLD.stage != NEW.stage OR OLD.state != NEW.state
    OR OLD.approved_by != NEW.approved_by
    OR CASE WHEN OLD.state = 'CANCELLED' THEN OLD.state_reason ELSE '' END
       != CASE WHEN NEW.state = 'CANCELLED' THEN NEW.state_reason ELSE '' END)
BEGIN
    UPDATE run_child_counts SET n = n - 1
    WHERE OLD.run_id != '' AND run_id = OLD.run_id AND stage = OLD.stage AND state = OLD.state
      AND approved_by = OLD.approved_by
      AND reason = CASE WHEN OLD.state = 'CANCELLED' THEN OLD.state_reason ELSE '' END;
    INSERT INTO run_child_counts (run_id, stage, state, approved_by, reason, n)
    SELECT NEW.run_id, NEW.stage, NEW.state, NEW.approved_by,
           CASE WHEN NEW.state = 'CANCELLED' THEN NEW.state_reason ELSE '' END, 1
    WHERE NEW.run_id != ''
    ON CONFLICT (run_id, stage, state, approved_by, reason) DO UPDATE SET n = n + 1;
END;
