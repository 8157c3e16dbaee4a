-- A token's web UI sessions are counted and ended together (a cap per
-- token, revocation); sessions of tokens revoked before now go.
CREATE INDEX ui_sessions_token ON ui_sessions (token_hash, created_ts);
DELETE FROM ui_sessions WHERE token_hash NOT IN (SELECT hash FROM tokens);
