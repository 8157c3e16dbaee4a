-- Freezes as records: core/store/sqlite's migration 027.
CREATE TABLE freezes (
    id          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    cluster_id  TEXT COLLATE "C" NOT NULL,
    from_ts     TIMESTAMPTZ NOT NULL,
    to_ts       TIMESTAMPTZ NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    source      TEXT NOT NULL DEFAULT '',
    created_by  TEXT NOT NULL DEFAULT '',
    created_ts  TIMESTAMPTZ NOT NULL,
    lifted_ts   TIMESTAMPTZ,
    lifted_by   TEXT NOT NULL DEFAULT '',
    lift_reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX freezes_cluster_to ON freezes (cluster_id, to_ts);
CREATE INDEX freezes_to ON freezes (to_ts);
