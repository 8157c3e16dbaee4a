package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/api"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// lockedBuffer is written by a running command and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type cliEnv struct {
	t       *testing.T
	st      *sqlite.Store
	url     string
	secrets map[string]string
}

// setupCLI starts a real core API on a fresh SQLite store with cluster prod
// (node db-1) and the tokens op (operator), appr (approver) and admin.
func setupCLI(t *testing.T, policy approval.Policy, opts ...func(store.Store, *api.Config)) *cliEnv {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := api.Config{Policy: live.New(policy)}
	for _, o := range opts {
		o(st, &cfg)
	}
	srv := api.New(cfg, st, nil, slog.New(slog.DiscardHandler))
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Close(); ts.Close() })
	now := time.Now().UTC()
	if err := st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "prod", Status: store.ClusterHealthy, UpdatedTS: now}); err != nil {
			return err
		}
		return tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: "db-1", Addr: "127.0.0.1:7421", Source: store.SourceStatic,
			Status: store.NodeUp, Kinds: []string{"muster.io/debug.ping", "muster.io/debug.sleep"}, UpdatedTS: now,
			Labels: map[string]string{"role": "replica", "zone": "eu-1"}})
	}); err != nil {
		t.Fatal(err)
	}
	e := &cliEnv{t: t, st: st, url: ts.URL, secrets: map[string]string{}}
	for name, role := range map[string]string{"op": "operator", "appr": "approver", "admin": "admin"} {
		s, err := auth.CreateToken(ctx, st, name, []string{role}, "test", "")
		if err != nil {
			t.Fatal(err)
		}
		e.secrets[name] = s
	}
	return e
}

// run executes the muster command line as who against the test core and
// returns its standard output, the error line main would print, and the
// exit code.
func (e *cliEnv) run(who string, args ...string) (string, string, int) {
	e.t.Helper()
	var out lockedBuffer
	code, msg := e.runCtx(context.Background(), &out, who, args...)
	return out.String(), msg, code
}

func (e *cliEnv) runCtx(ctx context.Context, out *lockedBuffer, who string, args ...string) (int, string) {
	root := newRootCmd()
	root.SetArgs(append(args, "--addr", e.url, "--token", e.secrets[who]))
	root.SetOut(out)
	root.SetErr(&lockedBuffer{})
	if err := root.ExecuteContext(ctx); err != nil {
		return cli.ExitCode(err), err.Error()
	}
	return 0, ""
}

// refusalLines reports whether msg is how the CLI says a 403: one line,
// then at most one hint line saying what to run next.
func refusalLines(msg string) bool {
	first, hint, _ := strings.Cut(msg, "\n")
	return first != "" && (hint == "" || strings.HasPrefix(hint, "hint: ") && !strings.Contains(hint, "\n"))
}

// advance moves an action as an orchestration pass would: the record, a
// history line and an event in one transaction.
func (e *cliEnv) advance(id string, to action.State, reason string) {
	e.t.Helper()
	ctx := context.Background()
	err := e.st.Update(ctx, func(tx store.Tx) error {
		rec, err := tx.Action(ctx, id)
		if err != nil {
			return err
		}
		from := rec.State
		rec.State, rec.StateReason = to, reason
		if err := tx.UpdateAction(ctx, rec); err != nil {
			return err
		}
		if err := tx.AppendHistory(ctx, id, action.Transition{TS: time.Now(), From: from, To: to, Actor: "db-1", Reason: reason}); err != nil {
			return err
		}
		return tx.AppendEvent(ctx, &store.Event{Type: store.EventActionStateChanged, Actor: "db-1", ClusterID: rec.ClusterID,
			NodeID: rec.NodeID, ActionID: id, Message: fmt.Sprintf("%s → %s", from, to)})
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
	return v
}

func TestCLIClusterAndNodeList(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	out, msg, code := e.run("op", "cluster", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^CLUSTER\s+STATUS\s+NODES\s+UP\s+DRAINED\s+DOWN\s+UNKNOWN.*\nprod\s+HEALTHY\s+1\s+1\s+0\s+0\s+0\s+-`).MatchString(out) {
		t.Fatalf("cluster list: %d %s\n%s", code, msg, out)
	}
	out, _, code = e.run("op", "cluster", "list", "-o", "json")
	if l := decode[wire.ClusterList](t, out); code != 0 || len(l.Clusters) != 1 || l.Clusters[0].NodeCounts.Up != 1 {
		t.Fatalf("cluster list -o json: %s", out)
	}
	out, _, code = e.run("op", "cluster", "show", "prod")
	if code != 0 || !strings.Contains(out, "Cluster:  prod") || !regexp.MustCompile(`(?m)^db-1\s+UP\s+127.0.0.1:7421\s+static`).MatchString(out) {
		t.Fatalf("cluster show: %s", out)
	}
	out, _, code = e.run("op", "cluster", "show", "prod", "-o", "json")
	if c := decode[wire.Cluster](t, out); code != 0 || len(c.Nodes) != 1 {
		t.Fatalf("cluster show -o json: %s", out)
	}
	out, _, code = e.run("op", "node", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^prod\s+db-1\s+UP`).MatchString(out) {
		t.Fatalf("node list: %s", out)
	}
	out, _, code = e.run("op", "node", "list", "--label", "role=replica", "--label", "zone=eu-1")
	if code != 0 || !regexp.MustCompile(`(?m)^CLUSTER\s+NODE.*LABELS\s+REASON\n(?m)^prod\s+db-1\s+UP.*\srole=replica,zone=eu-1`).MatchString(out) {
		t.Fatalf("node list --label: %s", out)
	}
	out, _, code = e.run("op", "node", "list", "--label", "role=primary")
	if code != 0 || strings.Contains(out, "db-1") {
		t.Fatalf("node list --label role=primary lists db-1: %s", out)
	}
	_, msg, code = e.run("op", "node", "list", "--label", "role")
	if code != 2 || !strings.Contains(msg, "--label") || strings.Contains(msg, "\n") {
		t.Fatalf("node list --label role: exit %d, %q", code, msg)
	}
	out, _, code = e.run("op", "node", "list", "--cluster", "prod", "-o", "json")
	if l := decode[wire.NodeList](t, out); code != 0 || len(l.Nodes) != 1 || len(l.Nodes[0].Kinds) != 2 {
		t.Fatalf("node list -o json: %s", out)
	}
	out, _, code = e.run("op", "cluster", "orchestrate", "prod")
	if code != 0 || !strings.Contains(out, "requested") {
		t.Fatalf("cluster orchestrate: %d %s", code, out)
	}
	_, msg, code = e.run("op", "cluster", "show", "nope")
	if code != 1 || !strings.Contains(msg, "404") || strings.Contains(msg, "\n") {
		t.Fatalf("unknown cluster: exit %d, %q", code, msg)
	}
}

func TestCLIActionLifecycle(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	out, msg, code := e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.sleep",
		"--args", `{"a": 1, "seconds": 1}`, "--arg", "seconds=30", "--arg", "name=nightly", "--arg", `list=[1,2]`, "--timeout", "2m", "-o", "json")
	if code != 0 {
		t.Fatalf("create: %d %s", code, msg)
	}
	a := decode[action.Action](t, out)
	var args bytes.Buffer
	_ = json.Compact(&args, a.Args)
	if args.String() != `{"a":1,"list":[1,2],"name":"nightly","seconds":30}` || a.TimeoutS != 120 || a.State != action.PendingApprove || a.Requester != "op" {
		t.Fatalf("created %+v (args %s)", a, args.String())
	}

	out, _, code = e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping")
	m := regexp.MustCompile(`^Created action ([0-9a-f-]{36}) \(PENDING_APPROVE\)\.\nIt waits for approval: muster action approve ([0-9a-f]{8})\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil || m[2] != m[1][:8] {
		t.Fatalf("create (table): %q", out)
	}
	ping := m[1]

	out, _, code = e.run("op", "action", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^`+a.ID[:8]+`\s+prod\s+db-1\s+muster.io/debug.sleep\s+PENDING_APPROVE\s+op\s+-\s+\d{4}-`).MatchString(out) {
		t.Fatalf("list: %s", out)
	}
	out, _, code = e.run("op", "action", "list", "--kind", "muster.io/debug.ping", "-o", "json")
	if l := decode[wire.ActionList](t, out); code != 0 || len(l.Actions) != 1 || l.Actions[0].ID != ping {
		t.Fatalf("list --kind -o json: %s", out)
	}
	out, _, code = e.run("op", "action", "list", "--limit", "1", "--all", "-o", "json")
	if l := decode[wire.ActionList](t, out); code != 0 || len(l.Actions) != 2 || l.NextMarker != "" {
		t.Fatalf("list --all: %s", out)
	}

	out, _, code = e.run("appr", "action", "approve", a.ID[:8])
	if code != 0 || out != "Approved action "+a.ID+" (PENDING_SCHEDULE).\n" {
		t.Fatalf("approve: %d %q", code, out)
	}
	out, _, code = e.run("op", "action", "show", a.ID[:10])
	if code != 0 || !regexp.MustCompile(`(?m)^Approved by\s+appr$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^History:\n.*\n.*\n.*PENDING_APPROVE\s+PENDING_SCHEDULE\s+appr\s+approved$`).MatchString(out) {
		t.Fatalf("show: %s", out)
	}
	// Scheduled but not pushed to an agent yet (no agent runs here): cancelled at once.
	out, _, code = e.run("op", "action", "cancel", a.ID, "--reason", "wrong node")
	if code != 0 || out != "Cancelled action "+a.ID+" (CANCELLED).\n" {
		t.Fatalf("cancel: %d %q", code, out)
	}
	if out, _, _ = e.run("op", "action", "show", a.ID); !regexp.MustCompile(`(?m)PENDING_SCHEDULE\s+CANCELLED\s+op\s+wrong node$`).MatchString(out) {
		t.Fatalf("the cancel's reason is not in the history:\n%s", out)
	}
	out, _, code = e.run("appr", "action", "reject", ping)
	if code != 0 || !strings.HasPrefix(out, "Rejected action "+ping) {
		t.Fatalf("reject: %q", out)
	}
	out, _, code = e.run("op", "action", "retry", ping)
	if code != 0 || !regexp.MustCompile(`^Created action [0-9a-f-]{36} \(PENDING_APPROVE\) to retry `+ping+`\.\n$`).MatchString(out) {
		t.Fatalf("retry: %q", out)
	}
	// Waiting for approval, a cancel is immediate.
	out, _, code = e.run("op", "action", "list", "--state", "PENDING_APPROVE", "-o", "json")
	waiting := decode[wire.ActionList](t, out)
	if code != 0 || len(waiting.Actions) == 0 {
		t.Fatalf("list waiting: %s", out)
	}
	out, _, code = e.run("op", "action", "cancel", waiting.Actions[0].ID, "-o", "json")
	if c := decode[action.Action](t, out); code != 0 || c.State != action.Cancelled {
		t.Fatalf("cancel of a waiting action: %s", out)
	}
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	out, _, _ := e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping", "-o", "json")
	a := decode[action.Action](t, out)
	for _, c := range []struct {
		name string
		who  string
		args []string
		code int
		msg  string
	}{
		{"unknown action", "op", []string{"action", "show", action.NewID()}, 1, "404 not_found"},
		{"short prefix", "op", []string{"action", "show", "abc"}, 1, "400 bad_request"},
		{"no permission", "op", []string{"action", "approve", a.ID}, 1, "403 forbidden"},
		{"wrong state", "op", []string{"action", "retry", a.ID}, 1, "409 conflict"},
		{"kind unknown to node", "op", []string{"action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "x.io/y"}, 1, "422 unprocessable"},
		{"bad token", "nobody", []string{"cluster", "list"}, 2, "no API token"},
		{"bad output", "op", []string{"cluster", "list", "-o", "xml"}, 2, "want one of table, wide, json, yaml, name"},
		{"unknown event type", "op", []string{"events", "--type", "node.dwn"}, 2, "unknown event type \"node.dwn\""},
		{"missing argument", "op", []string{"action", "show"}, 2, "needs 1 argument"},
		{"extra argument", "op", []string{"cluster", "list", "x"}, 2, "takes no arguments"},
		{"unknown flag", "op", []string{"action", "list", "--colour"}, 2, "unknown flag"},
		{"missing kind", "op", []string{"action", "create", "--cluster", "prod", "--node", "db-1"}, 2, "--kind is required"},
		{"bad --args", "op", []string{"action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "a/b", "--args", "[1]"}, 2, "--args must be a JSON object"},
		{"bad --arg", "op", []string{"action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "a/b", "--arg", "novalue"}, 2, "want key=value"},
		{"bad state", "op", []string{"action", "list", "--state", "BOGUS"}, 2, "unknown state"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, msg, code := e.run(c.who, c.args...)
			// A 403 adds one line: what would be allowed, and what to run.
			first, hint, _ := strings.Cut(msg, "\n")
			if code != c.code || !strings.Contains(first, c.msg) || strings.Contains(hint, "\n") ||
				(hint != "") != strings.Contains(c.msg, "403") {
				t.Fatalf("exit %d, error %q; want exit %d and one line with %q", code, msg, c.code, c.msg)
			}
			if hint != "" && hint != "hint: use a token or a login that holds the approver or admin role, or ask an admin to grant it: "+
				"muster grant create --person NAME --role approver --clusters GLOB" {
				t.Fatalf("the 403's hint: %q", hint)
			}
		})
	}
}

func TestCLIUnreachableCore(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	e.url = "http://127.0.0.1:1"
	_, msg, code := e.run("op", "cluster", "list")
	if code != 1 || !strings.Contains(msg, "core at http://127.0.0.1:1") {
		t.Fatalf("exit %d, %q", code, msg)
	}
}

func TestCLIReadsEnvironment(t *testing.T) {
	// Not parallel: it sets the process environment.
	e := setupCLI(t, approval.DefaultPolicy())
	t.Setenv("MUSTER_ADDR", e.url)
	t.Setenv("MUSTER_TOKEN", e.secrets["op"])
	root := newRootCmd()
	var out lockedBuffer
	root.SetOut(&out)
	root.SetArgs([]string{"cluster", "list", "-o", "json"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l := decode[wire.ClusterList](t, out.String()); len(l.Clusters) != 1 {
		t.Fatalf("%s", out.String())
	}
	t.Setenv("MUSTER_TOKEN", "")
	root = newRootCmd()
	root.SetArgs([]string{"cluster", "list"})
	if err := root.ExecuteContext(context.Background()); cli.ExitCode(err) != 2 {
		t.Fatalf("without a token: %v", err)
	}
}

func TestCLIWatch(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.Policy{Default: approval.None, TTL: time.Hour})
	for _, c := range []struct {
		final action.State
		code  int
	}{{action.Done, 0}, {action.Failed, 1}} {
		t.Run(string(c.final), func(t *testing.T) {
			out, _, _ := e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping", "-o", "json")
			a := decode[action.Action](t, out)
			var buf lockedBuffer
			done := make(chan int, 1)
			var msg string
			go func() {
				code, m := e.runCtx(context.Background(), &buf, "op", "action", "watch", a.ID[:8])
				msg = m
				done <- code
			}()
			testwait.For(t, "the current state", func() bool { return strings.Contains(buf.String(), "PENDING_SCHEDULE") })
			e.advance(a.ID, action.New, "")
			testwait.For(t, "NEW", func() bool { return strings.Contains(buf.String(), "NEW") })
			e.advance(a.ID, action.Running, "")
			testwait.For(t, "RUNNING", func() bool { return strings.Contains(buf.String(), "RUNNING") })
			e.advance(a.ID, c.final, "finished")
			select {
			case code := <-done:
				if code != c.code {
					t.Fatalf("watch exit %d (%s), want %d", code, msg, c.code)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("watch did not end on a final state")
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			want := []string{"PENDING_SCHEDULE", "NEW", "RUNNING", string(c.final) + "  finished  by db-1"}
			if len(lines) != len(want) {
				t.Fatalf("watch printed %q", lines)
			}
			for i, w := range want {
				if !strings.Contains(lines[i], a.ID[:8]+"  "+w) {
					t.Fatalf("line %d %q, want %q", i, lines[i], w)
				}
			}
		})
	}
}

func TestCLIEvents(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping")
	out, _, code := e.run("op", "events")
	if code != 0 || !regexp.MustCompile(`(?m)^4\s+\S+ \S+ \S+\s+action.created\s+op\s+127.0.0.1\s+[0-9a-f]{8}\s+op created`).MatchString(out) {
		t.Fatalf("events: %s", out)
	}
	out, _, code = e.run("op", "events", "--limit", "2", "-o", "json")
	// The action waits for an approver: approval.waiting follows its creation.
	if l := decode[wire.EventList](t, out); code != 0 || len(l.Events) != 2 || l.Events[0].Type != "action.created" ||
		l.Events[1].Type != "approval.waiting" {
		t.Fatalf("events -o json: %s", out)
	}
	out, _, _ = e.run("op", "events", "--since", "3", "-o", "json")
	if l := decode[wire.EventList](t, out); len(l.Events) != 2 || l.Events[0].Seq != 4 {
		t.Fatalf("events --since 3: %s", out)
	}
	// Issue 38: -o cloudevents prints one CloudEvent a line, its id the
	// event's seq (where --since resumes); other commands refuse the form.
	out, _, code = e.run("op", "events", "--since", "3", "-o", "cloudevents")
	ces := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(ces) != 2 {
		t.Fatalf("events -o cloudevents: %d %s", code, out)
	}
	for i, line := range ces {
		ce := decode[wire.CloudEvent](t, line)
		if ce.SpecVersion != "1.0" || ce.ID != strconv.Itoa(4+i) || ce.Type != "io.muster."+ce.Data.Type ||
			ce.Source != "/muster/clusters/prod" || ce.Data.Seq != int64(4+i) {
			t.Errorf("cloudevent %d: %s", i, line)
		}
	}
	if _, msg, code := e.run("op", "cluster", "list", "-o", "cloudevents"); code != 2 {
		t.Errorf("cluster list -o cloudevents: exit %d %s, want 2", code, msg)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var buf lockedBuffer
	done := make(chan int, 1)
	go func() {
		code, _ := e.runCtx(ctx, &buf, "op", "events", "--follow", "--limit", "1", "-o", "json")
		done <- code
	}()
	testwait.For(t, "the last event", func() bool { return strings.Contains(buf.String(), `"seq":5`) })
	e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.sleep")
	testwait.For(t, "the new event", func() bool { return strings.Contains(buf.String(), `"seq":6`) })
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("events --follow ended with exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("events --follow did not end when interrupted")
	}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		decode[wire.Event](t, line)
	}
}

func TestCLITokens(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	out, _, code := e.run("admin", "token", "create", "carol", "--role", "viewer,approver")
	m := regexp.MustCompile(`(?s)^Created token carol \(roles approver, viewer\)\.\n.*\n\n  (mst_\S+)\n\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("token create: %q", out)
	}
	e.secrets["carol"] = m[1]
	if _, msg, code := e.run("carol", "cluster", "list"); code != 0 {
		t.Fatalf("the new token does not work: %s", msg)
	}

	_, msg, code := e.run("admin", "token", "create", "dave", "--role", "viewer", "-o", "json")
	if code != 2 || !strings.Contains(msg, "--secret-file") {
		t.Fatalf("-o json without --secret-file: %d %q", code, msg)
	}
	file := filepath.Join(t.TempDir(), "dave.token")
	out, _, code = e.run("admin", "token", "create", "dave", "--role", "operator", "--secret-file", file, "-o", "json")
	if tok := decode[wire.Token](t, out); code != 0 || tok.Name != "dave" || strings.Contains(out, "mst_") {
		t.Fatalf("token create -o json: %s", out)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v %v", fi, err)
	}
	raw, _ := os.ReadFile(file)
	e.secrets["dave"] = strings.TrimSpace(string(raw))
	if _, msg, code := e.run("dave", "action", "list"); code != 0 {
		t.Fatalf("the secret in the file does not work: %s", msg)
	}

	out, _, code = e.run("admin", "token", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^carol\s+approver,viewer\s+\d{4}`).MatchString(out) || strings.Contains(out, "mst_") {
		t.Fatalf("token list: %s", out)
	}
	out, _, _ = e.run("admin", "token", "list", "-o", "json")
	if l := decode[wire.TokenList](t, out); len(l.Tokens) != 5 || strings.Contains(out, "mst_") {
		t.Fatalf("token list -o json: %s", out)
	}
	if _, msg, code := e.run("op", "token", "list"); code != 1 || !strings.Contains(msg, "403") {
		t.Fatalf("token list as operator: %d %q", code, msg)
	}
	out, _, code = e.run("admin", "token", "revoke", "carol")
	if code != 0 || out != "Revoked token carol.\n" {
		t.Fatalf("revoke: %q", out)
	}
	if _, msg, code := e.run("carol", "cluster", "list"); code != 1 || !strings.Contains(msg, "401") || strings.Contains(msg, "mst_") {
		t.Fatalf("revoked token: %d %q", code, msg)
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		root := newRootCmd()
		var out lockedBuffer
		root.SetOut(&out)
		root.SetArgs([]string{"completion", shell})
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("completion %s: %v", shell, err)
		}
		if !strings.Contains(out.String(), "muster") {
			t.Fatalf("completion %s printed %q", shell, out.String()[:min(200, len(out.String()))])
		}
	}
	// Completion of subcommands works through cobra's hidden __complete.
	root := newRootCmd()
	var out lockedBuffer
	root.SetOut(&out)
	root.SetErr(&lockedBuffer{})
	root.SetArgs([]string{"__complete", "action", ""})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"approve", "create", "watch"} {
		if !strings.Contains(out.String(), sub) {
			t.Fatalf("__complete action lacks %s: %s", sub, out.String())
		}
	}
}

func TestCLINodeDrainUndrainForget(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	out, msg, code := e.run("op", "node", "drain", "db-1", "--reason", "disk swap")
	if code != 0 || !strings.Contains(out, "Node prod/db-1 is DRAINED.") {
		t.Fatalf("node drain: %d %s %s", code, msg, out)
	}
	out, _, code = e.run("op", "node", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^prod\s+db-1\s+DRAINED\s.*drained by op: disk swap$`).MatchString(out) {
		t.Fatalf("node list after drain: %s", out)
	}
	// A drained node is counted drained, not up.
	out, _, code = e.run("op", "cluster", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^prod\s+HEALTHY\s+1\s+0\s+1\s+0\s+0\s`).MatchString(out) {
		t.Fatalf("cluster list after drain: %s", out)
	}
	out, _, code = e.run("op", "cluster", "show", "prod")
	if code != 0 || !strings.Contains(out, "Nodes:    1 (0 up, 1 drained, 0 down, 0 unknown)") {
		t.Fatalf("cluster show after drain: %s", out)
	}
	out, _, code = e.run("op", "node", "undrain", "db-1", "--cluster", "prod", "-o", "json")
	if n := decode[wire.Node](t, out); code != 0 || n.Drained || n.Status != "UP" {
		t.Fatalf("node undrain: %s", out)
	}
	_, msg, code = e.run("op", "node", "forget", "db-1")
	if code != 1 || !strings.Contains(msg, "403") {
		t.Fatalf("forget as an operator: exit %d %q", code, msg)
	}
	a, err := e.runJSONCreate()
	if err != nil {
		t.Fatal(err)
	}
	// db-1 is in the core's configuration: forgetting it is refused, in one
	// line that says what to do instead, and changes nothing.
	out, msg, code = e.run("admin", "node", "forget", "db-1")
	if code != 1 || out != "" || strings.Count(strings.TrimSpace(msg), "\n") != 0 ||
		!strings.Contains(msg, "remove it from there (core.yaml)") || !strings.Contains(msg, "409") {
		t.Fatalf("forget of a configured node: exit %d %q %q", code, msg, out)
	}
	if err := e.st.Update(context.Background(), func(tx store.Tx) error {
		n, err := tx.Node(context.Background(), "prod", "db-1")
		if err != nil {
			return err
		}
		n.Source = store.SourceGossip
		return tx.PutNode(context.Background(), n)
	}); err != nil {
		t.Fatal(err)
	}
	out, msg, code = e.run("admin", "node", "forget", "db-1")
	if code != 0 || !strings.Contains(out, "Node prod/db-1 forgotten; 1 open action(s) ended.") {
		t.Fatalf("node forget: %d %s %s", code, msg, out)
	}
	out, _, _ = e.run("op", "action", "show", a, "-o", "json")
	if got := decode[action.Action](t, out); got.State != action.Cancelled || got.StateReason != "node forgotten" {
		t.Fatalf("the forgotten node's action: %s %q", got.State, got.StateReason)
	}
	_, msg, code = e.run("op", "node", "drain", "db-1")
	if code != 1 || !strings.Contains(msg, `no node "db-1"`) {
		t.Fatalf("drain of an unknown node: exit %d %q", code, msg)
	}
}

// runJSONCreate creates an action on db-1 as op and returns its id.
func (e *cliEnv) runJSONCreate() (string, error) {
	out, msg, code := e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping", "-o", "json")
	if code != 0 {
		return "", fmt.Errorf("create: %d %s", code, msg)
	}
	return decode[action.Action](e.t, out).ID, nil
}

// Item 14 of the attack review: --token puts the secret in the process
// list, so the client also reads it from MUSTER_TOKEN_FILE, and the flag's
// help says so.
func TestCLIReadsTheTokenFromMUSTER_TOKEN_FILE(t *testing.T) {
	// Not parallel: it sets the process environment.
	e := setupCLI(t, approval.DefaultPolicy())
	t.Setenv("MUSTER_ADDR", e.url)
	t.Setenv("MUSTER_TOKEN", "")
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("  "+e.secrets["op"]+"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() (string, error) {
		root := newRootCmd()
		var out lockedBuffer
		root.SetOut(&out)
		root.SetErr(&lockedBuffer{})
		root.SetArgs([]string{"cluster", "list", "-o", "json"})
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}
	t.Setenv("MUSTER_TOKEN_FILE", file)
	out, err := run()
	if err != nil {
		t.Fatalf("with MUSTER_TOKEN_FILE: %v", err)
	}
	if l := decode[wire.ClusterList](t, out); len(l.Clusters) != 1 {
		t.Fatalf("%s", out)
	}

	t.Setenv("MUSTER_TOKEN", e.secrets["op"])
	if _, err := run(); cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "both set") {
		t.Fatalf("with both variables: %v", err)
	}
	t.Setenv("MUSTER_TOKEN", "")

	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(); cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), file+" has mode 0644") {
		t.Fatalf("with a file others may read: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MUSTER_TOKEN_FILE", empty)
	if _, err := run(); cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("with an empty file: %v", err)
	}

	flag := newRootCmd()
	flag.SetArgs([]string{"cluster", "list", "--help"})
	var help lockedBuffer
	flag.SetOut(&help)
	if err := flag.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(help.String(), "MUSTER_TOKEN_FILE") || !strings.Contains(help.String(), "process list") {
		t.Fatalf("--token help does not point at the environment or the file:\n%s", help.String())
	}
}

// A run's child says where it belongs in action list and show, and
// action list --run lists only a run's children.
func TestCLIActionListByRun(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	own, err := e.runJSONCreate()
	if err != nil {
		t.Fatal(err)
	}
	rules := &actions.Rules{Policy: live.New(approval.DefaultPolicy())}
	runID := action.NewID()
	var kid *store.Record
	if err := e.st.Update(context.Background(), func(tx store.Tx) error {
		var err error
		kid, err = rules.CreateChild(context.Background(), tx, actions.Child{RunID: runID, Stage: "canary", Wave: 2,
			ClusterID: "prod", NodeID: "db-1", Kind: "muster.io/debug.ping", Requester: "op", ApprovedBy: "appr"}, actions.Core)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	out, msg, code := e.run("op", "action", "list", "--run", runID)
	if code != 0 || !strings.Contains(out, kid.ID[:8]) || strings.Contains(out, own[:8]) ||
		!regexp.MustCompile(`(?m)^ID\s.*\sRUN\s+CREATED$`).MatchString(out) ||
		!strings.Contains(out, runID[:8]+"/canary/w2") {
		t.Fatalf("action list --run: %d %s\n%s", code, msg, out)
	}
	out, _, code = e.run("op", "action", "show", kid.ID)
	if code != 0 || !regexp.MustCompile(`(?m)^Run\s+`+runID+`$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^Stage\s+canary$`).MatchString(out) || !regexp.MustCompile(`(?m)^Wave\s+2$`).MatchString(out) {
		t.Fatalf("action show of a child: %s", out)
	}
	out, _, _ = e.run("op", "action", "show", kid.ID, "-o", "json")
	if got := decode[action.Action](t, out); got.RunID != runID || got.Stage != "canary" || got.Wave != 2 {
		t.Fatalf("action show -o json: %s", out)
	}
}

// TestCLIJoinTokens: a join token needs no name (one is made from its
// cluster), carries its TTL, cluster and uses, and is listed with them; a
// token without a name that is not a join token is a usage error, and so
// is a bad combination the core refuses.
func TestCLIJoinTokens(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	file := filepath.Join(t.TempDir(), "join.token")
	out, msg, code := e.run("admin", "token", "create", "--roles", "enroll", "--ttl", "2h", "--cluster", "prod",
		"--uses", "50", "--secret-file", file, "-o", "json")
	tok := decode[wire.Token](t, out)
	if code != 0 || !strings.HasPrefix(tok.Name, "join-prod-") || tok.ClusterID != "prod" || tok.UsesLeft == nil ||
		*tok.UsesLeft != 50 || tok.ExpiresTS == nil || time.Until(*tok.ExpiresTS) > 2*time.Hour || time.Until(*tok.ExpiresTS) < time.Hour {
		t.Fatalf("join token create: %d %s %s", code, out, msg)
	}
	out, _, code = e.run("admin", "token", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^join-prod-\S+\s+enroll\s+\S+ \S+ \S+\s+\S+ \S+ \S+\s+prod\s+50\s+-$`).MatchString(out) {
		t.Fatalf("token list: %s", out)
	}
	if _, msg, code := e.run("admin", "token", "create", "--role", "viewer"); code != 2 || !strings.Contains(msg, "NAME is required") {
		t.Fatalf("a viewer token without a name: %d %q", code, msg)
	}
	if _, msg, code := e.run("admin", "token", "create", "ci", "--role", "operator", "--uses", "3"); code != 1 || !strings.Contains(msg, "join tokens") {
		t.Fatalf("uses on an operator token: %d %q", code, msg)
	}
}

// TestCLIJoinTokenLabels: --labels gives a join token the labels the core
// holds for the nodes it enrolls; create and list show them; a bad label
// is a one-line usage error that creates nothing, and labels on a token
// that is not a join token are refused by the core.
func TestCLIJoinTokenLabels(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	file := filepath.Join(t.TempDir(), "join.token")
	out, msg, code := e.run("admin", "token", "create", "web-join", "--roles", "enroll", "--cluster", "prod",
		"--labels", "role=web,zone=a", "--secret-file", file, "-o", "json")
	if tok := decode[wire.Token](t, out); code != 0 || tok.Labels["role"] != "web" || tok.Labels["zone"] != "a" || len(tok.Labels) != 2 {
		t.Fatalf("join token create: %d %s %s", code, out, msg)
	}
	out, _, code = e.run("admin", "token", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^web-join\s+enroll\s.*\sprod\s+-\s+role=web,zone=a$`).MatchString(out) {
		t.Fatalf("token list: %s", out)
	}
	out, msg, code = e.run("admin", "token", "create", "bad-join", "--roles", "enroll", "--cluster", "prod", "--labels", "role=we b")
	if code != 2 || !strings.Contains(msg, "--labels") || strings.Count(strings.TrimSpace(msg), "\n") != 0 {
		t.Fatalf("a bad label: %d %q %q", code, out, msg)
	}
	if _, msg, code := e.run("admin", "token", "create", "ci", "--role", "operator", "--labels", "role=web"); code != 1 || !strings.Contains(msg, "join tokens") {
		t.Fatalf("labels on an operator token: %d %q", code, msg)
	}
	out, _, _ = e.run("admin", "token", "list")
	if strings.Contains(out, "bad-join") || strings.Contains(out, "ci ") {
		t.Fatalf("a refused token was created: %s", out)
	}
}

// TestArgHintSaysHowToSendAString: --arg version=2.0 sends a number; when a
// kind's args_schema wants a string there, the one-line refusal says how
// to quote it, and says nothing more for other refusals.
func TestArgHintSaysHowToSendAString(t *testing.T) {
	t.Parallel()
	refused := errors.New("unprocessable: node node-1: args do not match the kind's args_schema: args.version: got number, want string (422 unprocessable)")
	got := argHint(refused, []string{"seconds=5", "version=2.0"}).Error()
	if want := `--arg version sent a JSON number: for a string, quote it: --arg 'version="2.0"'`; !strings.Contains(got, want) ||
		!strings.HasPrefix(got, refused.Error()) || strings.Contains(got, "\n") {
		t.Fatalf("argHint = %q, want one line ending with %q", got, want)
	}
	other := errors.New("unprocessable: args.version: minLength: got 0, want 1 (422 unprocessable)")
	if got := argHint(other, []string{"version="}); got != other {
		t.Fatalf("argHint added to an unrelated refusal: %q", got)
	}
	if got := argHint(refused, []string{`version="2.0"`}); got != refused {
		t.Fatalf("argHint added to a quoted value: %q", got)
	}
}

// `muster node list` gives, in the node's reason, each kind whose
// args_schema the core refuses and why, escaped.
func TestCLINodeListSaysWhichKindsSchemaIsRefused(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		n, err := tx.Node(ctx, "prod", "db-1")
		if err != nil {
			return err
		}
		n.ArgsSchemas = map[string]json.RawMessage{"muster.io/debug.sleep": json.RawMessage(`{"pattern":"(?:\u001b-x){1,300}"}`)}
		return tx.PutNode(ctx, n)
	}); err != nil {
		t.Fatal(err)
	}
	out, _, code := e.run("op", "node", "list")
	if code != 0 || !strings.Contains(out, "muster.io/debug.sleep unusable, its args_schema refused: ") ||
		!strings.Contains(out, "schema too costly") || strings.Contains(out, "\x1b") {
		t.Fatalf("node list: %d %q", code, out)
	}
}
