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
