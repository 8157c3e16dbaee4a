-- The schema of core/store/sqlite's migration 012: runs' brief stages, and
-- their children counted by stage, state, approver and (CANCELLED only)
-- reason, kept by a trigger in the children's transaction.
ALTER TABLE runs ADD COLUMN stages_brief TEXT NOT NULL DEFAULT '';

CREATE TABLE run_child_counts (
    run_id      TEXT COLLATE "C" NOT NULL,
    stage       TEXT COLLATE "C" NOT NULL,
    state       TEXT COLLATE "C" NOT NULL,
    approved_by TEXT NOT NULL,
    reason      TEXT NOT NULL,
    n           BIGINT NOT NULL,
    PRIMARY KEY (run_id, stage, state, approved_by, reason)
);

INSERT INTO run_child_counts (run_id, stage, state, approved_by, reason, n)
SELECT run_id, stage, state, approved_by, CASE WHEN state = 'CANCELLED' THEN state_reason ELSE '' END, COUNT(*)
FROM actions WHERE run_id <> '' GROUP BY 1, 2, 3, 4, 5;

CREATE FUNCTION run_child_counts_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.run_id <> '' THEN
        IF TG_OP = 'UPDATE' AND OLD.run_id = NEW.run_id AND OLD.stage = NEW.stage AND OLD.state = NEW.state
           AND OLD.approved_by = NEW.approved_by
           AND (OLD.state <> 'CANCELLED' OR OLD.state_reason = NEW.state_reason) THEN
            RETURN NULL; -- the same count
        END IF;
        UPDATE run_child_counts SET n = n - 1
        WHERE run_id = OLD.run_id AND stage = OLD.stage AND state = OLD.state AND approved_by = OLD.approved_by
          AND reason = CASE WHEN OLD.state = 'CANCELLED' THEN OLD.state_reason ELSE '' END;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.run_id <> '' THEN
        INSERT INTO run_child_counts (run_id, stage, state, approved_by, reason, n)
        VALUES (NEW.run_id, NEW.stage, NEW.state, NEW.approved_by,
                CASE WHEN NEW.state = 'CANCELLED' THEN NEW.state_reason ELSE '' END, 1)
        ON CONFLICT (run_id, stage, state, approved_by, reason) DO UPDATE SET n = run_child_counts.n + 1;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER run_child_counts_keep AFTER INSERT OR UPDATE OR DELETE ON actions
FOR EACH ROW EXECUTE FUNCTION run_child_counts_keep();
