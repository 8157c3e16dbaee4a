-- Approvals recorded per level (docs/runs-and-playbooks.md, "Approval
-- levels"): one row per person who approved a subject (an action, a run, a
-- schedule, a run's resume past errors or its canary's promote) at a
-- digest. An approval of another digest than the subject's now is void: it
-- stays, for the record, and counts for nothing. A person approves a digest
-- once (names ignoring case).
CREATE TABLE approvals (
    subject_kind TEXT NOT NULL,
    subject_id   TEXT NOT NULL,
    digest       TEXT NOT NULL,
    person       TEXT NOT NULL COLLATE NOCASE,
    level        TEXT NOT NULL,
    decided_ts   INTEGER NOT NULL,
    PRIMARY KEY (subject_kind, subject_id, digest, person)
);
