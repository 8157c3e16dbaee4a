-- Replace requests made at enrollment: core/store/sqlite's migration 031.
CREATE TABLE replace_requests (
    cluster_id   TEXT COLLATE "C" NOT NULL,
    node_id      TEXT COLLATE "C" NOT NULL,
    replaces     TEXT COLLATE "C" NOT NULL,
    token        TEXT NOT NULL DEFAULT '',
    requested_ts TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (cluster_id, node_id)
);
