-- Several core replicas (docs/architecture.md, "Several core replicas"). A
-- replica writes its heartbeat every third of the lease TTL; it is live while
-- its heartbeat is younger than the TTL. Each cluster's passes run on the
-- replica holding its lease; the epoch grows whenever the lease changes hands,
-- and every write of a pass checks it (store.Fence).

CREATE TABLE replicas (
    id           TEXT COLLATE "C" PRIMARY KEY,
    addr         TEXT NOT NULL DEFAULT '',
    version      TEXT NOT NULL DEFAULT '',
    started_ts   TIMESTAMPTZ NOT NULL,
    heartbeat_ts TIMESTAMPTZ NOT NULL
);

CREATE TABLE leases (
    cluster_id  TEXT COLLATE "C" PRIMARY KEY,
    holder      TEXT COLLATE "C" NOT NULL,
    epoch       BIGINT NOT NULL,
    acquired_ts TIMESTAMPTZ NOT NULL,
    expires_ts  TIMESTAMPTZ NOT NULL
);
