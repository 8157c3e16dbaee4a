-- Playbooks: every applied version of each, as the document that was applied.
CREATE TABLE playbooks (
    name        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    document    TEXT NOT NULL,
    digest      TEXT NOT NULL,
    created_by  TEXT NOT NULL DEFAULT '',
    created_ts  INTEGER NOT NULL,
    PRIMARY KEY (name, version)
);
