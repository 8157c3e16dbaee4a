-- A drained node gets no new pushes; what it holds finishes. Set and cleared
-- by people (muster node drain / undrain), never by discovery or a pass.
ALTER TABLE nodes ADD COLUMN drained INTEGER NOT NULL DEFAULT 0;

-- Retention deletes finished actions oldest change first, in small batches:
-- this index holds the finished ones only, in that order.
CREATE INDEX actions_finished ON actions (updated_ts, seq)
    WHERE state IN ('DONE', 'FAILED', 'CANCELLED', 'LOST');
