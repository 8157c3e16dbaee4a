-- A drained node gets no new pushes; what it holds finishes. Set and cleared
-- by people (muster node drain / undrain), never by discovery or a pass.
ALTER TABLE nodes ADD COLUMN drained INTEGER NOT NULL DEFAULT 0;
