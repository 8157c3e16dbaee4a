package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"go.yaml.in/yaml/v3"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

func TestCLIOutputForms(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	out, _, _ := e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping", "-o", "json")
	a := decode[action.Action](t, out)

	out, _, code := e.run("op", "action", "list", "-o", "name")
	if code != 0 || out != a.ID+"\n" {
		t.Fatalf("action list -o name: exit %d %q", code, out)
	}
	out, _, _ = e.run("op", "action", "show", a.ID[:8], "-o", "name")
	if out != a.ID+"\n" {
		t.Fatalf("action show -o name: %q", out)
	}
	out, _, _ = e.run("op", "events", "--type", "action.created", "-o", "name")
	if !regexp.MustCompile(`^\d+\n$`).MatchString(out) {
		t.Fatalf("events -o name: %q", out)
	}
	out, _, _ = e.run("op", "cluster", "list", "-o", "name")
	if out != "prod\n" {
		t.Fatalf("cluster list -o name: %q", out)
	}

	out, _, code = e.run("op", "action", "show", a.ID, "-o", "yaml")
	var y map[string]any
	if err := yaml.Unmarshal([]byte(out), &y); code != 0 || err != nil || y["id"] != a.ID || y["kind"] != "muster.io/debug.ping" ||
		y["state"] != string(action.PendingApprove) {
		t.Fatalf("action show -o yaml: %v %v\n%s", err, y, out)
	}
	out, _, _ = e.run("op", "node", "list", "-o", "yaml")
	if err := yaml.Unmarshal([]byte(out), &y); err != nil || !strings.Contains(out, "cluster_id: prod") {
		t.Fatalf("node list -o yaml: %v\n%s", err, out)
	}

	table, _, _ := e.run("op", "action", "list")
	wide, _, code := e.run("op", "action", "list", "-o", "wide")
	if code != 0 || strings.Contains(table, a.ID) || !strings.Contains(wide, a.ID) || !strings.Contains(wide, "ARGS") {
		t.Fatalf("action list -o wide should add the full id and the args:\n%s\nwide:\n%s", table, wide)
	}
	out, _, _ = e.run("op", "node", "list", "-o", "wide")
	if !strings.Contains(out, "muster.io/debug.ping,muster.io/debug.sleep") {
		t.Fatalf("node list -o wide should list the kinds:\n%s", out)
	}
}

// A YAML print escapes what a table escapes: nothing a record holds can
// drive the terminal.
func TestCLIYAMLIsEscaped(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if err := writeYAML(&b, map[string]string{"output": "ok\u202eevil\x1b[2J"}); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(b.String(), "\u202e\x1b") {
		t.Fatalf("yaml printed raw controls: %q", b.String())
	}
}

func TestCLICompletionAsksTheCore(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	out, _, _ := e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping", "-o", "json")
	a := decode[action.Action](t, out)
	// e.run puts --addr and --token after the words, as a shell's line
	// would have them before; __complete completes its last word, so the
	// flags go before it here.
	run := func(args ...string) []string {
		t.Helper()
		out, _, _ := e.runRaw(append([]string{"__complete"}, args...)...)
		var vals []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.HasPrefix(l, ":") {
				break
			}
			v, _, _ := strings.Cut(l, "\t")
			vals = append(vals, v)
		}
		return vals
	}
	conn := []string{"--addr", e.url, "--token", e.secrets["op"]}
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"action ids", append(slices.Clone(conn), "action", "approve", ""), []string{a.ID}},
		{"action id prefix", append(slices.Clone(conn), "action", "show", a.ID[:4]), []string{a.ID}},
		{"no ids past the first argument", append(slices.Clone(conn), "action", "show", a.ID, ""), nil},
		{"clusters", append(slices.Clone(conn), "cluster", "show", ""), []string{"prod"}},
		{"cluster flag", append(slices.Clone(conn), "action", "list", "--cluster", ""), []string{"prod"}},
		{"node flag", append(slices.Clone(conn), "action", "create", "--node", ""), []string{"db-1"}},
		{"kind flag", append(slices.Clone(conn), "action", "create", "--kind", "muster.io/debug.s"), []string{"muster.io/debug.sleep"}},
		{"state flag, comma list", append(slices.Clone(conn), "action", "list", "--state", "NEW,RUN"), []string{"NEW,RUNNING"}},
		{"output flag", append(slices.Clone(conn), "cluster", "list", "-o", "y"), []string{"yaml"}},
		{"event type", append(slices.Clone(conn), "events", "--type", "node.d"), []string{"node.down", "node.drained"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := run(c.args...); !slices.Equal(got, c.want) {
				t.Fatalf("completed %v, want %v", got, c.want)
			}
		})
	}
	// A core that does not answer completes nothing, and quickly.
	start := time.Now()
	if got := run("--addr", "http://127.0.0.1:1", "--token", "x", "action", "show", ""); len(got) != 0 {
		t.Fatalf("completion without a core: %v", got)
	}
	if d := time.Since(start); d > completionTimeout+time.Second {
		t.Fatalf("completion without a core took %s", d)
	}
}

// runRaw runs the command line as given, without the test core's flags.
func (e *cliEnv) runRaw(args ...string) (string, string, int) {
	e.t.Helper()
	root := newRootCmd()
	root.SetArgs(args)
	var out lockedBuffer
	root.SetOut(&out)
	root.SetErr(&lockedBuffer{})
	if err := root.ExecuteContext(context.Background()); err != nil {
		return out.String(), err.Error(), cli.ExitCode(err)
	}
	return out.String(), "", 0
}

func TestCLISeveralAddressesFirstDown(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	up := e.url
	e.url = "http://127.0.0.1:1, " + up
	out, msg, code := e.run("op", "cluster", "list", "-o", "name")
	if code != 0 || out != "prod\n" {
		t.Fatalf("first core down, second up: exit %d %q %s", code, out, msg)
	}
	// The event stream moves on too.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var buf lockedBuffer
	done := make(chan int, 1)
	go func() { c, _ := e.runCtx(ctx, &buf, "op", "events", "--follow", "-o", "name"); done <- c }()
	e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping")
	testwait.For(t, "an event through the second core", func() bool { return strings.TrimSpace(buf.String()) != "" })
	cancel()
	<-done

	e.url = "http://127.0.0.1:1,127.0.0.1:2"
	_, msg, code = e.run("op", "cluster", "list")
	if code != 1 || !strings.Contains(msg, "no core reachable at http://127.0.0.1:1, http://127.0.0.1:2") || strings.Contains(msg, "\n") {
		t.Fatalf("no core up: exit %d %q", code, msg)
	}
}

func TestCLIErrorHints(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	tlsCore := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	tlsCore.StartTLS()
	t.Cleanup(tlsCore.Close)
	plainURL := "http://" + strings.TrimPrefix(tlsCore.URL, "https://")
	for _, c := range []struct {
		name, addr, want string
	}{
		{"plain http to the TLS port", plainURL, "serves TLS: use https:// in MUSTER_ADDR"},
		{"no scheme to the TLS port", strings.TrimPrefix(plainURL, "http://"), "serves TLS: use https://"},
		{"unknown CA", tlsCore.URL, "set MUSTER_CACERT (or --cacert)"},
		{"https to a plain port", "https://" + strings.TrimPrefix(e.url, "http://"), "serves plain HTTP: use http://"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, msg, code := e.runRaw("cluster", "list", "--addr", c.addr, "--token", "x")
			if code != 1 || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") || strings.Contains(msg, "(400 )") {
				t.Fatalf("exit %d, %q; want %q", code, msg, c.want)
			}
		})
	}
	// A typo's suggestion is indented with a tab, not a printed "\t".
	_, msg, _ := e.runRaw("acton")
	if got := cli.ErrorText(errors.New(msg)); !strings.Contains(got, "\taction") || strings.Contains(got, `\t`) {
		t.Fatalf("typo: %q", got)
	}
}

func TestCLIApproveRejectWithReason(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	create := func() action.Action {
		out, _, _ := e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping", "-o", "json")
		return decode[action.Action](t, out)
	}
	a, b := create(), create()
	if _, msg, code := e.run("appr", "action", "approve", a.ID, "--reason", "change CHG-7"); code != 0 {
		t.Fatalf("approve --reason: %s", msg)
	}
	if _, msg, code := e.run("appr", "action", "reject", b.ID, "--reason", "not tonight"); code != 0 {
		t.Fatalf("reject --reason: %s", msg)
	}
	out, _, _ := e.run("op", "action", "show", a.ID)
	if !regexp.MustCompile(`PENDING_APPROVE\s+PENDING_SCHEDULE\s+appr\s+approved: change CHG-7`).MatchString(out) {
		t.Fatalf("approve reason not shown:\n%s", out)
	}
	out, _, _ = e.run("op", "action", "show", b.ID)
	if !strings.Contains(out, "rejected: not tonight") {
		t.Fatalf("reject reason not shown:\n%s", out)
	}
}

func TestCLIEventsFilters(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	out, _, _ := e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping", "-o", "json")
	a := decode[action.Action](t, out)
	e.run("appr", "action", "approve", a.ID)
	out, msg, code := e.run("op", "events", "--type", "action.approved", "-o", "json")
	if code != 0 {
		t.Fatalf("events --type: %s", msg)
	}
	l := decode[wire.EventList](t, out)
	if code != 0 || len(l.Events) != 1 || l.Events[0].Type != "action.approved" {
		t.Fatalf("--type action.approved: %s", out)
	}
	out, _, _ = e.run("op", "events", "--type", "action.*", "--node", "db-1", "-o", "json")
	if l := decode[wire.EventList](t, out); len(l.Events) != 2 {
		t.Fatalf("--type action.* --node db-1: %s", out)
	}
	out, _, _ = e.run("op", "events", "--node", "db-2", "-o", "json")
	if l := decode[wire.EventList](t, out); len(l.Events) != 0 {
		t.Fatalf("--node db-2: %s", out)
	}
	// Listed and followed, an event prints the same line.
	listed, _, _ := e.run("op", "events", "--type", "action.approved")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var buf lockedBuffer
	done := make(chan struct{})
	go func() { e.runCtx(ctx, &buf, "op", "events", "--type", "action.approved", "--follow"); close(done) }()
	testwait.For(t, "the followed event", func() bool { return strings.Contains(buf.String(), "action.approved") })
	cancel()
	<-done
	if buf.String() != listed {
		t.Fatalf("followed %q, listed %q", buf.String(), listed)
	}
}

// TestEveryArgumentNamingACoreObjectCompletes: every command whose first
// argument is an action, a run, a cluster, a node, a playbook or a schedule
// completes it from the core, and so does --playbook (run promote, run
// urgent and playbook plan once completed nothing).
func TestEveryArgumentNamingACoreObjectCompletes(t *testing.T) {
	t.Parallel()
	root := newRootCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			walk(s)
		}
		words := strings.Fields(c.Use)
		if len(words) < 2 {
			return
		}
		path := c.CommandPath()
		named := strings.HasPrefix(path, "muster playbook ") || strings.HasPrefix(path, "muster schedule ")
		switch arg := words[1]; {
		case arg == "ACTION", arg == "RUN", arg == "CLUSTER", arg == "NODE",
			named && (arg == "NAME" || arg == "FILE|NAME") && words[0] != "create":
			if c.ValidArgsFunction == nil {
				t.Errorf("%s: its %s does not complete", path, arg)
			}
		}
		if c.Flags().Lookup("playbook") != nil {
			if _, ok := c.GetFlagCompletionFunc("playbook"); !ok {
				t.Errorf("%s: --playbook does not complete", path)
			}
		}
	}
	walk(root)
}
