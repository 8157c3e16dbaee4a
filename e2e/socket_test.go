package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// socketClient is an HTTP client whose every request goes to the Unix
// socket at path, as curl --unix-socket does.
func socketClient(t *testing.T, path string) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// send makes one request with a body and content type, and returns the
// status and the body of the answer.
func send(t *testing.T, hc *http.Client, method, url, contentType, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// mutualTLSAgent starts an agent whose TCP API needs the core's certificate
// (api.insecure off) and returns it with the directory of its certificates.
func mutualTLSAgent(t *testing.T, node string) (*proc, string, string) {
	t.Helper()
	base := t.TempDir()
	pki := filepath.Join(base, "tls")
	muster(t, nil, "tls", "ca", "create", "--dir", pki)
	muster(t, nil, "tls", "cert", "create", "--dir", pki, "--core")
	muster(t, nil, "tls", "cert", "create", "--dir", pki, "--client", "alice")
	muster(t, nil, "tls", "cert", "create", "--dir", pki, "--agent", node)
	file := func(name string) string { return filepath.Join(pki, name) }
	data := filepath.Join(base, "data")
	cfg := fmt.Sprintf(`node_id: %s
cluster_id: e2e
data_dir: %s
api:
  addr: 127.0.0.1:%d
  tls:
    cert_file: %s
    key_file: %s
    client_ca_file: %s
`, node, data, freePort(t), file("agent-"+node+".pem"), file("agent-"+node+"-key.pem"), file("ca.pem"))
	path := filepath.Join(base, "agent.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	want := tlsutil.Agent(node)
	p := startProbed(t, base, node, nil, probe(tlsClient(t, pki, pki, "core", &want), "https://%s/api/v1/health"),
		"agent", "--config", path)
	return p, pki, filepath.Join(data, "agent.sock")
}

// Item 4 of the attack review, docs/architecture.md, "Who may call an agent":
// the agent's TCP API answers only the core's certificate, on loopback too,
// unless api.insecure is set; people on the node use the socket.
func TestAgentTCPAnswersOnlyTheCoreUnlessInsecure(t *testing.T) {
	t.Parallel()
	// Plaintext TCP without api.insecure does not even start.
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	cfg := fmt.Sprintf("node_id: n1\ncluster_id: e2e\ndata_dir: %s\napi:\n  addr: 127.0.0.1:%d\n", filepath.Join(dir, "data"), freePort(t))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "agent", "--config", path).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "api.addr: 127.0.0.1:") {
		t.Fatalf("plaintext loopback without api.insecure: %v\n%s", err, out)
	}

	p, pki, sock := mutualTLSAgent(t, "n1")
	push := `{"kind":"muster.io/debug.ping"}`
	// No TLS: refused.
	if resp, err := http.Post("http://"+p.Addr()+"/api/v1/actions", "application/json", strings.NewReader(push)); err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("a plaintext push got %d", resp.StatusCode)
		}
	}
	want := tlsutil.Agent("n1")
	// TLS without a client certificate: the handshake fails.
	if _, err := tlsClient(t, pki, pki, "", &want).Get("https://" + p.Addr() + "/api/v1/info"); err == nil {
		t.Fatal("a TLS client without a certificate was answered")
	}
	// A person's certificate of the same CA: 403.
	if st, b := send(t, tlsClient(t, pki, pki, "client-alice", &want), http.MethodPost, "https://"+p.Addr()+"/api/v1/actions", "application/json", push); st != http.StatusForbidden {
		t.Fatalf("a push with a person's certificate: %d %s", st, b)
	}
	// The core's certificate: served.
	if st, b := send(t, tlsClient(t, pki, pki, "core", &want), http.MethodPost, "https://"+p.Addr()+"/api/v1/actions", "application/json", push); st != http.StatusCreated {
		t.Fatalf("a push with the core's certificate: %d %s", st, b)
	}
	// The socket: mode 0660, served without a certificate.
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket %s: %v %v", sock, fi.Mode(), err)
	}
	if st, b := send(t, socketClient(t, sock), http.MethodGet, "http://agent/api/v1/info", "", ""); st != http.StatusOK {
		t.Fatalf("info over the socket: %d %s", st, b)
	}
}

// Item 4 of the attack review: a push over the socket records the caller's
// user (from its uid, as the kernel reports it) as requester, whatever the
// body claims; origin stays agent and approved_by empty. The core then sees
// the action as the node's user made it.
func TestSocketPushRecordsTheCallersUID(t *testing.T) {
	t.Parallel()
	_, _, sock := mutualTLSAgent(t, "n1")
	hc := socketClient(t, sock)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if me.Uid != strconv.Itoa(os.Getuid()) {
		t.Fatalf("user.Current %s is not uid %d", me.Uid, os.Getuid())
	}
	body := `{"kind":"muster.io/debug.ping","origin":"core","requester":"alice","approved_by":"bob\u001b[31mFORGED","created_ts":"2001-01-01T00:00:00Z"}`
	st, b := send(t, hc, http.MethodPost, "http://agent/api/v1/actions", "application/json", body)
	if st != http.StatusCreated {
		t.Fatalf("push over the socket: %d %s", st, b)
	}
	var a action.Action
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if a.Requester != me.Username || a.Origin != action.OriginAgent || a.ApprovedBy != "" || a.CreatedTS.Year() < 2020 {
		t.Fatalf("recorded requester %q origin %q approved_by %q created %s; want %q (uid %s), agent, none, now",
			a.Requester, a.Origin, a.ApprovedBy, a.CreatedTS, me.Username, me.Uid)
	}
	got, err := client.NewAgent("http://agent", hc).Get(ctxT(t), a.ID)
	if err != nil || got.Requester != me.Username || got.History[0].Actor != me.Username {
		t.Fatalf("show over the socket: %+v %v", got, err)
	}
}

// Item 4 of the attack review: a text/plain POST (what a web page may send
// anywhere without asking) is refused 415 with the error envelope, on the
// socket and on a development agent's plaintext TCP API, and queues nothing.
func TestTextPlainPostIsRefused415(t *testing.T) {
	t.Parallel()
	p, ag, dir := agentProc(t, "t415", "")
	sock := filepath.Join(dir, "data", "agent.sock")
	for name, c := range map[string]struct {
		hc  *http.Client
		url string
	}{
		"tcp":    {&http.Client{Timeout: 10 * time.Second}, "http://" + p.Addr()},
		"socket": {socketClient(t, sock), "http://agent"},
	} {
		for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", ""} {
			st, b := send(t, c.hc, http.MethodPost, c.url+"/api/v1/actions", ct, `{"kind":"muster.io/debug.ping"}`)
			var env wire.ErrorBody
			if err := json.Unmarshal(b, &env); err != nil || st != http.StatusUnsupportedMediaType || env.Error.Code != wire.CodeUnsupportedMediaType {
				t.Errorf("%s, Content-Type %q: %d %s", name, ct, st, b)
			}
		}
	}
	page, err := ag.Changes(ctxT(t), -1, 0, false)
	if err != nil || len(page.Actions) != 0 {
		t.Fatalf("refused pushes queued %+v (%v)", page, err)
	}
}

// Issue 31, item 6: a person on the node cancels with a body-less POST on
// the socket (curl -X POST --unix-socket), without declaring JSON; over TCP,
// which a web page may reach, the same request is still a 415.
func TestABodylessCancelOnTheSocketNeedsNoContentType(t *testing.T) {
	t.Parallel()
	p, _, dir := agentProc(t, "nobody", "")
	hc := socketClient(t, filepath.Join(dir, "data", "agent.sock"))
	st, b := send(t, hc, http.MethodPost, "http://agent/api/v1/actions", "application/json",
		`{"kind":"muster.io/debug.sleep","args":{"seconds":600}}`)
	if st != http.StatusCreated {
		t.Fatalf("push over the socket: %d %s", st, b)
	}
	var a action.Action
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	tcp := &http.Client{Timeout: 10 * time.Second}
	if st, b := send(t, tcp, http.MethodPost, "http://"+p.Addr()+"/api/v1/actions/"+a.ID+"/cancel", "", ""); st != http.StatusUnsupportedMediaType {
		t.Fatalf("a body-less cancel over TCP without Content-Type: %d %s, want 415", st, b)
	}
	if st, b := send(t, hc, http.MethodPost, "http://agent/api/v1/actions/"+a.ID+"/cancel", "", ""); st != http.StatusAccepted {
		t.Fatalf("a body-less cancel on the socket: %d %s, want 202", st, b)
	}
}

// Issue 30, item 6: one member of the socket's group holding 1,100 blocking
// reads (GET /api/v1/actions?wait=) locks neither root nor anyone else out
// of the agent's socket: held waits are capped per uid and in all, a wait
// over the cap is answered at once (no wait_ms), and root's own wait is
// still held. A real agent; the flood is a real process of uid 65534.
func TestSocketWaitFloodByOneUserLeavesRootServed(t *testing.T) {
	// Not parallel: it measures how fast an agent or the core answers under a
	// flood, so it runs alone among the end-to-end tests (they run four at a
	// time), as its bounds assume.
	if os.Getuid() != 0 {
		t.Skip("needs root: the flood runs as another user")
	}
	grp, err := user.LookupGroupId("65534")
	if err != nil {
		t.Skip("no group 65534 on this host")
	}
	dir := t.TempDir()
	flood := filepath.Join(dir, "waitflood")
	if out, err := exec.Command("go", "build", "-o", flood, "./testdata/waitflood").CombinedOutput(); err != nil {
		t.Fatalf("build waitflood: %v\n%s", err, out)
	}
	// The other user reaches the socket through the test's directories.
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	_, _, agentDir := agentProcIn(t, dir, "waited", fmt.Sprintf("  socket_group: %s\n", grp.Name))
	sock := filepath.Join(agentDir, "data", "agent.sock")

	cmd := exec.Command(flood, sock, "1100")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("waitflood: %v", err)
	}
	t.Logf("uid 65534, 1,100 GET ?wait=30s: %s", strings.TrimSpace(line))
	var held, answered, closed, unconnected int
	if _, err := fmt.Sscanf(line, "held %d answered %d closed %d unconnected %d", &held, &answered, &closed, &unconnected); err != nil {
		t.Fatalf("waitflood said %q: %v", line, err)
	}

	// Root is served, and its own wait is held.
	hc := socketClient(t, sock)
	begin := time.Now()
	st, b := send(t, hc, http.MethodGet, "http://agent/api/v1/actions?since=0&wait=1s", "", "")
	var page wire.ChangesPage
	if st != http.StatusOK || json.Unmarshal(b, &page) != nil || page.WaitMS != 1000 {
		t.Fatalf("root's wait under the flood: %d %s, want 200 with wait_ms 1000", st, b)
	}
	t.Logf("root's GET ?wait=1s under the flood answered after %s", time.Since(begin))
	// One user holds at most 8 waits (api.MaxWaitsPerUser); the rest were
	// answered at once or their connections closed (the socket's guard:
	// 64 connections a user, the oldest idle first).
	if held > 8 || held+answered+closed+unconnected != 1100 {
		t.Fatalf("one user holds more waits than its cap: %s", line)
	}
}
