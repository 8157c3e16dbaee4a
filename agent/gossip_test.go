package agent

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/testwait"
)

func TestGossipConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string // the one bad field; "" when valid
	}{
		{"disabled needs nothing", func(c *Config) { c.Gossip.Enabled = false; c.Gossip.KeyFile = "" }, ""},
		{"key file", func(c *Config) {}, ""},
		{"no key", func(c *Config) { c.Gossip.KeyFile = "" }, "gossip.key_file"},
		{"insecure", func(c *Config) { c.Gossip.KeyFile, c.Gossip.Insecure = "", true }, ""},
		{"bad join", func(c *Config) { c.Gossip.Join = []string{"core"} }, "gossip.join[0]"},
		{"bad profile", func(c *Config) { c.Gossip.Profile = "wan" }, "gossip.profile"},
		{"probe timeout over interval", func(c *Config) { c.Gossip.ProbeInterval = 100 * time.Millisecond }, "gossip.probe_timeout"},
		{"API on every interface without advertise_api", func(c *Config) { c.API.Addr, c.API.Insecure = "0.0.0.0:7420", true }, "gossip.advertise_api"},
		{"labels", func(c *Config) { c.Labels = map[string]string{"role": "replica", "zone": "eu-1"} }, ""},
		{"bad label", func(c *Config) { c.Labels = map[string]string{"role": "a b"} }, "labels"},
		{"labels too long for gossip", func(c *Config) {
			c.Labels = map[string]string{}
			for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
				c.Labels[k] = strings.Repeat("v", 60)
			}
		}, "labels"},
		{"API on every interface with advertise_api", func(c *Config) {
			c.API.Addr, c.API.Insecure, c.Gossip.AdvertiseAPI = "0.0.0.0:7420", true, "10.0.0.1:7420"
		}, ""},
		{"advertise_api with a scheme", func(c *Config) { c.Gossip.AdvertiseAPI = "http://10.0.0.1:7420" }, "gossip.advertise_api"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			cfg.NodeID, cfg.ClusterID, cfg.DataDir, cfg.API.Addr, cfg.API.Insecure = "n1", "c1", "/d", "127.0.0.1:7420", true
			cfg.Gossip.Enabled, cfg.Gossip.KeyFile, cfg.Gossip.Join = true, "/gossip.key", []string{"10.0.0.9:7946"}
			c.edit(&cfg)
			err := cfg.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if got := config.FieldsOf(err); !slices.Equal(got, []string{c.want}) {
				t.Fatalf("bad fields %q (%v), want %q", got, err, c.want)
			}
		})
	}
}

// TestAgentAnnouncesItselfAndLeaves runs an agent with gossip against a
// member playing the core: the agent joins with its cluster, node and API
// address, and leaves cleanly when it stops.
func TestAgentAnnouncesItselfAndLeaves(t *testing.T) {
	t.Parallel()
	keyText, err := gossip.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(keyFile, []byte(keyText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, _ := gossip.ParseKey(keyText)
	var (
		mu  sync.Mutex
		evs []gossip.Event
	)
	timing := gossip.Timing{Profile: gossip.ProfileLocal, ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 100 * time.Millisecond}
	core, err := gossip.New(gossip.Config{Name: "core", BindAddr: "127.0.0.1:0", Key: key, Timing: timing,
		Meta:    gossip.Meta{Role: gossip.RoleCore, API: "127.0.0.1:7410"},
		Handler: func(ev gossip.Event) { mu.Lock(); evs = append(evs, ev); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if err := core.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Stop)
	seen := func(kind gossip.Kind) *gossip.Event {
		mu.Lock()
		defer mu.Unlock()
		for i := range evs {
			if evs[i].Kind == kind {
				return &evs[i]
			}
		}
		return nil
	}

	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir = "n1", "c1", t.TempDir()
	cfg.API.Addr, cfg.API.Insecure = "127.0.0.1:0", true
	cfg.Labels = map[string]string{"role": "replica"}
	cfg.Gossip = GossipConfig{Enabled: true, BindAddr: "127.0.0.1:0", Join: []string{core.Addr()}, KeyFile: keyFile, Timing: timing}
	logs := &logLines{}
	ag, err := New(cfg, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-ag.Ready()

	testwait.For(t, "the agent's join", func() bool { return seen(gossip.KindJoin) != nil })
	// The agent can tell only the cores it knows that it leaves: stop it
	// once its own join has completed, not merely once the core saw it.
	testwait.For(t, "the agent's log of its join", func() bool { return logs.has("gossip joined") })
	j := seen(gossip.KindJoin)
	want := gossip.Meta{V: gossip.MetaVersion, Role: gossip.RoleAgent, Cluster: "c1", Node: "n1", API: ag.Addr().String(),
		Leave: j.Meta.Leave, Labels: labels.Set{"role": "replica"}}
	if !reflect.DeepEqual(j.Meta, want) || j.Meta.Leave == "" {
		t.Fatalf("announced %+v, want %+v", j.Meta, want)
	}

	// An action that runs and finishes makes the agent tell the core, by a
	// note naming the node only.
	resp, err := http.Post("http://"+ag.Addr().String()+"/api/v1/actions", "application/json",
		strings.NewReader(`{"kind":"muster.io/debug.ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("push: %s", resp.Status)
	}
	testwait.For(t, "a changed note", func() bool { return seen(gossip.KindChanged) != nil })
	if ev := seen(gossip.KindChanged); ev.Meta.Cluster != "c1" || ev.Meta.Node != "n1" || ev.Meta.API != "" {
		t.Fatalf("changed note %+v", ev.Meta)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the cleanup
	testwait.For(t, "the agent's leave", func() bool { return seen(gossip.KindLeave) != nil })
	if seen(gossip.KindFail) != nil {
		t.Fatal("a clean stop was seen as a failure")
	}
}

// logLines is a slog handler that keeps the messages logged, for a test to
// wait on one.
type logLines struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}

func (l *logLines) has(msg string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.msgs, msg)
}
