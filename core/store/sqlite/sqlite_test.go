package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/storetest"
	shsqlite "github.com/musterhq/muster/shared/sqlite"
)

// TestStore runs the store behaviour suite on SQLite files in temporary
// directories.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		dir := t.TempDir()
		return func(t *testing.T) store.Store {
			t.Helper()
			s, err := Open(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	})
}

// TestUpgradeRefusesTokenNamesThatDifferOnlyInCase: a database made before
// names were unique ignoring case may hold alice and Alice; the upgrade stops
// with one clear error rather than pick one, and changes nothing.
func TestUpgradeRefusesTokenNamesThatDifferOnlyInCase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	// Back to the schema before the case-insensitive index, with two names
	// that differ only in case.
	if _, err := s.db.W.ExecContext(ctx, `DROP INDEX tokens_name_nocase;
		INSERT INTO tokens (name, roles, hash, created_ts) VALUES ('alice', '["operator"]', 'h1', 0), ('Alice', '["approver"]', 'h2', 0);
		PRAGMA user_version = 5`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(ctx, dir)
	if err == nil || !strings.Contains(err.Error(), "differ only in case") {
		t.Fatalf("open with alice and Alice: %v, want an error saying the names differ only in case", err)
	}
	t.Logf("%v", err)
	// Nothing changed: the database is still at version 5, both tokens kept.
	db, err := sql.Open("sqlite3", filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version, n int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM tokens").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if version != 5 || n != 2 {
		t.Fatalf("after the refused upgrade: user_version %d, %d tokens; want 5 and 2", version, n)
	}
}

// Migration 003 moves whether discovery holds a node DOWN out of the reason
// text into its own column, recognising the texts discovery wrote before.
func TestMigrationStoresTheDownCauseOfExistingNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file, db := migratedBefore(t, "003")
	_, err := db.W.ExecContext(ctx, `INSERT INTO clusters (id, status, updated_ts) VALUES ('c', 'ALERT', 0);
		INSERT INTO nodes (cluster_id, id, addr, source, status, status_reason, updated_ts) VALUES
			('c', 'left', 'a:1', 'gossip', 'DOWN', 'left', 0),
			('c', 'failed', 'a:2', 'gossip', 'DOWN', 'failed', 0),
			('c', 'dup', 'a:3', 'gossip', 'DOWN', 'announced from two addresses', 0),
			('c', 'unreachable', 'a:4', 'static', 'DOWN', 'unreachable', 0),
			('c', 'up', 'a:5', 'static', 'UP', 'left', 0)`)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := OpenFile(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := map[string]string{"left": store.CauseLeft, "failed": store.CauseFailed, "dup": store.CauseDuplicate, "unreachable": "", "up": ""}
	err = s.Read(ctx, func(r store.Reader) error {
		ns, err := r.Nodes(ctx, "c")
		for _, n := range ns {
			if n.DownCause != want[n.ID] {
				t.Errorf("node %s: cause %q, want %q", n.ID, n.DownCause, want[n.ID])
			}
			if held := store.DownByDiscovery(&n); held != (want[n.ID] != "") {
				t.Errorf("node %s: held by discovery %v", n.ID, held)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrationCountsTheChildrenOfExistingRuns: migration 012 counts the
// children stored before it, and a run stored before it is listed brief
// from its full stages.
func TestMigrationCountsTheChildrenOfExistingRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file, db := migratedBefore(t, "012")
	var nodes []string
	for i := range 25 {
		nodes = append(nodes, fmt.Sprintf(`"n%02d"`, i))
	}
	_, err := db.W.ExecContext(ctx, `INSERT INTO runs (id, cluster_id, state, approved_by, digest, stages, created_ts, updated_ts)
		VALUES ('r', 'c', 'RUNNING', 'bob', 'd', '[{"name":"main","nodes":[`+strings.Join(nodes, ",")+`],"state":"RUNNING"}]', 0, 0);
		INSERT INTO actions (id, cluster_id, node_id, kind, state, state_reason, origin, approved_by, created_ts, updated_ts, run_id, stage) VALUES
			('a1', 'c', 'n00', 'k', 'DONE', '', 'core', 'bob', 0, 0, 'r', 'main'),
			('a2', 'c', 'n01', 'k', 'DONE', 'ok', 'core', 'bob', 0, 0, 'r', 'main'),
			('a3', 'c', 'n02', 'k', 'CANCELLED', 'run cancelled', 'core', 'bob', 0, 0, 'r', 'main'),
			('a4', 'c', 'n03', 'k', 'FAILED', 'exit 1', 'core', 'eve', 0, 0, 'r', 'main'),
			('a5', 'c', 'n00', 'k', 'DONE', '', 'core', '', 0, 0, '', '')`)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := OpenFile(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Read(ctx, func(r store.Reader) error {
		kids, err := r.RunChildren(ctx, "r")
		if err != nil {
			return err
		}
		got, err := r.RunChildCounts(ctx, []string{"r"})
		if err != nil {
			return err
		}
		if want := store.CountChildren(kids); len(want) != 3 || !reflect.DeepEqual(got, want) {
			t.Errorf("counts after the migration = %+v\nwant %+v", got, want)
		}
		list, err := r.ListRuns(ctx, store.RunQuery{Brief: true})
		if err != nil {
			return err
		}
		if st := list[0].Stages[0]; len(list) != 1 || !list[0].Brief || len(st.Nodes) != store.BriefNodes || st.Size() != 25 {
			t.Errorf("the run stored before the migration, listed brief: %+v", list)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunChildrenAreReadThroughTheirIndex: reading a run's children
// searches the partial index on run_id, never scans the actions table
// (whose size is every action the core keeps, not the run's).
func TestRunChildrenAreReadThroughTheirIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := sql.Open("sqlite3", filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, brief := range []bool{false, true} {
		rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+store.RunChildrenSQL(store.QuestionMarks, brief), "run-1")
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if p := strings.Join(plan, "; "); !strings.Contains(p, "USING INDEX actions_run_child") || strings.Contains(p, "SCAN actions") {
			t.Errorf("the children of a run are read by %q, want a search of index actions_run_child", p)
		}
	}
	// A run's started nodes are counted in the index alone.
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+store.StartedNodesSQL(store.QuestionMarks), "run-1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if p := strings.Join(plan, "; "); !strings.Contains(p, "USING COVERING INDEX actions_run_child") {
		t.Errorf("a run's started nodes are counted by %q, want a search of covering index actions_run_child", p)
	}
}

// TestMigrationNumbersExistingDeliveriesByEvent: migration 022 gives the
// deliveries stored before it the ids of store.DeliveryID (by event, then
// in the order they were stored), keeps their state and tries, and the
// pending ones stay the destination's queue, in event order.
func TestMigrationNumbersExistingDeliveriesByEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file, db := migratedBefore(t, "022")
	_, err := db.W.ExecContext(ctx, `INSERT INTO events (seq, ts, type, actor) VALUES (7, 0, 'run.paused', 'core'), (9, 0, 'run.failed', 'core');
		INSERT INTO notify_deliveries (id, destination, event_seq, state, attempts, created_ts, next_ts, updated_ts, last_status) VALUES
			(1, 'a', 7, 'delivered', 1, 0, 0, 5, 204),
			(2, 'b', 7, 'dead', 3, 0, 0, 6, 404),
			(3, 'b', 9, 'pending', 2, 0, 0, 7, 503),
			(4, 'a', 9, 'pending', 0, 0, 0, 0, 0)`)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := OpenFile(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Read(ctx, func(r store.Reader) error {
		storetest.CheckDeliveries(t, ctx, r, storetest.DeliveryWant{ID: store.DeliveryID(7, 0), Dest: "a", State: store.DeliveryDelivered, Attempts: 1},
			storetest.DeliveryWant{ID: store.DeliveryID(7, 1), Dest: "b", State: store.DeliveryDead, Attempts: 3},
			storetest.DeliveryWant{ID: store.DeliveryID(9, 0), Dest: "b", State: store.DeliveryPending, Attempts: 2},
			storetest.DeliveryWant{ID: store.DeliveryID(9, 1), Dest: "a", State: store.DeliveryPending, Attempts: 0})
		next, err := store.NextDelivery(ctx, r, "a")
		if err != nil || next.ID != store.DeliveryID(9, 1) {
			t.Errorf("NextDelivery(a) = %+v, %v, want event 9's", next, err)
		}
		dead, err := r.Deliveries(ctx, store.DeliveryQuery{Destination: "b", State: store.DeliveryDead})
		if err == nil && (len(dead) != 1 || dead[0].EventSeq != 7) {
			t.Errorf("dead deliveries to b = %+v, want event 7's", dead)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// New deliveries follow on.
	s.SetOutbox(func(*store.Event) []string { return []string{"a"} })
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.AppendEvent(ctx, &store.Event{Type: "run.paused", Actor: "core"})
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Read(ctx, func(r store.Reader) error {
		ds, err := r.PendingDeliveries(ctx, "a", 10)
		if err == nil && (len(ds) != 2 || ds[0].EventSeq != 9 || ds[1].EventSeq != 10) {
			t.Errorf("pending to a = %+v, want events 9 and 10", ds)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// migratedBefore opens a SQLite file in t's temp dir migrated up to, not
// including, the migration numbered before: the store as an older release
// left it.
func migratedBefore(t *testing.T, before string) (string, *shsqlite.DB) {
	t.Helper()
	file := filepath.Join(t.TempDir(), FileName)
	old := fstest.MapFS{}
	names, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range names {
		found = found || strings.HasPrefix(e.Name(), before+"_")
		if e.Name() >= before {
			continue
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		old[e.Name()] = &fstest.MapFile{Data: b}
	}
	if !found {
		t.Fatalf("no migration numbered %q", before)
	}
	db, err := shsqlite.Open(context.Background(), file, old)
	if err != nil {
		t.Fatal(err)
	}
	return file, db
}

// TestMigrationMovesDeliveriesToTheOutbox: migration 023 gives each event
// with deliveries one outbox row naming its destinations by rank, and each
// destination a cursor before its first pending delivery; deliveries keep
// their state, the queue its order, the stats their last success and
// failure; an event a purge cut short is dropped whole.
func TestMigrationMovesDeliveriesToTheOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file, db := migratedBefore(t, "023")
	_, err := db.W.ExecContext(ctx, `INSERT INTO events (seq, ts, type, actor) VALUES
			(6, 0, 'run.paused', 'core'), (7, 0, 'run.paused', 'core'), (9, 0, 'run.failed', 'core'),
			(10, 0, 'run.failed', 'core');
		INSERT INTO notify_deliveries (id, destination, event_seq, state, attempts, created_ts, next_ts, updated_ts, last_status, last_error) VALUES
			(6*1024+1, 'b', 6, 'delivered', 1, 0, 0, 3, 200, ''),
			(7*1024, 'a', 7, 'delivered', 2, 0, 0, 5, 204, ''),
			(7*1024+1, 'b', 7, 'dead', 3, 0, 0, 6, 404, '404 Not Found'),
			(9*1024, 'b', 9, 'pending', 2, 0, 0, 7, 503, '503 Service Unavailable'),
			(9*1024+1, 'a', 9, 'pending', 0, 0, 0, 0, 0, ''),
			(10*1024, 'b', 10, 'delivered', 1, 0, 0, 8, 200, '')`)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := OpenFile(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckMigratedOutbox(t, s)
}

// TestMigrationKeepsTokensAndClusters: a store of the last release's
// schema (before migration 024) keeps its tokens with their global roles
// and its clusters, which have no labels and no grants.
func TestMigrationKeepsTokensAndClusters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file, db := migratedBefore(t, "024")
	_, err := db.W.ExecContext(ctx, `INSERT INTO clusters (id, status, updated_ts) VALUES ('prod', 'HEALTHY', 0);
		INSERT INTO tokens (name, roles, hash, created_ts) VALUES ('bob', '["approver","viewer"]', 'h1', 0)`)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := OpenFile(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Read(ctx, func(r store.Reader) error {
		tok, err := r.TokenByHash(ctx, "h1")
		if err != nil {
			return err
		}
		if tok.Name != "bob" || len(tok.Roles) != 2 || tok.Roles[0] != "approver" {
			t.Errorf("token after the migration = %+v", tok)
		}
		c, err := r.Cluster(ctx, "prod")
		if err != nil {
			return err
		}
		if c.Labels != nil {
			t.Errorf("cluster labels after the migration = %v, want none", c.Labels)
		}
		gs, err := r.Grants(ctx)
		if err != nil {
			return err
		}
		if len(gs) != 0 {
			t.Errorf("grants after the migration = %+v, want none", gs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
