-- Single sign-on (docs/architecture.md, "Single sign-on"). A web UI session
-- of a person names them, their group claims (a JSON array) and their ID
-- token's expiry; token_hash then holds 'person:' and the lowercased name,
-- so a person's sessions are counted together.
ALTER TABLE ui_sessions ADD COLUMN person TEXT NOT NULL DEFAULT '';
ALTER TABLE ui_sessions ADD COLUMN groups TEXT NOT NULL DEFAULT '[]';
ALTER TABLE ui_sessions ADD COLUMN id_expires_ts INTEGER;
