package e2e

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// freePorts returns the first of n consecutive free loopback ports.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		first := freePort(t)
		ok := true
		for i := 1; i < n && ok; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(first+i))
			if err != nil {
				ok = false
				continue
			}
			l.Close()
		}
		if ok {
			return first
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// `muster dev --ha` (make dev-ha) starts PostgreSQL, the replicas and the
// agents, and prints working lines: alice creates on one replica, bob
// approves on another, the action runs; core status lists the replicas with
// one lease each. SIGTERM stops everything with exit 0.
func TestDevHAWalkthrough(t *testing.T) {
	t.Parallel()
	corePort, agentPort := freePorts(t, 2), freePorts(t, 2)
	cmd := exec.Command(binary, "dev", "--ha", "--replicas", "2", "--agents", "2", "--interval", "1s",
		"--api-addr", "127.0.0.1:"+strconv.Itoa(corePort), "--agent-port", strconv.Itoa(agentPort))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	banner := make(chan string, 1)
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "Stop with Ctrl-C") {
				banner <- b.String()
			}
		}
	}()
	var text string
	select {
	case text = <-banner:
	case <-time.After(90 * time.Second):
		t.Fatal("no banner from muster dev --ha")
	}
	addr := regexp.MustCompile(`export MUSTER_ADDR=(\S+)`).FindStringSubmatch(text)
	alice := regexp.MustCompile(`export MUSTER_TOKEN=(\S+)`).FindStringSubmatch(text)
	bob := regexp.MustCompile(`MUSTER_ADDR=(\S+) MUSTER_TOKEN=(\S+) \S+ action approve`).FindStringSubmatch(text)
	if addr == nil || alice == nil || bob == nil || addr[1] == bob[1] {
		t.Fatalf("banner lacks the lines for two replicas:\n%s", text)
	}
	checkDevHAPostgresIsPrivate(t, text)
	hc := &http.Client{Timeout: 10 * time.Second}
	a := client.NewCore(addr[1], alice[1], hc)
	b := client.NewCore(bob[1], bob[2], hc)
	testwait.Within(t, 20*time.Second, "two live replicas with one lease each", func() bool {
		rs, err := a.Replicas(ctxT(t))
		if err != nil || rs.Store != "postgres" || len(rs.Replicas) != 2 {
			return false
		}
		for _, r := range rs.Replicas {
			if !r.Live || len(r.Leases) != 1 {
				return false
			}
		}
		return true
	})
	created, err := a.CreateAction(ctxT(t), &wire.CreateActionRequest{ClusterID: "dev-1", NodeID: "node-1",
		Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":0.1}`)})
	if err != nil {
		t.Fatalf("create as alice: %v", err)
	}
	if _, err := b.Approve(ctxT(t), created.ID); err != nil {
		t.Fatalf("approve as bob on the other replica: %v", err)
	}
	testwait.Within(t, 20*time.Second, "the action DONE", func() bool {
		got, err := a.Action(ctxT(t), created.ID)
		return err == nil && got.State == action.Done
	})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("muster dev --ha after SIGTERM: %v", err)
	}
	if _, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(corePort+1)); err == nil {
		t.Fatal("a replica still listens after muster dev --ha stopped")
	}
}

// checkDevHAPostgresIsPrivate (hardening of issue 17): the PostgreSQL of
// `muster dev --ha` listens on a Unix socket alone, wants a password, and
// the muster role the replicas use is not a superuser.
func checkDevHAPostgresIsPrivate(t *testing.T, banner string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  postgres  (\S+)$`).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("no postgres line in the banner:\n%s", banner)
	}
	u, err := url.Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	if u.User.Username() != "muster" || pw == "" || u.Hostname() != "" || !strings.HasPrefix(u.Query().Get("host"), "/") {
		t.Fatalf("postgres DSN %s: want the muster role with a password, over a Unix socket", u.Redacted())
	}
	ctx := ctxT(t)
	if c, err := net.Dial("tcp", "127.0.0.1:"+u.Query().Get("port")); err == nil {
		c.Close()
		t.Fatal("the PostgreSQL of muster dev --ha listens on TCP")
	}
	noPW := *u
	noPW.User = url.User("muster")
	if conn, err := pgx.Connect(ctx, noPW.String()); err == nil {
		conn.Close(ctx)
		t.Fatal("connected as muster without its password")
	}
	conn, err := pgx.Connect(ctx, m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var super bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil || super {
		t.Fatalf("the muster role: superuser %v (%v), want not", super, err)
	}
}
