// Package pglocal runs a throwaway PostgreSQL server from the distribution's
// packages (Debian's postgresql): initdb in a temporary directory, then the
// server on a free loopback port and a Unix socket in that directory (or, with
// Options.Private, on the socket alone with passwords), as an unprivileged
// user. Tests (through core/store/pgtest) and `muster dev --ha`
// use it; it is not meant for production.
//
// PostgreSQL refuses to run as root. Started by root, the server runs as the
// system user muster-pg, created with useradd when missing, and the temporary
// directory belongs to that user. The server is a child process that receives
// SIGQUIT when its parent dies, so a test binary that crashes or times out
// leaves no server behind (pg_ctl would detach it).
package pglocal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// User is the system user the server runs as when the caller is root.
const User = "muster-pg"

// Superuser is the database role initdb creates; it authenticates with trust
// on the socket and on loopback only.
const Superuser = "muster"

// PrivateSuperuser is the role initdb creates for a Private server; it
// authenticates with a random password only Server knows, so that the
// role name muster is free for an unprivileged role (CreateRole).
const PrivateSuperuser = "postgres"

// Server is a running local PostgreSQL.
type Server struct {
	// Dir holds the data directory, the socket and the server's log.
	Dir string
	// Port is the loopback TCP port; the socket listens on the same number.
	Port int
	// Version is the server's major version, such as 15.
	Version int

	bin  string
	cred *syscall.Credential
	opts Options
	// super and superPassword are who the Server connects as itself.
	super, superPassword string

	mu       sync.Mutex // guards cmd, exited, waitErr across Restart
	cmd      *exec.Cmd
	exited   chan struct{}
	waitErr  error
	stopOnce sync.Once
}

// Options tune Start. The zero value is fine.
type Options struct {
	// BinDir holds initdb and postgres; empty: found by FindBinDir.
	BinDir string
	// Settings are extra server settings (name → value), added to the
	// defaults that favour speed over durability (fsync off).
	Settings map[string]string
	// Durable keeps fsync and synchronous_commit on.
	Durable bool
	// Private listens on the Unix socket alone (in the server's own
	// directory, mode 0700), with password authentication
	// (scram-sha-256) for every role: the superuser PrivateSuperuser gets
	// a random password, and the application a role of its own with
	// CreateRole. DSN (TCP) does not reach a private server.
	Private bool
}

// FindBinDir returns the directory with the server binaries: the env
// MUSTER_PG_BINDIR, `pg_config --bindir`, the newest
// /usr/lib/postgresql/*/bin, or the directory of initdb on PATH.
func FindBinDir() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if d := os.Getenv("MUSTER_PG_BINDIR"); d != "" {
		if !has(d) {
			return "", fmt.Errorf("MUSTER_PG_BINDIR=%s has no initdb and postgres", d)
		}
		return d, nil
	}
	var looked []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if has(d) {
			return d, nil
		}
		looked = append(looked, d)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	looked = append(looked, "/usr/lib/postgresql/*/bin")
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if has(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	looked = append(looked, "PATH")
	return "", fmt.Errorf("PostgreSQL server binaries (initdb, postgres) not found in %s: install them with `apt-get install postgresql`",
		strings.Join(looked, ", "))
}

// majorOf reads the version number out of /usr/lib/postgresql/<N>/bin.
func majorOf(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start initialises a database cluster in a new temporary directory and
// starts the server on a free loopback port. Stop stops it and removes the
// directory.
func Start(ctx context.Context, o Options) (*Server, error) {
	bin := o.BinDir
	if bin == "" {
		var err error
		if bin, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "muster-pg-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	data := filepath.Join(dir, "data")
	super, superPassword := Superuser, ""
	args := []string{"-D", data, "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"}
	if o.Private {
		super, superPassword = PrivateSuperuser, randomPassword()
		pwfile := filepath.Join(dir, "pwfile")
		if err := os.WriteFile(pwfile, []byte(superPassword+"\n"), 0o600); err != nil {
			return fail(err)
		}
		if cred != nil {
			if err := os.Chown(pwfile, int(cred.Uid), int(cred.Gid)); err != nil {
				return fail(err)
			}
		}
		defer os.Remove(pwfile)
		args = append(args, "-U", super, "--auth=scram-sha-256", "--pwfile="+pwfile)
	} else {
		args = append(args, "-U", super, "--auth=trust")
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), args...)
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %w: %s", err, lastLines(out, 5)))
	}
	var lastErr error
	for range 3 { // another process may take the free port first
		port, err := freePort()
		if err != nil {
			return fail(err)
		}
		s := &Server{Dir: dir, Port: port, bin: bin, cred: cred, opts: o, super: super, superPassword: superPassword}
		if lastErr = s.run(ctx); lastErr == nil {
			return s, nil
		}
		if !strings.Contains(lastErr.Error(), "could not bind") && !strings.Contains(lastErr.Error(), "could not create") {
			break
		}
	}
	return fail(lastErr)
}

// credential returns who the server runs as: nil for the caller, or the
// system user User when the caller is root.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(User)
	if err != nil {
		out, aerr := exec.Command("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
			"--shell", "/usr/sbin/nologin", User).CombinedOutput()
		// A concurrent test binary may have created it meanwhile.
		if u, err = user.Lookup(User); err != nil {
			return nil, fmt.Errorf("PostgreSQL refuses to run as root and system user %s cannot be made: %v: %s",
				User, aerr, bytes.TrimSpace(out))
		}
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// freePort returns a loopback port free now, below the kernel's ephemeral
// range when it can: Restart binds the same port again, and a port of the
// ephemeral range can meanwhile become the local end of any outgoing
// connection on the machine. Ports below the range are taken only by
// listeners that ask for them.
func freePort() (int, error) {
	low := ephemeralLow()
	for range 100 {
		port := low - 1 - mrand.IntN(min(low-1024, 12000))
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ln.Close()
		return port, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
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

func (s *Server) run(ctx context.Context) error {
	bin, cred, o := s.bin, s.cred, s.opts
	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"port":                    strconv.Itoa(s.Port),
		"unix_socket_directories": s.Dir,
		"max_connections":         "300",
		"shared_buffers":          "32MB",
		"log_min_messages":        "warning",
		"logging_collector":       "off",
	}
	if o.Private {
		settings["listen_addresses"] = "" // the socket alone
		settings["unix_socket_permissions"] = "0700"
	}
	if !o.Durable {
		settings["fsync"] = "off"
		settings["synchronous_commit"] = "off"
		settings["full_page_writes"] = "off"
	}
	for k, v := range o.Settings {
		settings[k] = v
	}
	args := []string{"-D", filepath.Join(s.Dir, "data")}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-c", k+"="+settings[k])
	}
	logFile, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child keeps its own descriptor
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// SIGQUIT is PostgreSQL's immediate shutdown: the parent's death takes
	// the server with it.
	cmd.SysProcAttr = serverAttr(cred)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.waitErr = err
		s.mu.Unlock()
		close(exited)
	}()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var version int
		if version, err = s.ping(ctx); err == nil {
			s.Version = version
			return nil
		}
		select {
		case <-exited:
			s.mu.Lock()
			werr := s.waitErr
			s.mu.Unlock()
			return fmt.Errorf("postgres exited at start (%v): %s", werr, s.logTail())
		case <-deadline.C:
			s.Stop()
			return fmt.Errorf("postgres not ready after 60s: %v: %s", err, s.logTail())
		case <-ctx.Done():
			s.Stop()
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (s *Server) ping(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.SocketDSN("postgres"))
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var num int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&num); err != nil {
		return 0, err
	}
	return num / 10000, nil
}

func (s *Server) logPath() string { return filepath.Join(s.Dir, "postgres.log") }

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logPath())
	return lastLines(b, 10)
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// DSN returns a connection string for database db over TCP on loopback,
// as the superuser.
func (s *Server) DSN(db string) string {
	u := url.URL{Scheme: "postgres", User: s.superUser(), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)),
		Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// SocketDSN returns a connection string for database db over the Unix
// socket, as the superuser.
func (s *Server) SocketDSN(db string) string {
	return s.socketDSN(db, s.superUser())
}

// RoleDSN returns a connection string for database db over the Unix socket,
// as role with password.
func (s *Server) RoleDSN(db, role, password string) string {
	return s.socketDSN(db, url.UserPassword(role, password))
}

func (s *Server) socketDSN(db string, who *url.Userinfo) string {
	q := url.Values{"host": {s.Dir}, "port": {strconv.Itoa(s.Port)}}
	u := url.URL{Scheme: "postgres", User: who, Path: "/" + db, RawQuery: q.Encode()}
	return u.String()
}

func (s *Server) superUser() *url.Userinfo {
	if s.superPassword == "" {
		return url.User(s.super)
	}
	return url.UserPassword(s.super, s.superPassword)
}

// randomPassword returns 32 random hex digits.
func randomPassword() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// CreateRole creates a login role that is not a superuser, may create
// neither databases nor roles, authenticates with password, and owns
// database db (so that it can create its tables there).
func (s *Server) CreateRole(ctx context.Context, role, password, db string) error {
	conn, err := pgx.Connect(ctx, s.SocketDSN("postgres"))
	if err != nil {
		return fmt.Errorf("create role %s: %w", role, err)
	}
	defer conn.Close(context.Background())
	id := pgx.Identifier{role}.Sanitize()
	quoted := "'" + strings.ReplaceAll(password, "'", "''") + "'"
	for _, q := range []string{
		"CREATE ROLE " + id + " LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD " + quoted,
		"ALTER DATABASE " + pgx.Identifier{db}.Sanitize() + " OWNER TO " + id,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("create role %s: %w", role, err)
		}
	}
	// From PostgreSQL 15 the public schema belongs to pg_database_owner,
	// the new owner; before, it was open to every role.
	return nil
}

// CreateDatabase creates database name, a copy of template (template0 when
// empty).
func (s *Server) CreateDatabase(ctx context.Context, name, template string) error {
	if template == "" {
		template = "template0"
	}
	conn, err := pgx.Connect(ctx, s.SocketDSN("postgres"))
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	defer conn.Close(context.Background())
	q := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	if _, err := conn.Exec(ctx, q); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

func (s *Server) proc() (*exec.Cmd, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd, s.exited
}

// Stop shuts the server down (fast shutdown, then SIGKILL after 10 s) and
// removes its directory. It is idempotent.
func (s *Server) Stop() error {
	var err error
	s.stopOnce.Do(func() {
		if cmd, exited := s.proc(); cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Signal(syscall.SIGINT) // fast shutdown
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		}
		err = os.RemoveAll(s.Dir)
	})
	return err
}

// Kill ends the server at once with SIGKILL, as a crash would. The data
// stays: Restart starts it again on the same port.
func (s *Server) Kill() error {
	cmd, exited := s.proc()
	if cmd == nil || cmd.Process == nil {
		return errors.New("not started")
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
	// The backends die with the postmaster but may still hold its shared
	// memory for a moment; a restart before they are gone is refused.
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(-cmd.Process.Pid, 0) == nil {
		if time.Now().After(deadline) {
			return errors.New("kill: the server's processes did not end in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// Restart starts a server that Kill ended, on the same port and data.
func (s *Server) Restart(ctx context.Context) error {
	_, exited := s.proc()
	select {
	case <-exited:
	default:
		return errors.New("restart: the server is still running")
	}
	// A killed server's shared memory can outlive its processes for a
	// moment; PostgreSQL refuses to start over it until it is released.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.run(ctx)
		if err == nil || !strings.Contains(err.Error(), "pre-existing shared memory block") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
