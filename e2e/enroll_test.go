package e2e

import (
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// musterFails runs the real binary and fails the test unless it exits
// non-zero; it returns the output.
func musterFails(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("muster %s succeeded, want a failure:\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

// startProbedRetrying starts a process whose configuration write makes
// for fresh ports, again with new ones when a port found free was taken
// before the process bound it.
func startProbedRetrying(t *testing.T, dir, name string, probe func(string) bool, write func() []string) *proc {
	t.Helper()
	return startAll(t, probedAttempt(t, dir, name, probe, write))[0]
}

// probedAttempt is startProbedRetrying's process, for startAll.
func probedAttempt(t *testing.T, dir, name string, probe func(string) bool, write func() []string) func() *proc {
	return func() *proc {
		return &proc{t: t, name: name, args: write(), logPath: filepath.Join(dir, name+".log"), probe: probe}
	}
}

var pinRE = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

// enrollFleet is a TLS core with agents_tls and agents_ca, gossip on, and no
// node configured: every agent joins by enrollment.
type enrollFleet struct {
	t          *testing.T
	base, pki  string
	pin        string
	url        string
	core       *proc
	admin      *client.Core
	env        []string // the client commands' environment, as admin
	coreGossip string
	agents     map[string]*proc
	// agentYAML, when set, is added to a node's agent configuration (its
	// labels, say).
	agentYAML map[string]string
	// replaces, when set, names the node a node's agent asks to replace
	// at its enrollment (enroll.replaces).
	replaces map[string]string
}

func newEnrollFleet(t *testing.T, lifetime time.Duration) *enrollFleet {
	t.Helper()
	return newEnrollFleetWith(t, lifetime, enrollFleetOptions{})
}

// enrollFleetOptions vary the core of an enrollment fleet.
type enrollFleetOptions struct {
	// clientCA sets api.tls.client_ca_file (the fleet's CA): the admin
	// client and the CLI present the core's certificate.
	clientCA bool
	// extra is appended to the core's configuration (a clusters: list).
	extra string
	// orchestrate, when set, replaces the settings under orchestrate:
	// (indented two spaces).
	orchestrate string
}

func newEnrollFleetWith(t *testing.T, lifetime time.Duration, o enrollFleetOptions) *enrollFleet {
	t.Helper()
	f := &enrollFleet{t: t, base: t.TempDir(), agents: map[string]*proc{}, coreGossip: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	orch := "  interval: 2s\n  agent_timeout: 2s\n"
	if o.orchestrate != "" {
		orch = o.orchestrate
	}
	f.pki = filepath.Join(f.base, "tls")
	out := muster(t, nil, "tls", "ca", "create", "--dir", f.pki)
	f.pin = pinRE.FindString(out)
	if f.pin == "" {
		t.Fatalf("tls ca create printed no pin:\n%s", out)
	}
	muster(t, nil, "tls", "cert", "create", "--dir", f.pki, "--core")
	file := func(name string) string { return filepath.Join(f.pki, name) }
	dir := filepath.Join(f.base, "core")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	key := writeKey(t)
	path := filepath.Join(dir, "core.yaml")
	hc := tlsClient(t, f.pki, "", "", nil)
	clientCA := ""
	if o.clientCA {
		hc = tlsClient(t, f.pki, f.pki, "core", nil)
		clientCA = ", client_ca_file: " + file("ca.pem")
	}
	f.core = startProbedRetrying(t, dir, "core", probe(hc, "https://%s/health"), func() []string {
		f.coreGossip = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		cfg := fmt.Sprintf(`data_dir: %s
api:
  addr: 127.0.0.1:%d
  tls: {cert_file: %s, key_file: %s%s}
agents_tls: {ca_file: %s, cert_file: %s, key_file: %s}
agents_ca: {cert_file: %s, key_file: %s, lifetime: %s}
orchestrate:
%sgossip:
  enabled: true
  bind_addr: %s
  key_file: %s
%s
%s`, filepath.Join(dir, "data"), freePort(t), file("core.pem"), file("core-key.pem"), clientCA,
			file("ca.pem"), file("core.pem"), file("core-key.pem"), file("ca.pem"), file("ca-key.pem"), lifetime,
			orch, f.coreGossip, key, gossipTiming, o.extra)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"core", "--config", path}
	})
	secret, err := os.ReadFile(filepath.Join(dir, "data", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	f.url = "https://" + f.core.Addr()
	f.admin = client.NewCore(f.url, strings.TrimSpace(string(secret)), hc)
	f.env = []string{"MUSTER_ADDR=" + f.url, "MUSTER_CACERT=" + file("ca.pem"), "MUSTER_TOKEN=" + strings.TrimSpace(string(secret))}
	if o.clientCA {
		f.env = append(f.env, "MUSTER_CLIENT_CERT="+file("core.pem"), "MUSTER_CLIENT_KEY="+file("core-key.pem"))
	}
	return f
}

// joinToken makes a join token with the CLI and returns its file.
func (f *enrollFleet) joinToken(name string, args ...string) (string, wire.Token) {
	f.t.Helper()
	path := filepath.Join(f.base, name+".token")
	out := muster(f.t, f.env, append([]string{"token", "create", "--roles", "enroll", "--secret-file", path, "-o", "json"}, args...)...)
	return path, decodeJSON[wire.Token](f.t, out)
}

// agentConfig writes the configuration of an agent that enrolls at its
// first start with the token in tokenFile.
func (f *enrollFleet) agentConfig(node, cluster, tokenFile string) (string, string) {
	f.t.Helper()
	dir := filepath.Join(f.base, node)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		f.t.Fatal(err)
	}
	cfg := fmt.Sprintf(`node_id: %s
cluster_id: %s
data_dir: %s
api:
  addr: 127.0.0.1:%d
enroll:
  core: %s
  token_file: %s
  ca_pin: %s
  replaces: %q
gossip:
  enabled: true
  bind_addr: 127.0.0.1:%d
  join: [%q]
%s%s`, node, cluster, filepath.Join(dir, "data"), freePort(f.t), f.url, tokenFile, f.pin, f.replaces[node], freePort(f.t), f.coreGossip, gossipTiming,
		f.agentYAML[node])
	path := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return dir, path
}

// agent starts an agent that enrolls at its first start; it is ready once
// it answers the core's certificate with its enrolled one.
func (f *enrollFleet) agent(node, tokenFile string) *proc {
	f.t.Helper()
	return f.agentsAll(tokenFile, node)[0]
}

// agentsAll starts the agents of nodes side by side, as agent does one.
func (f *enrollFleet) agentsAll(tokenFile string, nodes ...string) []*proc {
	f.t.Helper()
	attempts := make([]func() *proc, len(nodes))
	for i, node := range nodes {
		want := tlsutil.Agent(node)
		attempts[i] = probedAttempt(f.t, filepath.Join(f.base, node), node,
			probe(tlsClient(f.t, f.pki, f.pki, "core", &want), "https://%s/api/v1/health"),
			func() []string {
				_, path := f.agentConfig(node, "prod", tokenFile)
				return []string{"agent", "--config", path}
			})
	}
	ps := startAll(f.t, attempts...)
	for i, node := range nodes {
		f.agents[node] = ps[i]
	}
	return ps
}

func (f *enrollFleet) node(id string) (wire.Node, bool) {
	ns, err := f.admin.Nodes(ctxT(f.t), "prod")
	if err != nil {
		return wire.Node{}, false
	}
	for _, n := range ns {
		if n.ID == id {
			return n, true
		}
	}
	return wire.Node{}, false
}

func (f *enrollFleet) events(typ, node string) []wire.Event {
	list, err := f.admin.Events(ctxT(f.t), 0, 1000, client.EventFilter{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []wire.Event
	for _, e := range list.Events {
		if e.Type == typ && (node == "" || e.NodeID == node) {
			out = append(out, e)
		}
	}
	return out
}

// runPing creates a ping on node as admin, approves it as bob, and waits
// for it to be DONE.
func (f *enrollFleet) runPing(bob *client.Core, node string) {
	f.t.Helper()
	a, err := f.admin.CreateAction(ctxT(f.t), &wire.CreateActionRequest{ClusterID: "prod", NodeID: node, Kind: "muster.io/debug.ping"})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := bob.Approve(ctxT(f.t), a.ID); err != nil {
		f.t.Fatal(err)
	}
	testwait.Within(f.t, 30*time.Second, "the ping on "+node+" DONE", func() bool {
		got, err := f.admin.Action(ctxT(f.t), a.ID)
		return err == nil && got.State == action.Done
	})
}

// The enrollment scenarios, on one enrollFleet whose certificates last
// 21 s (so that every agent renews every 14 s or so all along, 7 s before
// its certificate expires, a margin a loaded machine under -race keeps): three agents enroll with one token of three uses,
// come UP through gossip and run an approved action; a token for one
// cluster cannot enroll into another; an expired token cannot enroll; the
// agents renew without a restart and without a failed sync; a revoked node
// is refused at once (connections, gossip claim, renewal) and comes back
// only by enrolling with a new token; the core reloads its certificate on
// SIGHUP. What needs no renewal is done while the renewals are due.
func TestEnrollRenewRevoke(t *testing.T) {
	t.Parallel()
	f := newEnrollFleet(t, 21*time.Second)
	tokenFile, tok := f.joinToken("join", "--ttl", "1h", "--cluster", "prod", "--uses", "3")
	if tok.UsesLeft == nil || *tok.UsesLeft != 3 || tok.ClusterID != "prod" {
		t.Fatalf("join token %+v", tok)
	}
	sec, err := f.admin.CreateToken(ctxT(t), "bob", []string{"approver"})
	if err != nil {
		t.Fatal(err)
	}
	bob := client.NewCore(f.url, sec.Token, tlsClient(t, f.pki, "", "", nil))

	// 1. Three agents enroll with the one token and come UP.
	f.agentsAll(tokenFile, "node-1", "node-2", "node-3")
	testwait.Within(t, 30*time.Second, "three enrolled nodes UP", func() bool {
		for _, n := range []string{"node-1", "node-2", "node-3"} {
			if got, ok := f.node(n); !ok || got.Status != "UP" {
				return false
			}
		}
		return true
	})
	toks, err := f.admin.Tokens(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range toks {
		if tk.Name == tok.Name && (tk.UsesLeft == nil || *tk.UsesLeft != 0) {
			t.Fatalf("join token after three enrollments: %+v, want 0 uses left", tk)
		}
	}
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		p := enrolledFiles(t, filepath.Join(f.base, n, "data", "tls"))
		for _, file := range p {
			fi, err := os.Stat(file)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("%s: %v, mode %v; want 0600", file, err, fi.Mode().Perm())
			}
		}
	}
	if n := len(f.events("node.enrolled", "")); n != 3 {
		t.Fatalf("%d node.enrolled events, want 3", n)
	}
	f.runPing(bob, "node-2")

	// 2. A token for cluster prod cannot enroll into staging; an expired
	// token cannot enroll. Nothing is signed for either. (Checked while
	// the agents' first renewals are due, which are waited for next.)
	other, _ := f.joinToken("prod-only", "--cluster", "prod")
	_, cfgB := f.agentConfig("node-b", "staging", other)
	out := musterFails(t, nil, "agent", "enroll", "--config", cfgB)
	if !strings.Contains(out, "is for cluster prod, not staging") {
		t.Fatalf("a prod token enrolling into staging said:\n%s", out)
	}
	expFile, exp := f.joinToken("brief", "--cluster", "prod", "--ttl", "1s")
	testwait.Within(t, 10*time.Second, "the brief token expired", func() bool { return time.Now().After(*exp.ExpiresTS) })
	_, cfgE := f.agentConfig("node-e", "prod", expFile)
	out = musterFails(t, nil, "agent", "enroll", "--config", cfgE)
	if !strings.Contains(out, "expired") {
		t.Fatalf("an expired token said:\n%s", out)
	}
	for _, n := range []string{"node-b", "node-e"} {
		if refused := f.events("node.enroll_refused", n); len(refused) != 1 {
			t.Fatalf("%s: %d node.enroll_refused events, want 1", n, len(refused))
		}
		if _, err := os.Stat(filepath.Join(f.base, n, "data", "tls", "agent.pem")); err == nil {
			t.Fatalf("%s has a certificate", n)
		}
	}
	// A wrong pin never sends the token: the core records no attempt.
	before := len(f.events("node.enroll_refused", ""))
	out = musterFails(t, nil, "agent", "enroll", "--config", cfgE, "--ca-pin", "sha256:"+strings.Repeat("0", 64))
	if !strings.Contains(out, "pin") {
		t.Fatalf("a wrong pin said:\n%s", out)
	}
	if after := len(f.events("node.enroll_refused", "")); after != before {
		t.Fatal("the token was sent to a core that did not match the pin")
	}

	// 3. Renewal without a restart and without a failed sync: every agent
	// renews at least twice, starts once, and no node ever went DOWN.
	testwait.Within(t, 90*time.Second, "two renewals of every agent", func() bool {
		for _, n := range []string{"node-1", "node-2", "node-3"} {
			if len(f.events("node.cert_renewed", n)) < 2 {
				return false
			}
		}
		return true
	})
	for n, p := range f.agents {
		if c := strings.Count(p.logs(), "agent started"); c != 1 {
			t.Fatalf("%s started %d times, want once:\n%s", n, c, p.logs())
		}
		if strings.Contains(p.logs(), "renewal failed") {
			t.Fatalf("%s had a failed renewal:\n%s", n, p.logs())
		}
	}
	if downs := f.events("node.down", ""); len(downs) != 0 {
		t.Fatalf("nodes went DOWN across renewals: %+v", downs)
	}
	f.runPing(bob, "node-1") // after renewals, over the renewed certificates

	// 4. Revocation: refused at once, its claim refused, no renewal (due
	// within 10 s: step 5 is done meanwhile), and re-enrolling needs a new
	// token.
	out = muster(t, f.env, "node", "revoke", "node-3", "--reason", "disk sent for repair")
	if !strings.Contains(out, "revoked") {
		t.Fatalf("node revoke said:\n%s", out)
	}
	testwait.Within(t, 10*time.Second, "node-3 DOWN and shown revoked", func() bool {
		n, ok := f.node("node-3")
		return ok && n.Status == "DOWN" && n.Revoked && n.RevokeReason == "disk sent for repair"
	})
	testwait.Within(t, 10*time.Second, "node-3's gossip claim refused", func() bool {
		return len(f.events("node.claim_refused", "node-3")) > 0
	})
	if out := muster(t, f.env, "node", "list", "--cluster", "prod"); !strings.Contains(out, "REVOKED") {
		t.Fatalf("node list does not show the revocation:\n%s", out)
	}

	// 5. The core's certificate is replaced and reloaded on SIGHUP, with no
	// restart: new connections get it, and the agents still take the
	// core's (new) client certificate.
	served := func() string {
		conn, err := tls.Dial("tcp", f.core.Addr(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return ""
		}
		defer conn.Close()
		return tlsutil.SerialHex(conn.ConnectionState().PeerCertificates[0])
	}
	old := served()
	for _, n := range []string{"core.pem", "core-key.pem"} {
		if err := os.Remove(filepath.Join(f.pki, n)); err != nil {
			t.Fatal(err)
		}
	}
	muster(t, nil, "tls", "cert", "create", "--dir", f.pki, "--core")
	newSerial := readSerial(t, filepath.Join(f.pki, "core.pem"))
	if newSerial == old {
		t.Fatal("the new certificate has the old serial")
	}
	f.core.signal(syscall.SIGHUP)
	testwait.Within(t, 10*time.Second, "the core serving its new certificate", func() bool { return served() == newSerial })
	if c := strings.Count(f.core.logs(), "core started"); c != 1 {
		t.Fatalf("the core started %d times, want once", c)
	}
	f.runPing(bob, "node-2")

	// 4, continued: node-3's renewal, due since, is refused.
	testwait.Within(t, 40*time.Second, "node-3's renewal refused", func() bool {
		return len(f.events("node.renew_refused", "node-3")) > 0
	})
	// The others are untouched.
	f.runPing(bob, "node-1")
	// The used-up token cannot bring it back; a new one can.
	a3 := f.agents["node-3"]
	a3.kill()
	cfg3 := filepath.Join(f.base, "node-3", "agent.yaml")
	out = musterFails(t, nil, "agent", "enroll", "--config", cfg3, "--force")
	if !strings.Contains(out, "used up") {
		t.Fatalf("re-enrolling with the used-up token said:\n%s", out)
	}
	fresh, _ := f.joinToken("again", "--cluster", "prod", "--uses", "1")
	muster(t, nil, "agent", "enroll", "--config", cfg3, "--token-file", fresh, "--force")
	a3.restart()
	testwait.Within(t, 30*time.Second, "node-3 back UP, not revoked", func() bool {
		n, ok := f.node("node-3")
		return ok && n.Status == "UP" && !n.Revoked
	})
	f.runPing(bob, "node-3")
}

func readSerial(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := tlsutil.ParseCerts(b)
	if err != nil {
		t.Fatal(err)
	}
	return tlsutil.SerialHex(certs[0])
}

// signal sends sig to the process.
func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// enrolledFiles lists the files enrollment writes in dir.
func enrolledFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, n := range []string{"agent.pem", "agent-key.pem", "ca.pem", "gossip.key", "enrolled.json"} {
		out = append(out, filepath.Join(dir, n))
	}
	return out
}

// Issue 36, defect 0: 'agent enroll --dir D --data-dir X' prints the lines
// to start with, and an agent started instead with api.tls naming the
// files in D (no enroll block, no enroll.dir) still renews: on disk and in
// what it serves, without a restart.
func TestEnrolledIntoADirRenewsWhenAPITLSNamesItsFiles(t *testing.T) {
	t.Parallel()
	f := newEnrollFleet(t, 21*time.Second)
	tokenFile, _ := f.joinToken("dir", "--cluster", "prod")
	base := filepath.Join(f.base, "node-d")
	certs, data := filepath.Join(base, "certs"), filepath.Join(base, "data")
	out := muster(t, nil, "agent", "enroll", "--core", f.url, "--token-file", tokenFile, "--ca-pin", f.pin,
		"--node-id", "node-d", "--cluster-id", "prod", "--dir", certs, "--data-dir", data)
	for _, line := range []string{`node_id: "node-d"`, `data_dir: "` + data + `"`, `dir: "` + certs + `"`} {
		if !strings.Contains(out, line) {
			t.Fatalf("agent enroll does not print %q:\n%s", line, out)
		}
	}
	cert := filepath.Join(certs, "agent.pem")
	first := readSerial(t, cert)
	want := tlsutil.Agent("node-d")
	p := startAll(t, probedAttempt(t, base, "node-d",
		probe(tlsClient(t, f.pki, f.pki, "core", &want), "https://%s/api/v1/health"),
		func() []string {
			cfg := fmt.Sprintf(`node_id: node-d
cluster_id: prod
data_dir: %s
api:
  addr: 127.0.0.1:%d
  tls: {cert_file: %s, key_file: %s, client_ca_file: %s}
gossip:
  enabled: true
  bind_addr: 127.0.0.1:%d
  join: [%q]
  key_file: %s
%s`, data, freePort(t), cert, filepath.Join(certs, "agent-key.pem"), filepath.Join(certs, "ca.pem"),
				freePort(t), f.coreGossip, filepath.Join(certs, "gossip.key"), gossipTiming)
			path := filepath.Join(base, "agent.yaml")
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			return []string{"agent", "--config", path}
		}))[0]
	clientCert, err := tls.LoadX509KeyPair(filepath.Join(f.pki, "core.pem"), filepath.Join(f.pki, "core-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		conn, err := tls.Dial("tcp", p.Addr(), &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{clientCert}})
		if err != nil {
			return ""
		}
		defer conn.Close()
		return tlsutil.SerialHex(conn.ConnectionState().PeerCertificates[0])
	}
	if s := served(); s != first {
		t.Fatalf("the agent serves %q, not its enrolled certificate %q", s, first)
	}
	testwait.Within(t, 60*time.Second, "node-d's certificate renewed on disk and served", func() bool {
		b, err := os.ReadFile(cert)
		if err != nil {
			return false
		}
		certs, err := tlsutil.ParseCerts(b)
		if err != nil || len(certs) == 0 {
			return false // being replaced
		}
		onDisk := tlsutil.SerialHex(certs[0])
		return onDisk != first && served() == onDisk
	})
	if n := len(f.events("node.cert_renewed", "node-d")); n == 0 {
		t.Fatal("the core recorded no renewal of node-d")
	}
	if c := strings.Count(p.logs(), "agent started"); c != 1 {
		t.Fatalf("node-d started %d times, want once:\n%s", c, p.logs())
	}
}
