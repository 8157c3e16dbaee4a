-- Replace requests made at enrollment: core/store/sqlite's migration 031.
CREATE TABLE replace_requests (
    cluster_id   TEXT COLLATE "C" NOT NULL,
    node_id      TEXT COLLATE "C" NOT NULL,
    replaces     TEXT COLLATE "C" NOT NULL,
    token        TEXT NOT NULL DEFAULT '',
    requested_ts TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (cluster_id, node_id)
);

-- A cluster's on_alert playbook: core/store/sqlite's migration 031.
CREATE TABLE on_alert (
    cluster_id  TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    digest      TEXT NOT NULL DEFAULT '',
    approved_by TEXT NOT NULL DEFAULT '',
    approved_ts TIMESTAMPTZ,
    alerts      INTEGER NOT NULL DEFAULT 0,
    alert_since TIMESTAMPTZ,
    missing     TEXT NOT NULL DEFAULT '[]',
    run_id      TEXT NOT NULL DEFAULT '',
    outcome     TEXT NOT NULL DEFAULT '',
    updated_ts  TIMESTAMPTZ NOT NULL
);
