package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/argschema"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/secret"
)

// External declares a kind run by outside commands (actions.external in the
// agent's configuration). Commands are argv lists, never shell strings; args
// are never put on a command line: the record goes on stdin.
type External struct {
	Kind       string        `mapstructure:"kind" yaml:"kind"`
	Run        []string      `mapstructure:"run" yaml:"run"`
	Check      []string      `mapstructure:"check" yaml:"check,omitempty"`
	Timeout    time.Duration `mapstructure:"timeout" yaml:"timeout,omitempty"`
	Idempotent bool          `mapstructure:"idempotent" yaml:"idempotent,omitempty"`
	// CheckInterval is how often check runs (default 5s).
	CheckInterval time.Duration `mapstructure:"check_interval" yaml:"check_interval,omitempty"`
	// Env is added to the commands' environment, which is otherwise only
	// PATH, LANG and TZ from the agent's and the MUSTER_* variables of the
	// action (see AllowedEnv). Each entry is NAME=value: a list, not a map,
	// because configuration keys are case-insensitive and names are not.
	Env []string `mapstructure:"env" yaml:"env,omitempty"`
	// User and Group are whom run and check run as (names or numeric ids):
	// the agent, running as root, drops to them before the command starts.
	// Without Group, the user's primary group and its other groups; with
	// it, that group only. Empty: the agent's own user.
	User  string `mapstructure:"user" yaml:"user,omitempty"`
	Group string `mapstructure:"group" yaml:"group,omitempty"`
	// ArgsSchema is a JSON Schema (draft 2020-12 unless it names another)
	// that the kind's args must match, written as JSON or YAML text (a block
	// scalar: configuration keys lose their case, a schema's must not). The
	// agent refuses other args with 422 and announces the schema in its
	// info, so that the core refuses them before any approval.
	ArgsSchema SchemaText `mapstructure:"args_schema" yaml:"args_schema,omitempty"`
	// Privileges names a privilege profile (package-manager, root): the
	// commands run in a transient systemd unit with its capabilities and
	// writable paths instead of under the agent's own (docs/operations.md,
	// "Privilege profiles"). Empty: as a child of the agent.
	Privileges string `mapstructure:"privileges" yaml:"privileges,omitempty"`
	// RestartsAgent marks a kind whose command restarts the agent (it
	// upgrades the agent's own package): the command runs apart from the
	// agent, at most once, and the agent that starts next records its
	// result (docs/operations.md, "Upgrading the agent with muster").
	RestartsAgent bool `mapstructure:"restarts_agent" yaml:"restarts_agent,omitempty"`
}

// SchemaText is a JSON Schema written as JSON or YAML text.
type SchemaText string

// AllowedEnv lists the variables of the agent's own environment that its
// commands inherit; nothing else does (no token, no cloud credential). The
// agent adds MUSTER_ACTION_ID, MUSTER_ACTION_KIND, MUSTER_NODE_ID,
// MUSTER_CLUSTER_ID, MUSTER_AGENT_VERSION, and the kind's env.
var AllowedEnv = []string{"PATH", "LANG", "TZ"}

// Validate returns one error per bad field; i is its index in the list.
func (e External) Validate(i int) config.Errors {
	var errs config.Errors
	key := fmt.Sprintf("actions.external[%d]", i)
	if !action.ValidKind(e.Kind) {
		errs.Add(key+".kind", "%q is not of the form domain/name", e.Kind)
	}
	if strings.HasPrefix(e.Kind, "muster.io/") {
		errs.Add(key+".kind", "the muster.io/ prefix is reserved for built-in kinds")
	}
	if len(e.Run) == 0 || e.Run[0] == "" {
		errs.Add(key+".run", "an argv list such as [\"/usr/local/bin/backup\", \"start\"] is required")
	}
	if len(e.Check) > 0 && e.Check[0] == "" {
		errs.Add(key+".check", "the first element must be a program")
	}
	seen := map[string]bool{}
	for j, kv := range e.Env {
		k, v, ok := strings.Cut(kv, "=")
		envKey := fmt.Sprintf("%s.env[%d]", key, j)
		switch {
		case !ok || k == "" || strings.ContainsRune(k, 0):
			errs.Add(envKey, "%q is not NAME=value", kv)
		case strings.HasPrefix(k, "MUSTER_"):
			errs.Add(envKey, "%s: MUSTER_ variables are set by the agent", k)
		case strings.ContainsRune(v, 0):
			errs.Add(envKey, "the value of %s holds a NUL byte", k)
		case seen[k]:
			errs.Add(envKey, "%s is set twice", k)
		}
		seen[k] = true
	}
	if err := action.CheckTimeout(e.Timeout); err != nil {
		errs.Add(key+".timeout", "%v", err)
	}
	if e.User == "" && e.Group != "" {
		errs.Add(key+".group", "needs user: the command runs as a user of that group")
	}
	if e.User != "" {
		// Whether the agent may switch to it is known when it runs: a
		// check by another user (muster agent check) would be misled.
		if _, err := e.credential(); err != nil {
			errs.Add(key+".user", "%v", err)
		}
	}
	e.validateProfile(key, &errs)
	if e.CheckInterval < 0 {
		errs.Add(key+".check_interval", "must not be negative, got %s", e.CheckInterval)
	}
	if _, err := e.schema(); err != nil {
		errs.Add(key+".args_schema", "%v", err)
	}
	return errs
}

// schema decodes and compiles ArgsSchema: nil, nil when there is none.
func (e External) schema() (*compiledSchema, error) {
	if strings.TrimSpace(string(e.ArgsSchema)) == "" {
		return nil, nil
	}
	raw, err := argschema.Decode(string(e.ArgsSchema))
	if err != nil {
		return nil, err
	}
	s, err := argschema.Compile(raw)
	if err != nil {
		return nil, err
	}
	return &compiledSchema{raw: raw, s: s}, nil
}

// compiledSchema is a kind's args_schema, as announced and compiled.
type compiledSchema struct {
	raw json.RawMessage
	s   *argschema.Schema
}

// Env is what the agent tells external commands about itself.
type Env struct {
	NodeID    string
	ClusterID string
	// Grace is how long a process has between SIGTERM and SIGKILL.
	Grace time.Duration
	// Secrets reads a secret's value by name, for the references in args
	// ({{ secret "NAME" }}); nil: the agent has none.
	Secrets secret.Reader
	// Version is the agent's version, given to commands as
	// MUSTER_AGENT_VERSION.
	Version string
	// SystemdRun and Systemctl are the programs that run a privileged
	// kind's commands in their own unit and stop that unit.
	SystemdRun, Systemctl string
	// StateDir holds the files of restarts_agent actions (detached/).
	StateDir string
}

// noSecrets is the reader of an agent that names no secret.
func noSecrets(name string) (string, error) {
	return "", fmt.Errorf("%w %q on this node (its configuration names no secrets)", secret.ErrUnknown, name)
}

// Phases of an external action, kept in its progress.
const (
	phaseLaunching = "launching" // committed before run starts: a crash after this may have started it
	phaseRunning   = "running"   // run has started
	phaseChecking  = "checking"  // run returned 0; check is polled (safe to resume)
)

type extProgress struct {
	Phase string          `json:"phase"`
	Check json.RawMessage `json:"check,omitempty"`
}

// checkReport is what check prints.
type checkReport struct {
	State    string          `json:"state"`
	Message  string          `json:"message"`
	Progress json.RawMessage `json:"progress"`
}

type externalHandler struct {
	spec   External
	env    Env
	schema *compiledSchema // nil: any JSON object
}

// extState is the in-memory part of one run.
type extState struct {
	// outputs is the agent's own handle on the file behind $MUSTER_OUTPUTS
	// (nil before launch, and after an agent restart: outputs of a resumed
	// command are lost).
	outputs   *os.File
	proc      *process
	checkOut  *bytes.Buffer
	nextCheck time.Time
	// noted: a resumed restarts_agent action said it waits for its result.
	noted bool
	// unitStopped, for a restarts_agent action being stopped, is closed
	// once its unit is.
	unitStopped <-chan struct{}
}

const pollEvery = 100 * time.Millisecond

func (h *externalHandler) Validate(args json.RawMessage) error {
	if _, err := action.NormalizeArgs(args); err != nil {
		return fmt.Errorf("%w: %v", ErrBadArgs, err)
	}
	if h.schema != nil {
		if err := h.schema.s.Validate(args, nil); err != nil {
			return fmt.Errorf("%w: %v", ErrBadArgs, err)
		}
	}
	if _, err := secret.FindArgs(args); err != nil {
		return fmt.Errorf("%w: %v", ErrBadArgs, err)
	}
	return nil
}

// Step runs step and redacts the values of the secrets it resolved from
// what it reports (the output is redacted as it is written: Exec.Write).
func (h *externalHandler) Step(ctx context.Context, x *Exec) Result {
	res := h.step(ctx, x)
	res.Message = x.Redact(res.Message)
	if len(x.Outputs) > 0 && !x.redact.Empty() {
		x.Outputs = x.redact.RedactJSON(x.Outputs)
	}
	return res
}

func (h *externalHandler) step(ctx context.Context, x *Exec) Result {
	var p extProgress
	_ = json.Unmarshal(x.Progress, &p)
	st, _ := x.State.(*extState)

	if h.spec.RestartsAgent {
		if st == nil {
			st = &extState{}
			x.State = st
		}
		if p.Phase == "" {
			if ctx.Err() != nil {
				return Result{Status: Stopped}
			}
			x.SetProgress(extProgress{Phase: phaseLaunching})
			return Result{Status: Running}
		}
		return h.detachedStep(x, st, p, ctx.Err() != nil)
	}

	if ctx.Err() != nil && !(st != nil && st.proc != nil && st.proc.exitedFirst()) {
		// Cancelled or past the deadline, with a command still running
		// (or none): stop it. A command that had exited before it was
		// stopped is judged by its exit status, below.
		// A privileged command's unit is systemd's: it is over once the
		// unit is stopped, not when systemd-run exits.
		if st != nil && st.proc != nil && (!st.proc.exited() || !st.proc.unitStoppedOrNone()) {
			st.proc.stop(h.grace())
			return Result{Status: Running, After: pollEvery}
		}
		if st != nil && st.outputs != nil {
			st.outputs.Close()
			st.outputs = nil
		}
		return Result{Status: Stopped}
	}

	if st == nil {
		st = &extState{}
		x.State = st
		if x.Resumed && p.Phase == phaseChecking && h.spec.Privileges != "" {
			// The check's unit may outlive the agent too: stopped, so
			// that the next check's unit, of the same name, can start.
			stopUnitAndWait(h.systemctl(), unitFor(x.Action.ID, true))
		}
		if x.Resumed && (p.Phase == phaseLaunching || p.Phase == phaseRunning) {
			if h.spec.Privileges != "" {
				// The unit is systemd's, not the agent's child: it did
				// not die with the agent. Stop it first, so that it
				// never runs beside a second copy.
				stopUnitAndWait(h.systemctl(), UnitName(x.Action.ID))
			}
			if !h.spec.Idempotent {
				x.Printf("muster: the agent stopped while the command ran; it cannot be resumed safely")
				return Result{Status: Failed, Message: action.ReasonInterrupted}
			}
			x.Printf("muster: the agent stopped while the command ran; running it again (idempotent kind)")
			p.Phase = ""
		}
	}

	switch p.Phase {
	case "":
		// Commit "launching" before starting anything: after a crash, the
		// resumed run knows the command may have started.
		x.SetProgress(extProgress{Phase: phaseLaunching})
		return Result{Status: Running}
	case phaseLaunching:
		f, err := outputsFile()
		if err != nil {
			x.Printf("muster: %v", err)
			return Result{Status: Failed, Message: err.Error()}
		}
		st.outputs = f
		proc, err := h.start(h.spec.Run, false, x, x, f)
		if err != nil {
			f.Close()
			st.outputs = nil
			x.Printf("muster: %v", err)
			return Result{Status: Failed, Message: err.Error()}
		}
		st.proc = proc
		x.SetProgress(extProgress{Phase: phaseRunning})
		return Result{Status: Running, After: pollEvery}
	case phaseRunning:
		if st.proc == nil || !st.proc.exited() {
			return Result{Status: Running, After: pollEvery}
		}
		code, err := st.proc.result()
		st.proc = nil
		outputs, oerr := readOutputs(st.outputs)
		st.outputs = nil
		if oerr != nil {
			x.Printf("muster: %v", oerr)
		}
		if err != nil || code != 0 {
			x.Outputs = outputs
			return Result{Status: Failed, Message: exitMessage("run", code, err)}
		}
		if oerr != nil {
			return Result{Status: Failed, Message: oerr.Error()}
		}
		x.Outputs = outputs
		if len(h.spec.Check) == 0 {
			return Result{Status: Done}
		}
		x.SetProgress(extProgress{Phase: phaseChecking})
		return Result{Status: Running}
	case phaseChecking:
		return h.check(x, st, p)
	}
	return Result{Status: Failed, Message: fmt.Sprintf("unknown phase %q in progress", p.Phase)}
}

func (h *externalHandler) check(x *Exec, st *extState, p extProgress) Result {
	if st.proc == nil {
		if wait := time.Until(st.nextCheck); wait > 0 {
			return Result{Status: Running, After: wait}
		}
		st.checkOut = &bytes.Buffer{}
		proc, err := h.start(h.spec.Check, true, x, &cappedWriter{w: st.checkOut})
		if err != nil {
			return Result{Status: Failed, Message: err.Error()}
		}
		st.proc = proc
		return Result{Status: Running, After: pollEvery}
	}
	if !st.proc.exited() {
		return Result{Status: Running, After: pollEvery}
	}
	code, err := st.proc.result()
	st.proc = nil
	st.nextCheck = time.Now().Add(h.checkInterval())
	out := st.checkOut.Bytes()
	if err != nil || code != 0 {
		return Result{Status: Failed, Message: exitMessage("check", code, err)}
	}
	rep, perr := parseCheck(out)
	if perr != nil {
		x.Printf("muster: %v", perr)
		return Result{Status: Failed, Message: perr.Error()}
	}
	if rep.Message != "" {
		x.Printf("%s", rep.Message)
	}
	switch rep.State {
	case "DONE":
		return Result{Status: Done}
	case "FAILED":
		msg := rep.Message
		if msg == "" {
			msg = "check reported FAILED"
		}
		return Result{Status: Failed, Message: msg}
	}
	if len(rep.Progress) > 0 {
		p.Check = rep.Progress
		x.SetProgress(p)
	}
	return Result{Status: Running, After: h.checkInterval()}
}

// parseCheck reads the last non-empty line of check's stdout.
func parseCheck(out []byte) (*checkReport, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	var rep checkReport
	if err := json.Unmarshal([]byte(last), &rep); err != nil {
		return nil, fmt.Errorf("check printed %q, not {\"state\":\"RUNNING|DONE|FAILED\",...}", clip(last, 200))
	}
	switch rep.State {
	case "RUNNING", "DONE", "FAILED":
		return &rep, nil
	}
	return nil, fmt.Errorf("check reported state %q, not RUNNING, DONE or FAILED", rep.State)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) { // never cut a character in two
		n--
	}
	return s[:n] + "…"
}

func exitMessage(what string, code int, err error) string {
	if err != nil {
		return fmt.Sprintf("%s: %v", what, err)
	}
	return fmt.Sprintf("%s exited with status %d", what, code)
}

// Bounds of a command's outputs ($MUSTER_OUTPUTS).
const (
	MaxOutputKeys  = 32
	MaxOutputBytes = 4 << 10
)

// outputsPath is $MUSTER_OUTPUTS: the file is the command's fd 3
// (exec.Cmd.ExtraFiles[0]), which it opens by this name or writes directly.
const outputsPath = "/dev/fd/3"

// outputsFile makes the file behind $MUSTER_OUTPUTS. It has no name: it is
// made in a directory of the agent's own (mode 0700, made by mkdir so that
// nobody can have put anything in its place), then unlinked with the
// directory, so that only the agent and the command, through their open
// files, reach it: nothing can swap it for a symlink or a FIFO, and the
// agent reads it back through its own handle, never by name. It is
// writable by all (0666) because the command, maybe another user, reopens
// it through /dev/fd/3, which checks the file's mode but no directory;
// no chown is needed.
func outputsFile() (*os.File, error) {
	dir, err := os.MkdirTemp("", "muster-outputs-")
	if err != nil {
		return nil, fmt.Errorf("outputs file: %v", err)
	}
	defer os.RemoveAll(dir)
	f, err := os.OpenFile(dir+"/outputs", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("outputs file: %v", err)
	}
	if err := f.Chmod(0o666); err != nil {
		f.Close()
		return nil, fmt.Errorf("outputs file: %v", err)
	}
	return f, nil
}

// readOutputs reads the outputs file through f and closes it: nil when it is
// empty, an error when it is not a JSON object of strings within
// MaxOutputKeys and MaxOutputBytes. It reads at most MaxOutputBytes+1 bytes.
func readOutputs(f *os.File) (json.RawMessage, error) {
	if f == nil {
		return nil, nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, 0, MaxOutputBytes+1), MaxOutputBytes+1))
	if err != nil {
		return nil, fmt.Errorf("outputs: %v", err)
	}
	return CheckOutputs(b)
}

// CheckOutputs checks what a command wrote to $MUSTER_OUTPUTS and returns
// it compact: nil for nothing.
func CheckOutputs(b []byte) (json.RawMessage, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	if len(b) > MaxOutputBytes {
		return nil, fmt.Errorf("outputs: more than %d bytes in $MUSTER_OUTPUTS", MaxOutputBytes)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("outputs: $MUSTER_OUTPUTS must hold a JSON object of strings: %v", err)
	}
	if len(m) > MaxOutputKeys {
		return nil, fmt.Errorf("outputs: %d keys in $MUSTER_OUTPUTS, at most %d", len(m), MaxOutputKeys)
	}
	if m == nil {
		return nil, fmt.Errorf("outputs: $MUSTER_OUTPUTS must hold a JSON object of strings, not null")
	}
	out, _ := json.Marshal(m)
	return out, nil
}

func (h *externalHandler) grace() time.Duration {
	if h.env.Grace > 0 {
		return h.env.Grace
	}
	return 10 * time.Second
}

func (h *externalHandler) checkInterval() time.Duration {
	if h.spec.CheckInterval > 0 {
		return h.spec.CheckInterval
	}
	return 5 * time.Second
}

// cappedWriter keeps the first MiB of check's stdout (it is read only after
// the process has exited).
type cappedWriter struct{ w *bytes.Buffer }

func (c *cappedWriter) Write(p []byte) (int, error) {
	if c.w.Len() < 1<<20 {
		c.w.Write(p)
	}
	return len(p), nil
}

// process is one external command in its own process group.
type process struct {
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
	termAt time.Time
	killed bool
	// unit, for a privileged kind, is the transient unit that runs the
	// command, stopped with systemctl when the command is.
	unit, systemctl string
	// unitStopped is closed once the stop of unit is over.
	unitStopped <-chan struct{}
	// ranOut: the command was seen exited before any stop signal, so its
	// exit status decides its result whatever the context says.
	ranOut bool
}

// commandEnv is the whole environment of a command: the allowed variables of
// the agent's, then the kind's env, then the action's MUSTER_* variables.
// os/exec keeps the last value of a name given twice.
func commandEnv(x *Exec, env Env, extra []string) []string {
	var out []string
	for _, k := range AllowedEnv {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	out = append(out, extra...)
	out = append(out,
		"MUSTER_ACTION_ID="+x.Action.ID,
		"MUSTER_ACTION_KIND="+x.Action.Kind,
		"MUSTER_NODE_ID="+env.NodeID,
		"MUSTER_CLUSTER_ID="+env.ClusterID,
	)
	if env.Version != "" {
		out = append(out, "MUSTER_AGENT_VERSION="+env.Version)
	}
	// The trace context the core pushed: a command's own spans join the
	// action's trace (docs/architecture.md, "Traces").
	if x.Action.Traceparent != "" {
		out = append(out, "TRACEPARENT="+x.Action.Traceparent)
	}
	return out
}

// start starts one of the kind's commands, as its user when it names one.
//
// isCheck says whether argv is the kind's check (its unit has a name of
// its own). outputs, when not nil, is the file behind $MUSTER_OUTPUTS: the
// command gets it as fd 3.
func (h *externalHandler) start(argv []string, isCheck bool, x *Exec, out interface{ Write([]byte) (int, error) }, outputs ...*os.File) (*process, error) {
	var cred *syscall.Credential
	if h.spec.User != "" {
		var err error
		if cred, err = h.spec.credential(); err != nil {
			return nil, fmt.Errorf("start %s as %s: %w", argv[0], h.spec.User, err)
		}
	}
	env := h.spec.Env
	prof, privileged := Profiles[h.spec.Privileges]
	if privileged {
		// systemd-run passes on stdin, stdout and stderr, no other file:
		// a privileged kind has no $MUSTER_OUTPUTS.
		outputs = nil
	}
	if len(outputs) > 0 {
		env = append(slices.Clone(env), "MUSTER_OUTPUTS="+outputsPath)
	}
	// The command gets the record with its references to secrets resolved;
	// the record kept is never changed, and the values read are redacted
	// from all the action reports from now on.
	rec := x.Action
	read := h.env.Secrets
	if read == nil {
		read = noSecrets
	}
	args, red, err := secret.Resolve(rec.Args, read)
	if err != nil {
		return nil, err
	}
	rec.Args = args
	x.addRedactor(red)
	var unit string
	if privileged {
		unit = unitFor(x.Action.ID, isCheck)
		argv = unitArgv(h.systemdRun(), unit, prof, h.unitProps(), envNames(commandEnv(x, h.env, env)), argv, true)
	}
	p, err := startProcess(argv, &rec, x, h.env, env, cred, out, outputs...)
	if p != nil && unit != "" {
		p.unit, p.systemctl = unit, h.systemctl()
	}
	if cred != nil && errors.Is(err, syscall.EPERM) {
		return nil, fmt.Errorf("%w: running commands as %s needs the agent to run as root (it runs as uid %d)", err, h.spec.User, os.Geteuid())
	}
	return p, err
}

// startProcess starts argv with the action record a on stdin and the
// environment of commandEnv, as cred when not nil. stdout goes to out,
// stderr to the output; files are its fds 3 and on.
func startProcess(argv []string, a *action.Action, x *Exec, env Env, extra []string, cred *syscall.Credential, out interface{ Write([]byte) (int, error) }, files ...*os.File) (*process, error) {
	rec, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(rec)
	cmd.Stdout = out
	cmd.Stderr = x
	// Never os.Environ(): the agent's own secrets (its token, cloud
	// credentials) would reach the output, which every viewer reads.
	cmd.Env = commandEnv(x, env, extra)
	cmd.ExtraFiles = files
	// Its own process group, so that cancel and timeout reach the whole tree;
	// on Linux it also dies with the agent (procattr_linux.go).
	cmd.SysProcAttr = procAttr()
	cmd.SysProcAttr.Credential = cred
	// Wait returns this long after the process exits even if a grandchild
	// still holds its output open.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitedFirst reports whether the command exited on its own before it was
// told to stop: then its exit status decides, not a cancel or a deadline
// that came later. It asks the kernel (hasExited) rather than only done,
// which closes only once the goroutine waiting for the process has run: an
// agent resumed from SIGSTOP after its command exited and its deadline
// passed runs the runner and that goroutine in any order.
func (p *process) exitedFirst() bool {
	if !p.ranOut && p.termAt.IsZero() && p.hasExited() {
		p.ranOut = true
	}
	return p.ranOut
}

// result returns the exit code, or an error when it did not exit normally.
func (p *process) result() (int, error) {
	<-p.done
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, fmt.Errorf("killed by %s", ws.Signal())
		}
		return ee.ExitCode(), nil
	}
	if p.err != nil && !errors.Is(p.err, exec.ErrWaitDelay) {
		return -1, p.err
	}
	return p.cmd.ProcessState.ExitCode(), nil
}

// stop sends SIGTERM to the process group, and SIGKILL once grace has passed.
func (p *process) stop(grace time.Duration) {
	pgid := -p.cmd.Process.Pid
	switch {
	case p.termAt.IsZero():
		p.termAt = time.Now()
		signalGroup(pgid, syscall.SIGTERM)
		if p.unit != "" {
			p.unitStopped = stopUnitAsync(p.systemctl, p.unit, grace)
		}
	case !p.killed && time.Since(p.termAt) >= grace:
		p.killed = true
		signalGroup(pgid, syscall.SIGKILL)
	}
}

// unitStoppedOrNone reports whether the process has no unit, or its unit's
// stop is over.
func (p *process) unitStoppedOrNone() bool {
	if p.unit == "" {
		return true
	}
	if p.unitStopped == nil {
		return false
	}
	select {
	case <-p.unitStopped:
		return true
	default:
		return false
	}
}
