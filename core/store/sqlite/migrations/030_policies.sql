-- Policy records (docs/policy-as-data.md): windows, budgets and approval
-- rules made through the API, by muster apply or seeded from the
-- configuration (source 'config'), each change a row of policy_history. A
-- deleted record stays, with who deleted it and why.
CREATE TABLE policies (
    kind          TEXT NOT NULL,
    id            TEXT NOT NULL,
    cluster_id    TEXT NOT NULL DEFAULT '',
    spec          TEXT NOT NULL,
    source        TEXT NOT NULL DEFAULT '',
    reason        TEXT NOT NULL DEFAULT '',
    version       INTEGER NOT NULL,
    created_by    TEXT NOT NULL DEFAULT '',
    created_ts    INTEGER NOT NULL,
    updated_by    TEXT NOT NULL DEFAULT '',
    updated_ts    INTEGER NOT NULL,
    deleted_ts    INTEGER,
    deleted_by    TEXT NOT NULL DEFAULT '',
    delete_reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (kind, id)
);
CREATE TABLE policy_history (
    kind    TEXT NOT NULL,
    id      TEXT NOT NULL,
    version INTEGER NOT NULL,
    op      TEXT NOT NULL,
    spec    TEXT NOT NULL,
    source  TEXT NOT NULL DEFAULT '',
    actor   TEXT NOT NULL DEFAULT '',
    reason  TEXT NOT NULL DEFAULT '',
    ts      INTEGER NOT NULL,
    PRIMARY KEY (kind, id, version)
);
