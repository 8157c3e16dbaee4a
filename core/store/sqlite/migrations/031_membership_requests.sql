-- A node that enrolled asking to replace another (docs/architecture.md,
-- "Declared membership"): held until an admin approves it with a replace,
-- which removes the request in the same transaction. One request per node.
CREATE TABLE replace_requests (
    cluster_id   TEXT NOT NULL,
    node_id      TEXT NOT NULL,
    replaces     TEXT NOT NULL,
    token        TEXT NOT NULL DEFAULT '',
    requested_ts INTEGER NOT NULL,
    PRIMARY KEY (cluster_id, node_id)
);

-- A cluster's on_alert playbook (docs/architecture.md, "Declared
-- membership"): its approval (the digest approved, by whom), and the alert
-- it last handled: alerts counts them, alert_since is when the current one
-- began (NULL: none now), missing its missing nodes, run_id the run made
-- for it ('' none) and outcome what became of it.
CREATE TABLE on_alert (
    cluster_id  TEXT NOT NULL PRIMARY KEY,
    digest      TEXT NOT NULL DEFAULT '',
    approved_by TEXT NOT NULL DEFAULT '',
    approved_ts INTEGER,
    alerts      INTEGER NOT NULL DEFAULT 0,
    alert_since INTEGER,
    missing     TEXT NOT NULL DEFAULT '[]',
    run_id      TEXT NOT NULL DEFAULT '',
    outcome     TEXT NOT NULL DEFAULT '',
    updated_ts  INTEGER NOT NULL
);
