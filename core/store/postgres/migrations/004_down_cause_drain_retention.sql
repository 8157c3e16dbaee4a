-- The schema of core/store/sqlite's migrations 003 (why discovery holds a
-- node DOWN, apart from the reason text) and 004 (drained nodes, and the
-- index retention deletes finished actions by).

ALTER TABLE nodes ADD COLUMN down_cause TEXT NOT NULL DEFAULT '';
UPDATE nodes SET down_cause = CASE status_reason
        WHEN 'left' THEN 'left'
        WHEN 'failed' THEN 'failed'
        WHEN 'announced from two addresses' THEN 'duplicate'
        ELSE '' END
    WHERE status = 'DOWN';

ALTER TABLE nodes ADD COLUMN drained BOOLEAN NOT NULL DEFAULT FALSE;

CREATE INDEX actions_finished ON actions (updated_ts, seq)
    WHERE state IN ('DONE', 'FAILED', 'CANCELLED', 'LOST');
