package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/action"
)

// TestListActionsSQLDialects: the one builder writes each dialect's
// placeholders, one argument a placeholder, and refuses what SortKeys
// refuses. The conformance suite (storetest) runs its statements on both
// stores.
func TestListActionsSQLDialects(t *testing.T) {
	t.Parallel()
	q := ListQuery{ClusterID: "c", NodeID: "n", RunID: "r", States: []action.State{action.New, action.Running},
		Kinds: []string{"k"}, Sort: []SortKey{{Field: "state", Desc: true}}, Marker: "m", Limit: 10}
	sq, sargs, err := listActionsSQL(q, "id", QuestionMarks)
	if err != nil {
		t.Fatal(err)
	}
	pq, pargs, err := listActionsSQL(q, "id", DollarNumbers)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(sq, "?"); n != len(sargs) {
		t.Errorf("SQLite: %d placeholders, %d args: %s", n, len(sargs), sq)
	}
	if len(pargs) != len(sargs) {
		t.Fatalf("args differ: %d and %d", len(sargs), len(pargs))
	}
	for i := len(pargs); i >= 1; i-- {
		ph := DollarNumbers(i)
		if !strings.Contains(pq, ph) {
			t.Errorf("PostgreSQL statement lacks %s: %s", ph, pq)
		}
		pq = strings.ReplaceAll(pq, ph, "?")
	}
	if pq != sq {
		t.Errorf("the dialects differ beyond placeholders:\n%s\n%s", sq, pq)
	}
	if !strings.Contains(sq, "run_id = ?") {
		t.Errorf("no run filter: %s", sq)
	}
	if !strings.HasSuffix(sq, "ORDER BY state DESC, id ASC LIMIT ?") {
		t.Errorf("order: %s", sq)
	}
	if _, _, err := listActionsSQL(ListQuery{Sort: []SortKey{{Field: "output"}}}, "id", QuestionMarks); !errors.Is(err, ErrInvalidQuery) {
		t.Errorf("unknown sort field: %v, want ErrInvalidQuery", err)
	}
	if s, _, _ := listActionsSQL(ListQuery{}, "id", QuestionMarks); strings.Contains(s, "LIMIT") || strings.Contains(s, "WHERE") {
		t.Errorf("an empty query filters or limits: %s", s)
	}
}

// TestListRunsSQLDialects: runs are listed by the same builder as actions:
// the dialects differ only in placeholders, newest first (oldest with
// Oldest), and after the marker by the keyset condition on (created_ts, id).
func TestListRunsSQLDialects(t *testing.T) {
	t.Parallel()
	q := RunQuery{ClusterID: "c", States: []string{"RUNNING", "PAUSED"}, Marker: "m", Limit: 10}
	sq, sargs := listRunsSQL(q, "id", QuestionMarks)
	pq, pargs := listRunsSQL(q, "id", DollarNumbers)
	if n := strings.Count(sq, "?"); n != len(sargs) || len(pargs) != len(sargs) {
		t.Fatalf("%d placeholders, %d and %d args: %s", n, len(sargs), len(pargs), sq)
	}
	for i := len(pargs); i >= 1; i-- {
		pq = strings.ReplaceAll(pq, DollarNumbers(i), "?")
	}
	if pq != sq {
		t.Errorf("the dialects differ beyond placeholders:\n%s\n%s", sq, pq)
	}
	want := "SELECT id FROM runs WHERE cluster_id = ? AND state IN (?, ?) AND " +
		"((created_ts < (SELECT created_ts FROM runs WHERE id = ?)) OR " +
		"(created_ts = (SELECT created_ts FROM runs WHERE id = ?) AND id < (SELECT id FROM runs WHERE id = ?))) " +
		"ORDER BY created_ts DESC, id DESC LIMIT ?"
	if sq != want {
		t.Errorf("newest first:\n got %s\nwant %s", sq, want)
	}
	if s, _ := listRunsSQL(RunQuery{Oldest: true, Marker: "m"}, "id", QuestionMarks); !strings.Contains(s, "created_ts > (") ||
		!strings.HasSuffix(s, "ORDER BY created_ts ASC, id ASC") {
		t.Errorf("oldest first: %s", s)
	}
	if s, _ := listRunsSQL(RunQuery{}, "id", QuestionMarks); strings.Contains(s, "LIMIT") || strings.Contains(s, "WHERE") {
		t.Errorf("an empty query filters or limits: %s", s)
	}
}
