-- Approvals recorded per level: core/store/sqlite's migration 025.
CREATE TABLE approvals (
    subject_kind TEXT COLLATE "C" NOT NULL,
    subject_id   TEXT COLLATE "C" NOT NULL,
    digest       TEXT COLLATE "C" NOT NULL,
    person       TEXT NOT NULL,
    level        TEXT NOT NULL,
    decided_ts   TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX approvals_once ON approvals (subject_kind, subject_id, digest, lower(person));
