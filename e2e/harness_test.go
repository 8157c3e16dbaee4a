// Package e2e tests muster as a black box: it builds the muster and
// muster-agent binaries, starts real agent and core processes with their own data directories and
// ports, kills them with SIGKILL, restarts them, and speaks only HTTP.
package e2e

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
)

// The binaries the tests run: the one binary muster, and muster-agent,
// the agent alone that the nodes install.
var binary, agentBinary string

// e2eParallel is how many parallel tests run at once unless -test.parallel
// says otherwise. The tests spend most of their time waiting on real
// processes (timers, orchestration passes, browsers), not computing, so on
// 2 cores four at a time finish sooner than GOMAXPROCS would.
const e2eParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(e2eParallel)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	dir, err := os.MkdirTemp("", "muster-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, agentBinary = filepath.Join(dir, "muster"), filepath.Join(dir, "muster-agent")
	for out, pkg := range map[string]string{binary: "../cmd/muster", agentBinary: "../cmd/muster-agent"} {
		args := []string{"build", "-o", out}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", filepath.Base(out)+":", err)
			os.Exit(1)
		}
	}
	code := pgtest.Run(m) // the replicas' PostgreSQL (ha_test.go)
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running muster process.
type proc struct {
	t       testing.TB
	bin     string // the binary it runs: binary when empty
	name    string
	args    []string
	env     []string
	logPath string

	// probe, when set, replaces the plain-HTTP health probe (a TLS
	// process needs its own client).
	probe func(addr string) bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	addrCh chan string // the API address printed, once (begin)
	addr   string      // the API address it printed
}

var startedRE = regexp.MustCompile(`msg="(?:agent|core) started".* api=(\S+)`)

// start runs `muster args...` and waits until it logs that its API listens.
func start(t testing.TB, name string, env []string, args ...string) *proc {
	t.Helper()
	return startIn(t, t.TempDir(), name, env, args...)
}

// startIn is start with the process's log written to dir/name.log.
func startIn(t testing.TB, dir, name string, env []string, args ...string) *proc {
	t.Helper()
	return startProbed(t, dir, name, env, nil, args...)
}

// startProbed is startIn with its own health probe (nil: the plain one).
func startProbed(t testing.TB, dir, name string, env []string, probe func(addr string) bool, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, args: args, env: env, logPath: filepath.Join(dir, name+".log"), probe: probe}
	p.launch()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) launch() {
	p.t.Helper()
	if err := p.tryLaunch(); err != nil {
		p.t.Fatal(err)
	}
}

// errExited is a process that ended before it said it was ready.
var errExited = errors.New("exited before it was ready")

// tryLaunch is launch, returning what went wrong instead of failing the test.
func (p *proc) tryLaunch() error {
	p.t.Helper()
	if err := p.begin(); err != nil {
		return err
	}
	return p.awaitReady()
}

// begin starts the process without waiting for it to be ready: a test
// that needs several begins them all, then awaits each (awaitReady), so
// that they start side by side.
func (p *proc) begin() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	bin := p.bin
	if bin == "" {
		bin = binary
	}
	cmd := exec.Command(bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	pr, pw := io.Pipe()
	cmd.Stdout = logf
	cmd.Stderr = io.MultiWriter(logf, pw)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := startedRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrCh <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		pw.Close()
		logf.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done, p.addrCh = cmd, done, addrCh
	p.mu.Unlock()
	return nil
}

// awaitReady waits until the process begun by begin says it started and
// its API answers.
func (p *proc) awaitReady() error {
	p.t.Helper()
	p.mu.Lock()
	done, addrCh := p.done, p.addrCh
	p.mu.Unlock()
	select {
	case a := <-addrCh:
		p.mu.Lock()
		p.addr = a
		p.mu.Unlock()
	case <-done:
		return fmt.Errorf("%s %w:\n%s", p.name, errExited, p.logs())
	case <-time.After(60 * time.Second):
		return fmt.Errorf("%s not ready in time:\n%s", p.name, p.logs())
	}
	// Wait for the API to answer, not only to be bound.
	// The agent's probe is /api/v1/health, the core's /health.
	testwait.Within(p.t, 20*time.Second, p.name+" health", func() bool {
		if p.probe != nil {
			return p.probe(p.Addr())
		}
		for _, path := range []string{"/api/v1/health", "/health"} {
			resp, err := http.Get("http://" + p.Addr() + path)
			if err != nil {
				return false
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		return false
	})
	return nil
}

// Addr is the API's host:port.
func (p *proc) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// freeze sends SIGSTOP: the process keeps its sockets and memory but runs
// no more until thaw (or kill).
func (p *proc) freeze() { p.signal(syscall.SIGSTOP) }

// thaw sends SIGCONT to a frozen process.
func (p *proc) thaw() { p.signal(syscall.SIGCONT) }

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop() int {
	p.t.Helper()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("%s did not stop on SIGTERM:\n%s", p.name, p.logs())
	}
	return cmd.ProcessState.ExitCode()
}

// restart starts the process again with the same arguments (same port when
// the first run was given a fixed one). Its port is below the ephemeral range,
// but another test's process may still bind it in a random pick for a moment
// (it probes a port by listening, then closes it): a start refused with
// "address already in use" is tried again until the port is free, for up to
// 20 s.
func (p *proc) restart() {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := p.tryLaunch()
		if err == nil {
			return
		}
		if !errors.Is(err, errExited) || !strings.Contains(err.Error(), "address already in use") || time.Now().After(deadline) {
			p.t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *proc) logs() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// agentProc starts `muster agent` with a config file made from the defaults
// and extra YAML, on a free loopback port that stays the same across restarts.
func agentProc(t testing.TB, node, extraYAML string) (*proc, *client.Agent, string) {
	t.Helper()
	return agentProcIn(t, t.TempDir(), node, extraYAML)
}

// agentProcIn is agentProc with its config, data directory and log in dir.
func agentProcIn(t testing.TB, dir, node, extraYAML string) (*proc, *client.Agent, string) {
	t.Helper()
	return agentProcOf(t, binary, []string{"agent"}, dir, node, extraYAML)
}

// agentProcOf is agentProcIn with the agent started as bin cmd...:
// `muster agent` (binary, "agent") or `muster-agent` (agentBinary, none).
func agentProcOf(t testing.TB, bin string, cmd []string, dir, node, extraYAML string) (*proc, *client.Agent, string) {
	t.Helper()
	p := startAll(t, agentAttempt(t, bin, cmd, dir, node, extraYAML))[0]
	return p, agentClient(p), dir
}

// agentAttempt is agentProcOf's process, for startAll: its config file
// written anew for a free loopback port.
func agentAttempt(t testing.TB, bin string, cmd []string, dir, node, extraYAML string) func() *proc {
	path := filepath.Join(dir, "agent.yaml")
	return func() *proc {
		port := freePort(t)
		// Plaintext TCP, as in muster dev: tests that need mutual TLS write
		// their own configuration.
		cfg := fmt.Sprintf("node_id: %s\ncluster_id: e2e\ndata_dir: %s\napi:\n  addr: 127.0.0.1:%d\n  insecure: true\n%s", node, filepath.Join(dir, "data"), port, extraYAML)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return &proc{t: t, bin: bin, name: node, args: append(slices.Clone(cmd), "--config", path), logPath: filepath.Join(dir, node+".log")}
	}
}

// agentClient is the plaintext client of an agent started by agentAttempt.
func agentClient(p *proc) *client.Agent {
	return client.NewAgent(p.Addr(), &http.Client{Timeout: 10 * time.Second})
}

// startOnFreePort starts a process whose arguments args makes for a free
// loopback port. The port freePort found may be taken by another test
// before the process binds it: the process then exits at once, and is
// started again on another port.
func startOnFreePort(t testing.TB, dir, name string, args func(port int) []string) *proc {
	t.Helper()
	return startBinOnFreePort(t, binary, dir, name, args)
}

// startBinOnFreePort is startOnFreePort with the binary bin.
func startBinOnFreePort(t testing.TB, bin, dir, name string, args func(port int) []string) *proc {
	t.Helper()
	return startAll(t, func() *proc {
		return &proc{t: t, bin: bin, name: name, args: args(freePort(t)), logPath: filepath.Join(dir, name+".log")}
	})[0]
}

// startAll starts the processes that each of attempts makes side by side,
// then waits for each to be ready. A process that exits because its port,
// found free, was taken before it bound it is started again from a fresh
// attempt (new ports), up to five times.
func startAll(t testing.TB, attempts ...func() *proc) []*proc {
	t.Helper()
	ps := make([]*proc, len(attempts))
	begin := func(i int) {
		t.Helper()
		ps[i] = attempts[i]()
		if err := ps[i].begin(); err != nil {
			t.Fatal(err)
		}
		p := ps[i]
		t.Cleanup(func() { p.kill() })
	}
	for i := range attempts {
		begin(i)
	}
	for i := range attempts {
		for attempt := 1; ; attempt++ {
			err := ps[i].awaitReady()
			if err == nil {
				break
			}
			if attempt == 5 || !errors.Is(err, errExited) || !strings.Contains(err.Error(), "address already in use") {
				t.Fatal(err)
			}
			begin(i)
		}
	}
	return ps
}

// freePort returns a loopback port free now, below the kernel's ephemeral
// range: a process restarted on its port (kill, then restart) must find it
// free again, and a port of the ephemeral range can meanwhile become the
// local end of any outgoing connection on the machine ("address already in
// use"). Ports below the range are taken only by listeners that ask for
// them.
func freePort(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	for range 100 {
		port := low - 1 - mrand.IntN(min(low-1024, 12000))
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 2048 {
		return 32768
	}
	return n
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func lines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
