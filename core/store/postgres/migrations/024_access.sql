-- Access: core/store/sqlite's migration 024.
ALTER TABLE clusters ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';

CREATE TABLE teams (
    name       TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    source     TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL DEFAULT '',
    created_ts TIMESTAMPTZ NOT NULL
);

CREATE TABLE team_members (
    team   TEXT COLLATE "C" NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    person TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (team, person)
);
CREATE INDEX team_members_person ON team_members (person);

CREATE TABLE team_groups (
    team       TEXT COLLATE "C" NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    group_name TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (team, group_name)
);
CREATE INDEX team_groups_group ON team_groups (group_name);

CREATE TABLE grants (
    id         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    team       TEXT COLLATE "C" NOT NULL DEFAULT '',
    person     TEXT COLLATE "C" NOT NULL DEFAULT '',
    role       TEXT NOT NULL,
    clusters   TEXT NOT NULL DEFAULT '',
    labels     TEXT NOT NULL DEFAULT '{}',
    source     TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL DEFAULT '',
    created_ts TIMESTAMPTZ NOT NULL
);
CREATE INDEX grants_team ON grants (team) WHERE team != '';
CREATE INDEX grants_person ON grants (person) WHERE person != '';

CREATE TABLE people (
    name         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    source       TEXT NOT NULL DEFAULT '',
    groups       TEXT[] NOT NULL DEFAULT '{}',
    last_seen_ts TIMESTAMPTZ NOT NULL
);
