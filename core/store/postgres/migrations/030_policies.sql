-- Policy records: core/store/sqlite's migration 030.
CREATE TABLE policies (
    kind          TEXT COLLATE "C" NOT NULL,
    id            TEXT COLLATE "C" NOT NULL,
    cluster_id    TEXT COLLATE "C" NOT NULL DEFAULT '',
    spec          TEXT NOT NULL,
    source        TEXT NOT NULL DEFAULT '',
    reason        TEXT NOT NULL DEFAULT '',
    version       INTEGER NOT NULL,
    created_by    TEXT NOT NULL DEFAULT '',
    created_ts    TIMESTAMPTZ NOT NULL,
    updated_by    TEXT NOT NULL DEFAULT '',
    updated_ts    TIMESTAMPTZ NOT NULL,
    deleted_ts    TIMESTAMPTZ,
    deleted_by    TEXT NOT NULL DEFAULT '',
    delete_reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (kind, id)
);
CREATE TABLE policy_history (
    kind    TEXT COLLATE "C" NOT NULL,
    id      TEXT COLLATE "C" NOT NULL,
    version INTEGER NOT NULL,
    op      TEXT NOT NULL,
    spec    TEXT NOT NULL,
    source  TEXT NOT NULL DEFAULT '',
    actor   TEXT NOT NULL DEFAULT '',
    reason  TEXT NOT NULL DEFAULT '',
    ts      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (kind, id, version)
);
