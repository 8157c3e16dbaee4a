-- Agent enrollment (core/enroll): join tokens carry a cluster, an expiry and
-- a use count; every agent certificate the core signs is recorded, and a
-- revoked one keeps its row (the revocation list). Times are microseconds
-- since the epoch, as everywhere here.
ALTER TABLE tokens ADD COLUMN cluster_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN expires_ts INTEGER;
ALTER TABLE tokens ADD COLUMN uses_left INTEGER;

CREATE TABLE agent_certs (
    serial        TEXT PRIMARY KEY,
    cluster_id    TEXT NOT NULL,
    node_id       TEXT NOT NULL,
    not_before    INTEGER NOT NULL,
    not_after     INTEGER NOT NULL,
    issued_ts     INTEGER NOT NULL,
    issued_by     TEXT NOT NULL,
    revoked_ts    INTEGER,
    revoke_reason TEXT NOT NULL DEFAULT '',
    revoked_by    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX agent_certs_node ON agent_certs (node_id, issued_ts);
CREATE INDEX agent_certs_revoked ON agent_certs (serial) WHERE revoked_ts IS NOT NULL;
