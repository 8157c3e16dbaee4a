-- Why discovery holds a node DOWN, as a value the code decides on: 'left',
-- 'failed' or 'duplicate'; '' when discovery does not hold it (the node may
-- still be DOWN, for a reason the orchestrator found). status_reason is the
-- text for people only. Nodes held by discovery before this column existed
-- are recognised once, here, by the texts discovery wrote then.
ALTER TABLE nodes ADD COLUMN down_cause TEXT NOT NULL DEFAULT '';
UPDATE nodes SET down_cause = CASE status_reason
        WHEN 'left' THEN 'left'
        WHEN 'failed' THEN 'failed'
        WHEN 'announced from two addresses' THEN 'duplicate'
        ELSE '' END
    WHERE status = 'DOWN';
