package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
)

// openPTY opens a pseudo-terminal pair: the terminal side a program
// writes to, and the side that reads what the terminal shows.
func openPTY(t *testing.T) (term, reader *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Raw output: no \n → \r\n translation in what the reader sees.
	tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return s, m
}

// run watch on a terminal draws the run's lines in place: what the
// terminal shows at the end is the run's lines, once each.
func TestRunWatchOnAPseudoTerminal(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	ctx := context.Background()
	now := time.Now().UTC()
	runID := action.NewID()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		return tx.InsertRun(ctx, &store.Run{ID: runID, ClusterID: "prod", State: store.RunDone, Requester: "op", ApprovedBy: "appr",
			Digest: "d", CreatedTS: now, UpdatedTS: now, Stages: []store.RunStage{{Name: "restart", Kind: "muster.io/debug.ping",
				Args: json.RawMessage(`{}`), Nodes: []string{"db-1"}, OnFailure: "abort", State: "DONE"}}})
	}); err != nil {
		t.Fatal(err)
	}
	tty, reader := openPTY(t)
	c := client.NewCore(e.url, e.secrets["op"], nil)
	if err := watchRun(ctx, c, runID, tty, false, false); err != nil {
		t.Fatal(err)
	}
	r, err := c.Run(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	want := runLines(r)
	// Read what the terminal got: at least the escape that starts a redraw
	// and the last line.
	var got strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), want[len(want)-1]+"\n\x1b[J") {
		if err := reader.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := reader.Read(buf)
		if err != nil && err != io.EOF {
			t.Fatalf("read the terminal: %v (got %q)", err, got.String())
		}
		got.Write(buf[:n])
	}
	var s screen
	s.Write([]byte(got.String()))
	if strings.Join(s.lines, "\n") != strings.Join(want, "\n") || !strings.Contains(got.String(), "\x1b[2K") {
		t.Fatalf("terminal shows:\n%s\nwant:\n%s\n(raw %q)", strings.Join(s.lines, "\n"), strings.Join(want, "\n"), got.String())
	}
}

// run watch of a PAUSED run on a terminal draws the run's lines, then says
// below them why it is paused and who may go on, and ends (errRunPaused).
func TestRunWatchOfAPausedRunOnAPseudoTerminal(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	ctx := context.Background()
	id := e.storePausedRun(fmt.Sprintf(runs.ReasonCanary, "restart", 1, 0))
	tty, reader := openPTY(t)
	c := client.NewCore(e.url, e.secrets["op"], nil)
	err := watchRun(ctx, c, id, tty, false, false)
	if !errors.Is(err, errRunPaused) || cli.ExitCode(err) != 3 {
		t.Fatalf("watch of a paused run: %v (exit %d), want errRunPaused, exit 3", err, cli.ExitCode(err))
	}
	r, err := c.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := append(runLines(r), pausedText(r, true))
	var got strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), want[len(want)-1]+"\n") {
		if err := reader.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := reader.Read(buf)
		if err != nil && err != io.EOF {
			t.Fatalf("read the terminal: %v (got %q)", err, got.String())
		}
		got.Write(buf[:n])
	}
	var s screen
	s.Write([]byte(got.String()))
	if strings.Join(s.lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("terminal shows:\n%s\nwant:\n%s", strings.Join(s.lines, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(s.lines[0], "PAUSED") || !strings.Contains(want[len(want)-1], "muster run promote "+id) {
		t.Fatalf("the stage line %q or the pause text %q", s.lines[0], want[len(want)-1])
	}
}
