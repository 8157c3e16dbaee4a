-- Freezes as records (docs/architecture.md, "Policy as data"): made through
-- the API or seeded from the configuration (source 'config'), lifted early
-- with who and why. A lifted freeze stays for its history.
CREATE TABLE freezes (
    id          TEXT NOT NULL PRIMARY KEY,
    cluster_id  TEXT NOT NULL,
    from_ts     INTEGER NOT NULL,
    to_ts       INTEGER NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    source      TEXT NOT NULL DEFAULT '',
    created_by  TEXT NOT NULL DEFAULT '',
    created_ts  INTEGER NOT NULL,
    lifted_ts   INTEGER,
    lifted_by   TEXT NOT NULL DEFAULT '',
    lift_reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX freezes_cluster_to ON freezes (cluster_id, to_ts);
CREATE INDEX freezes_to ON freezes (to_ts);
