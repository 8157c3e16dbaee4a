package main

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/testwait"
)

// listCommands are the command lines of every list muster has: each
// "list" subcommand, and the other commands that print a list.
func listCommands(root *cobra.Command) [][]string {
	out := [][]string{{"events"}}
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			p := append(slices.Clone(path), sub.Name())
			if sub.Name() == "list" {
				out = append(out, p)
			}
			walk(sub, p)
		}
	}
	walk(root, nil)
	return out
}

// headerRE is a table's header: column names in capitals.
var headerRE = regexp.MustCompile(`^[A-Z][A-Z ]*[A-Z](  +[A-Z][A-Z ]*[A-Z])*$`)

func columnsOf(header string) []string {
	return regexp.MustCompile(`  +`).Split(strings.TrimSpace(header), -1)
}

// Issue 35, items 6 and 7 of "The CLI": every list prints every -o form,
// every table starts with its header, -o wide has every column of the
// table and more where the list has more to say (run list: PLAYBOOK,
// FAILED, SCHEDULE, NOT BEFORE; action list: RUN, STEP, ATTEMPT).
func TestEveryListCommandPrintsEveryOutputForm(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping")
	if _, msg, code := e.run("op", "run", "create", "--cluster", "prod", "--kind", "muster.io/debug.ping", "--target", "all"); code != 0 {
		t.Fatalf("run create: %s", msg)
	}
	wider := map[string][]string{
		"run list":    {"PLAYBOOK", "FAILED", "SCHEDULE", "NOT BEFORE"},
		"action list": {"RUN", "STEP", "ATTEMPT", "ARGS"},
		"events":      {"CLUSTER", "NODE", "RUN"},
	}
	cmds := listCommands(newRootCmd())
	if len(cmds) < 10 {
		t.Fatalf("found only %d list commands: %v", len(cmds), cmds)
	}
	for _, args := range cmds {
		name := strings.Join(args, " ")
		t.Run(name, func(t *testing.T) {
			table, msg, code := e.run("admin", append(args, "-o", "table")...)
			if code != 0 {
				t.Fatalf("-o table: exit %d %s", code, msg)
			}
			head, _, _ := strings.Cut(table, "\n")
			if !headerRE.MatchString(strings.TrimSpace(head)) {
				t.Fatalf("-o table starts with no header:\n%s", table)
			}
			wide, msg, code := e.run("admin", append(args, "-o", "wide")...)
			if code != 0 {
				t.Fatalf("-o wide: exit %d %s", code, msg)
			}
			wideHead, _, _ := strings.Cut(wide, "\n")
			if !headerRE.MatchString(strings.TrimSpace(wideHead)) {
				t.Fatalf("-o wide starts with no header:\n%s", wide)
			}
			cols, wideCols := columnsOf(head), columnsOf(wideHead)
			for _, c := range append(cols, wider[name]...) {
				if !slices.Contains(wideCols, c) {
					t.Errorf("-o wide lacks column %s: %v (table: %v)", c, wideCols, cols)
				}
			}
			if want := wider[name]; len(want) > 0 && len(strings.Split(strings.TrimSpace(wide), "\n")) < 2 {
				t.Errorf("-o wide printed no row to fill its columns:\n%s", wide)
			}
			out, msg, code := e.run("admin", append(args, "-o", "json")...)
			if code != 0 || !json.Valid([]byte(out)) {
				t.Fatalf("-o json: exit %d %s\n%s", code, msg, out)
			}
			out, msg, code = e.run("admin", append(args, "-o", "yaml")...)
			var y any
			if err := yaml.Unmarshal([]byte(out), &y); code != 0 || err != nil {
				t.Fatalf("-o yaml: exit %d %s %v\n%s", code, msg, err, out)
			}
			if _, msg, code = e.run("admin", append(args, "-o", "name")...); code != 0 {
				t.Fatalf("-o name: exit %d %s", code, msg)
			}
		})
	}
}

// Issue 35, item 6: --watch on action, run and node list prints the table,
// then one line for each row that changes (and each new row), never again
// a row that did not change, and ends without error when interrupted.
func TestListWatchPrintsALineForEachChangedRow(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	for _, c := range []struct {
		list []string
		// first makes the row watched from the start and returns the text
		// that names it in a line; change changes it, its line then
		// matching changed; another adds a row.
		first   func() string
		change  func(key string)
		changed string
		another func() string
	}{
		{
			list: []string{"action", "list"},
			first: func() string {
				id, err := e.runJSONCreate()
				if err != nil {
					t.Fatal(err)
				}
				return shortID(id)
			},
			change:  func(id string) { e.run("appr", "action", "approve", id) },
			changed: "PENDING_SCHEDULE",
			another: func() string { id, _ := e.runJSONCreate(); return shortID(id) },
		},
		{
			list: []string{"run", "list"},
			first: func() string {
				out, _, _ := e.run("op", "run", "create", "--cluster", "prod", "--kind", "muster.io/debug.ping", "--target", "all", "-o", "json")
				return shortID(decode[struct{ ID string }](t, out).ID)
			},
			change:  func(id string) { e.run("appr", "run", "reject", id, "--reason", "not today") },
			changed: "CANCELLED",
			another: func() string {
				out, _, _ := e.run("op", "run", "create", "--cluster", "prod", "--kind", "muster.io/debug.sleep", "--target", "all", "-o", "json")
				return shortID(decode[struct{ ID string }](t, out).ID)
			},
		},
		{
			list:    []string{"node", "list"},
			first:   func() string { return "db-1" },
			change:  func(string) { e.run("op", "node", "drain", "db-1", "--reason", "disk swap") },
			changed: "DRAINED",
			another: func() string {
				e.addNode("web-9")
				return "web-9"
			},
		},
	} {
		t.Run(strings.Join(c.list, " "), func(t *testing.T) {
			key := c.first()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var buf lockedBuffer
			done := make(chan int, 1)
			go func() {
				code, _ := e.runCtx(ctx, &buf, "op", append(c.list, "-w", "--watch-interval", "100ms")...)
				done <- code
			}()
			lines := func(sub string) int {
				n := 0
				for _, l := range strings.Split(buf.String(), "\n") {
					if strings.Contains(l, sub) {
						n++
					}
				}
				return n
			}
			testwait.For(t, "the table", func() bool { return lines(key) == 1 })
			if !headerRE.MatchString(strings.TrimSpace(strings.Split(buf.String(), "\n")[0])) {
				t.Fatalf("the watch starts with no header:\n%s", buf.String())
			}
			c.change(key)
			testwait.For(t, "the changed row's line", func() bool { return lines(key) == 2 })
			if last := strings.Split(strings.TrimSpace(buf.String()), "\n"); !strings.Contains(last[len(last)-1], c.changed) {
				t.Fatalf("the changed row's line should say %s:\n%s", c.changed, buf.String())
			}
			// Polls go on; a new row prints its line, the unchanged one none.
			other := c.another()
			testwait.For(t, "the new row's line", func() bool { return lines(other) == 1 })
			if n := lines(key); n != 2 {
				t.Fatalf("an unchanged row printed again (%d lines):\n%s", n, buf.String())
			}
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Fatalf("the watch ended with exit %d", code)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the watch did not end when interrupted")
			}
		})
	}
}

// addNode stores a node of cluster prod, up, as discovery would.
func (e *cliEnv) addNode(id string) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: id, Addr: "127.0.0.1:9", Source: store.SourceStatic,
			Status: store.NodeUp, Kinds: []string{"muster.io/debug.ping"}, UpdatedTS: time.Now()})
	}); err != nil {
		e.t.Fatal(err)
	}
}
