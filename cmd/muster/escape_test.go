package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// hostile is what a forged record carries: a colour change, a carriage return
// that would rewrite the line, a C1 CSI, a bidi override and a terminal title.
const (
	red      = "\x1b[31m"
	hostile  = red + "FORGED\rDONE\u009b2J\u202etxt.exe\x1b]0;pwned\x07"
	escaped  = `\x1b[31mFORGED\rDONE\u009b2J\u202etxt.exe\x1b]0;pwned\x07`
	rawBytes = "\x1b\r\x07\x7f\u009b\u202e"
)

// assertSafe fails when out holds a character a terminal would act on, or
// misses the escaped form of each want.
func assertSafe(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || r == '\t' {
			t.Errorf("%s printed %U raw:\n%q", what, r, out)
			return
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s does not show %s escaped:\n%s", what, w, out)
		}
	}
}

// TestCLIEscapesControlCharacters: whatever a record holds (an agent made it,
// a command printed it, a forged push set approved_by), the client prints
// control characters and bidi overrides as visible escapes, in every table,
// in show, watch and events, and -o json stays escaped JSON of the same values.
func TestCLIEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.Policy{Default: approval.None, TTL: time.Hour})
	out, msg, code := e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping", "-o", "json")
	if code != 0 {
		t.Fatalf("create: %s", msg)
	}
	a := decode[action.Action](t, out)
	runID := action.NewID()
	ctx := context.Background()
	now := time.Now().UTC()
	err := e.st.Update(ctx, func(tx store.Tx) error {
		rec, err := tx.Action(ctx, a.ID)
		if err != nil {
			return err
		}
		rec.Requester = "alice" + hostile
		rec.ApprovedBy = "bob" + hostile
		rec.Output = "first line\nsecond " + hostile + "\n"
		rec.Args = json.RawMessage(`{"note":"` + "\u009b\u202e" + `","esc":"\u001b[31m\r"}`)
		rec.StateReason = "reason " + hostile
		from := rec.State
		rec.State = action.Done
		if err := tx.UpdateAction(ctx, rec); err != nil {
			return err
		}
		if err := tx.AppendHistory(ctx, a.ID, action.Transition{TS: now, From: from, To: action.Done, Actor: "db-1" + hostile, Reason: "ran " + hostile}); err != nil {
			return err
		}
		if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventActionStateChanged, Actor: "db-1" + hostile, ClientAddr: "10.0.0.1" + red,
			ClusterID: "prod", NodeID: "db-1", ActionID: a.ID, Message: "message " + hostile}); err != nil {
			return err
		}
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "prod", Status: store.ClusterAlert, StatusReason: "alert " + hostile, UpdatedTS: now}); err != nil {
			return err
		}
		if err := tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: "db-2", Addr: "10.0.0.2:7420" + red, Source: store.SourceGossip,
			Status: store.NodeDown, StatusReason: "down " + hostile, Version: "v1" + red, UpdatedTS: now}); err != nil {
			return err
		}
		if err := tx.InsertRun(ctx, &store.Run{ID: runID, ClusterID: "prod", State: store.RunFailed, StateReason: "why " + hostile,
			Requester: "alice" + hostile, ApprovedBy: "bob" + hostile, Digest: "d" + red, CreatedTS: now, UpdatedTS: now,
			Stages: []store.RunStage{{Name: "s" + red, Kind: "muster.io/debug.ping", Args: json.RawMessage(`{}`), Nodes: []string{"db-1"},
				OnFailure: "abort" + red, State: "FAILED" + red}}}); err != nil {
			return err
		}
		return tx.InsertToken(ctx, &store.Token{Name: "eve" + hostile, Roles: []string{store.RoleViewer}, Hash: "h-eve", CreatedTS: now})
	})
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		who  string
		args []string
		want []string
	}{
		{"op", []string{"action", "show", a.ID}, []string{"alice" + escaped, "bob" + escaped, "second " + escaped, `\u009b\u202e`, "reason " + escaped, "db-1" + escaped, "ran " + escaped}},
		{"op", []string{"action", "list"}, []string{"alice" + escaped}},
		{"op", []string{"action", "watch", a.ID}, []string{"ran " + escaped, "db-1" + escaped}},
		{"op", []string{"events"}, []string{"db-1" + escaped, `10.0.0.1\x1b[31m`, "message " + escaped}},
		{"op", []string{"node", "list"}, []string{`10.0.0.2:7420\x1b[31m`, `v1\x1b[31m`, "down " + escaped}},
		{"op", []string{"cluster", "show", "prod"}, []string{"alert " + escaped, "down " + escaped}},
		{"op", []string{"cluster", "list"}, []string{"alert " + escaped}},
		{"admin", []string{"token", "list"}, []string{"eve" + escaped}},
		{"op", []string{"run", "list"}, []string{"alice" + escaped}},
		{"op", []string{"run", "show", runID}, []string{"why " + escaped, "bob" + escaped, `d\x1b[31m`, `s\x1b[31m`, `abort\x1b[31m`, `FAILED\x1b[31m`}},
	} {
		what := strings.Join(c.args, " ")
		out, msg, code := e.run(c.who, c.args...)
		if code != 0 {
			t.Fatalf("%s: exit %d %s", what, code, msg)
		}
		assertSafe(t, what, out, c.want...)
	}

	// run watch ends on the failed run, printing its lines escaped.
	out, msg, code = e.run("op", "run", "watch", runID)
	if code != 1 {
		t.Fatalf("run watch of a failed run: exit %d %s", code, msg)
	}
	assertSafe(t, "run watch", out, `s\x1b[31m`, "why "+escaped)
	assertSafe(t, "the run watch error", cli.ErrorText(errors.New(msg)), "why "+escaped)

	// events --follow prints each event as it arrives, escaped too.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var buf lockedBuffer
	done := make(chan int, 1)
	go func() {
		code, _ := e.runCtx(fctx, &buf, "op", "events", "--follow", "--limit", "1")
		done <- code
	}()
	testwait.For(t, "the forged event", func() bool { return strings.Contains(buf.String(), "message ") })
	cancel()
	<-done
	assertSafe(t, "events --follow", buf.String(), "db-1"+escaped, "message "+escaped)

	// -o json: the same values, every control character a JSON escape.
	for _, args := range [][]string{{"action", "show", a.ID, "-o", "json"}, {"action", "list", "-o", "json"}, {"events", "-o", "json"}} {
		out, _, code := e.run("op", args...)
		if code != 0 || strings.ContainsAny(out, rawBytes) {
			t.Fatalf("%s printed raw control characters: %q", strings.Join(args, " "), out)
		}
	}
	out, _, _ = e.run("op", "action", "show", a.ID, "-o", "json")
	got := decode[action.Action](t, out)
	if got.ApprovedBy != "bob"+hostile || got.Requester != "alice"+hostile || got.Output != "first line\nsecond "+hostile+"\n" {
		t.Fatalf("-o json changed the values: %+v", got)
	}
	var args map[string]string
	if err := json.Unmarshal(got.Args, &args); err != nil || args["note"] != "\u009b\u202e" || args["esc"] != "\x1b[31m\r" {
		t.Fatalf("-o json args %s: %v", got.Args, err)
	}
	out, _, _ = e.run("op", "events", "-o", "json")
	if l := decode[wire.EventList](t, out); l.Events[len(l.Events)-1].Message != "message "+hostile {
		t.Fatalf("events -o json changed the message: %q", l.Events[len(l.Events)-1].Message)
	}
}

// An error answer is printed escaped too: its message is the server's.
func TestCLIEscapesErrorAnswers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeConflict,
			Message: "no " + hostile, Matches: []string{"m" + hostile}}})
	}))
	defer srv.Close()
	root := newRootCmd()
	root.SetArgs([]string{"action", "show", "abcdef01", "--addr", srv.URL, "--token", "mst_x"})
	root.SetOut(&lockedBuffer{})
	root.SetErr(&lockedBuffer{})
	err := root.ExecuteContext(context.Background())
	if err == nil {
		t.Fatal("no error")
	}
	assertSafe(t, "the error line", cli.ErrorText(err), "no "+escaped, "m"+escaped)
	// Lines of a multi-line error stay lines.
	if got := cli.ErrorText(errors.New("invalid configuration:\n  a: " + red)); got != "invalid configuration:\n  a: \\x1b[31m" {
		t.Fatalf("ErrorText = %q", got)
	}
}
