-- The schema of core/store/sqlite's migration 017: join tokens carry a
-- cluster, an expiry and a use count; every agent certificate the core
-- signs is recorded, and a revoked one keeps its row (the revocation list,
-- which every replica reads).
ALTER TABLE tokens ADD COLUMN cluster_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN expires_ts TIMESTAMPTZ;
ALTER TABLE tokens ADD COLUMN uses_left INTEGER;

CREATE TABLE agent_certs (
    serial        TEXT COLLATE "C" PRIMARY KEY,
    cluster_id    TEXT COLLATE "C" NOT NULL,
    node_id       TEXT COLLATE "C" NOT NULL,
    not_before    TIMESTAMPTZ NOT NULL,
    not_after     TIMESTAMPTZ NOT NULL,
    issued_ts     TIMESTAMPTZ NOT NULL,
    issued_by     TEXT NOT NULL,
    revoked_ts    TIMESTAMPTZ,
    revoke_reason TEXT NOT NULL DEFAULT '',
    revoked_by    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX agent_certs_node ON agent_certs (node_id, issued_ts);
CREATE INDEX agent_certs_revoked ON agent_certs (serial) WHERE revoked_ts IS NOT NULL;
