-- Access (docs/architecture.md, "Access: people, teams and grants"): a
-- cluster's labels (from the configuration; they feed grants' label
-- selectors), teams with their members and mapped group claims, grants of
-- one role on a scope, and the people seen at sign-in with their last
-- groups. Person names are kept lowercase: names compare ignoring case.
ALTER TABLE clusters ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';

CREATE TABLE teams (
    name       TEXT NOT NULL PRIMARY KEY,
    source     TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL DEFAULT '',
    created_ts INTEGER NOT NULL
);

CREATE TABLE team_members (
    team   TEXT NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    person TEXT NOT NULL,
    PRIMARY KEY (team, person)
);
CREATE INDEX team_members_person ON team_members (person);

CREATE TABLE team_groups (
    team      TEXT NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    group_name TEXT NOT NULL,
    PRIMARY KEY (team, group_name)
);
CREATE INDEX team_groups_group ON team_groups (group_name);

-- A grant names a team or a person (the other is ''), and a cluster glob
-- or a label selector (a JSON object; the glob is '' then).
CREATE TABLE grants (
    id         TEXT NOT NULL PRIMARY KEY,
    team       TEXT NOT NULL DEFAULT '',
    person     TEXT NOT NULL DEFAULT '',
    role       TEXT NOT NULL,
    clusters   TEXT NOT NULL DEFAULT '',
    labels     TEXT NOT NULL DEFAULT '{}',
    source     TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL DEFAULT '',
    created_ts INTEGER NOT NULL
);
CREATE INDEX grants_team ON grants (team) WHERE team != '';
CREATE INDEX grants_person ON grants (person) WHERE person != '';

CREATE TABLE people (
    name         TEXT NOT NULL PRIMARY KEY,
    source       TEXT NOT NULL DEFAULT '',
    groups       TEXT NOT NULL DEFAULT '[]',
    last_seen_ts INTEGER NOT NULL
);
