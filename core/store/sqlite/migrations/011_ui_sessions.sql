-- Web UI sessions (core/ui): the SHA-256 of each session id, never the id,
-- the hash of the token it signed in with, its CSRF token and its expiry
-- (microseconds since the epoch, as every time here).
CREATE TABLE ui_sessions (
    hash       TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    csrf       TEXT NOT NULL,
    created_ts INTEGER NOT NULL,
    expires_ts INTEGER NOT NULL
);
CREATE INDEX ui_sessions_expires ON ui_sessions (expires_ts);
