package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// `muster dev` prints working export lines: alice creates, bob approves, the
// action runs on a dev agent. SIGTERM stops it with exit 0.
func TestDevClusterWalkthrough(t *testing.T) {
	t.Parallel()
	corePort, agentPort := freePort(t), freePort(t)
	cmd := exec.Command(binary, "dev", "--agents", "1", "--interval", "500ms",
		"--api-addr", "127.0.0.1:"+strconv.Itoa(corePort), "--agent-port", strconv.Itoa(agentPort),
		"--health-addr", "127.0.0.1:0")
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
	case <-time.After(60 * time.Second):
		t.Fatal("no banner from muster dev")
	}
	addr := regexp.MustCompile(`export MUSTER_ADDR=(\S+)`).FindStringSubmatch(text)
	alice := regexp.MustCompile(`export MUSTER_TOKEN=(\S+)`).FindStringSubmatch(text)
	bob := regexp.MustCompile(`MUSTER_TOKEN=(\S+) \S+ action approve`).FindStringSubmatch(text)
	if addr == nil || alice == nil || bob == nil {
		t.Fatalf("banner lacks the export lines:\n%s", text)
	}
	hc := &http.Client{Timeout: 10 * time.Second}

	// The banner names the web UI and a one-time sign-in link per person,
	// which signs in from loopback once.
	if !strings.Contains(text, addr[1]+"/ui/") {
		t.Fatalf("the banner does not name the web UI:\n%s", text)
	}
	for _, name := range []string{"alice", "bob"} {
		link := regexp.MustCompile(name + `\s+(http://\S+/ui/dev-login\?nonce=\S+)`).FindStringSubmatch(text)
		if link == nil {
			t.Fatalf("no sign-in link for %s:\n%s", name, text)
		}
		noRedirect := &http.Client{Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for i, want := range []int{http.StatusSeeOther, http.StatusForbidden} {
			resp, err := noRedirect.Get(link[1])
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			signedIn := false
			for _, c := range resp.Cookies() {
				signedIn = signedIn || c.Name == "muster_session" && c.Value != ""
			}
			if resp.StatusCode != want || signedIn != (i == 0) {
				t.Fatalf("%s's link, use %d: %d (session %v), want %d", name, i+1, resp.StatusCode, signedIn, want)
			}
		}
	}
	a := client.NewCore(addr[1], alice[1], hc)
	b := client.NewCore(addr[1], bob[1], hc)
	created, err := a.CreateAction(ctxT(t), &wire.CreateActionRequest{ClusterID: "dev", NodeID: "node-1",
		Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":0.1}`)})
	if err != nil || created.State != action.PendingApprove {
		t.Fatalf("create as alice: %+v %v", created, err)
	}
	if _, err := a.Approve(ctxT(t), created.ID); client.StatusOf(err) != 403 {
		t.Fatalf("alice approving her own action: %v, want 403", err)
	}
	if _, err := b.Approve(ctxT(t), created.ID); err != nil {
		t.Fatalf("approve as bob: %v", err)
	}
	testwait.Within(t, 10*time.Second, "the action DONE", func() bool {
		got, err := a.Action(ctxT(t), created.ID)
		return err == nil && got.State == action.Done
	})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("muster dev after SIGTERM: %v", err)
	}
}
