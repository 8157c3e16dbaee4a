package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/secret"
)

// A kind with restarts_agent runs a command that restarts the agent (it
// upgrades the agent's own package, whose postinst restarts the service).
// The agent launches it in a transient unit of its own (systemd-run without
// --wait), so that neither the agent's stop nor its unit's KillMode reaches
// it; a wrapper shell writes the command's output and exit status into the
// action's directory under <data_dir>/detached, and whichever agent runs
// next reads them and finishes the action.
//
// At most once: the agent commits the phase "launching" first, then writes
// the marker "pending" (atomically, by rename) and, to launch, links it to
// "launched" (a link fails when "launched" exists) and syncs the directory
// before it starts systemd-run: only the one claim that succeeds may
// launch, whatever the queue's phase says, and an agent
// that finds "launched" never launches again, whatever happened after it
// (the command may have started or not): it waits for the status file, up to
// the action's deadline.

// DetachedDir is the directory of restarts_agent actions' files in the
// agent's data directory.
const DetachedDir = "detached"

// Files of one detached action.
const (
	detachedRecord   = "record.json" // the record on the command's stdin; removed once opened
	detachedPending  = "pending"     // the launch marker, before the launch
	detachedLaunched = "launched"    // the launch marker, claimed: it was (or may have been) launched
	detachedOutput   = "output"      // stdout and stderr of the command
	detachedStatus   = "status"      // its exit status, written last (by rename)
)

// detachedWrapper runs in the unit: $0 is the action's directory, "$@" the
// command. The status is written by rename, so that a reader sees all of it
// or nothing.
const detachedWrapper = `cd "$0" || exit 1
exec 0<` + detachedRecord + `
rm -f ` + detachedRecord + `
"$@" >` + detachedOutput + ` 2>&1
echo $? >` + detachedStatus + `.tmp
mv -f ` + detachedStatus + `.tmp ` + detachedStatus

// detachedPoll is how often the agent looks for the status file.
const detachedPoll = 200 * time.Millisecond

func (h *externalHandler) detachedDir(id string) string {
	return filepath.Join(h.env.StateDir, DetachedDir, id)
}

// detachedStep is step for a restarts_agent kind; p.Phase is launching or
// running (the runner committed launching before).
func (h *externalHandler) detachedStep(x *Exec, st *extState, p extProgress, stop bool) Result {
	dir := h.detachedDir(x.Action.ID)
	launched := exists(filepath.Join(dir, detachedLaunched))
	if stop {
		// Cancelled or past its deadline: stop the unit if it was
		// launched, and report the end only once it is stopped; the
		// command's own end, if it came first, decides.
		if res, ok := h.detachedResult(x, dir); ok {
			return res
		}
		if launched {
			if st.unitStopped == nil {
				st.unitStopped = stopUnitAsync(h.systemctl(), UnitName(x.Action.ID), h.grace())
			}
			select {
			case <-st.unitStopped:
			default:
				return Result{Status: Running, After: detachedPoll}
			}
			if res, ok := h.detachedResult(x, dir); ok {
				return res
			}
		}
		removeRecord(dir)
		return Result{Status: Stopped}
	}
	if p.Phase == phaseLaunching && !launched {
		if err := h.launchDetached(x, st, dir); err != nil {
			removeRecord(dir)
			x.Printf("muster: %v", err)
			return Result{Status: Failed, Message: err.Error()}
		}
		x.SetProgress(extProgress{Phase: phaseRunning})
		return Result{Status: Running, After: detachedPoll}
	}
	if x.Resumed && st.proc == nil && !st.noted {
		st.noted = true
		x.Printf("muster: the agent restarted after it launched the command; waiting for its result (it is never launched twice)")
	}
	if res, ok := h.detachedResult(x, dir); ok {
		return res
	}
	if st.proc != nil && st.proc.exited() {
		code, err := st.proc.result()
		st.proc = nil
		if err != nil || code != 0 {
			// systemd-run failed; the unit may have started all the
			// same (its reply lost, systemd-run killed): while systemd
			// says it runs, wait for its status.
			if state := unitState(h.systemctl(), UnitName(x.Action.ID)); unitRunning(state) {
				x.Printf("muster: systemd-run failed (%s) but the unit is %s: waiting for its result", exitMessage("launch", code, err), state)
				return Result{Status: Running, After: detachedPoll}
			}
			if res, ok := h.detachedResult(x, dir); ok {
				return res
			}
			removeRecord(dir)
			return Result{Status: Failed, Message: exitMessage("launch (systemd-run)", code, err)}
		}
	}
	return Result{Status: Running, After: detachedPoll}
}

// launchDetached writes the record and the marker, claims the marker and
// starts systemd-run.
func (h *externalHandler) launchDetached(x *Exec, st *extState, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("detached: %v", err)
	}
	if strings.ContainsAny(dir, " \t\n\"'\\") {
		// ReadWritePaths= splits on spaces and unquotes.
		return fmt.Errorf("detached: data_dir %q holds a space, quote or backslash, which a unit's ReadWritePaths cannot name", h.env.StateDir)
	}
	rec := x.Action
	read := h.env.Secrets
	if read == nil {
		read = noSecrets
	}
	args, red, err := secret.Resolve(rec.Args, read)
	if err != nil {
		return err
	}
	rec.Args = args
	x.addRedactor(red)
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, detachedRecord), b); err != nil {
		return fmt.Errorf("detached: %v", err)
	}
	pending := filepath.Join(dir, detachedPending)
	if !exists(pending) {
		if err := writeAtomic(pending, nil); err != nil {
			return fmt.Errorf("detached: %v", err)
		}
	}
	// The one point of no return: from here on, no agent launches it again.
	if err := claimLaunch(dir); err != nil {
		return err
	}
	prof := Profiles[h.spec.Privileges]
	env := commandEnv(x, h.env, h.spec.Env)
	argv := append([]string{"/bin/sh", "-c", detachedWrapper, dir}, h.spec.Run...)
	// The wrapper writes the output and the status into dir, which the
	// profile's writable paths may not include.
	props := append(h.unitProps(), "ReadWritePaths="+dir)
	argv = unitArgv(h.systemdRun(), UnitName(x.Action.ID), prof, props, envNames(env), argv, false)
	x.Printf("muster: launching the command apart from the agent (unit %s): its result is recorded when it ends, by this agent or the next", UnitName(x.Action.ID))
	proc, err := startProcess(argv, &rec, x, h.env, h.spec.Env, nil, x)
	if err != nil {
		return err
	}
	st.proc = proc
	return nil
}

// claimLaunch turns the marker pending into launched: a link, which fails
// when launched exists (so that of two claims, one only succeeds, whatever
// the queue says), then synced to disk with the directory before anything
// is launched, so that a crash after the launch never forgets it.
func claimLaunch(dir string) error {
	pending, launched := filepath.Join(dir, detachedPending), filepath.Join(dir, detachedLaunched)
	if err := os.Link(pending, launched); err != nil {
		return fmt.Errorf("detached: claim the launch marker: %v", err)
	}
	if err := os.Remove(pending); err != nil {
		return fmt.Errorf("detached: claim the launch marker: %v", err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("detached: claim the launch marker: %v", err)
	}
	return nil
}

// removeRecord removes the record, which holds the args with their secrets
// resolved: once the command has read it, or will never read it.
func removeRecord(dir string) {
	_ = os.Remove(filepath.Join(dir, detachedRecord))
	_ = os.Remove(filepath.Join(dir, detachedRecord+".tmp"))
}

// detachedResult reads the status file: ok false while there is none.
func (h *externalHandler) detachedResult(x *Exec, dir string) (Result, bool) {
	b, err := os.ReadFile(filepath.Join(dir, detachedStatus))
	if err != nil {
		return Result{}, false
	}
	// The agent reading the output may not be the one that launched the
	// command: it learns the secrets' values to redact again.
	read := h.env.Secrets
	if read == nil {
		read = noSecrets
	}
	removeRecord(dir)
	_, red, rerr := secret.Resolve(x.Action.Args, read)
	if rerr != nil {
		// Unredacted, the output could show a secret's value.
		x.Printf("muster: the command's output is withheld: it cannot be redacted, as a secret its args reference cannot be read here (%v)", rerr)
	} else if f, err := os.Open(filepath.Join(dir, detachedOutput)); err == nil {
		x.addRedactor(red)
		if fi, err := f.Stat(); err == nil && fi.Size() > action.MaxOutput {
			_, _ = f.Seek(fi.Size()-action.MaxOutput, io.SeekStart)
		}
		_, _ = io.Copy(x, f)
		f.Close()
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return Result{Status: Failed, Message: fmt.Sprintf("detached: status file holds %q", clip(string(b), 40))}, true
	}
	if code != 0 {
		return Result{Status: Failed, Message: exitMessage("run", code, nil)}, true
	}
	return Result{Status: Done}, true
}

// CleanDetached removes the directories of detached actions that final
// says are over (or unknown), and the record of every other action whose
// command is not running: ended (its status is there) or never launched.
func CleanDetached(stateDir string, final func(id string) bool) error {
	root := filepath.Join(stateDir, DetachedDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if final(e.Name()) {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			continue
		}
		if exists(filepath.Join(dir, detachedStatus)) || !exists(filepath.Join(dir, detachedLaunched)) {
			removeRecord(dir)
		}
	}
	return nil
}

// writeAtomic writes b to path by way of a temporary file, synced, and a
// rename.
func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// syncDir makes dir's entries (names made, renamed, removed) durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
