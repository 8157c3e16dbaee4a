-- Web UI sessions (core/ui), shared by every replica: the SHA-256 of each
-- session id, never the id, the hash of the token it signed in with, its
-- CSRF token and its expiry.
CREATE TABLE ui_sessions (
    hash       TEXT COLLATE "C" PRIMARY KEY,
    token_hash TEXT COLLATE "C" NOT NULL,
    csrf       TEXT NOT NULL,
    created_ts TIMESTAMPTZ NOT NULL,
    expires_ts TIMESTAMPTZ NOT NULL
);
CREATE INDEX ui_sessions_expires ON ui_sessions (expires_ts);
