// Package notify delivers the notification outbox (docs/notifications.md):
// each event a destination wants is enqueued by the store in the
// transaction of the event (store.Outbox); a Worker sends each
// destination's deliveries one at a time, in event order, retrying with
// backoff, signed as the Standard Webhooks specification says (json) or as
// one line of text (slack).
package notify

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/musterhq/muster/core/glob"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/names"
)

// Formats of a destination.
const (
	FormatJSON  = "json"
	FormatSlack = "slack"
	// FormatCloudEvents posts the CloudEvents 1.0 JSON envelope
	// (wire.CloudEvent, structured mode), signed as json is.
	FormatCloudEvents = "cloudevents"
)

// Destination is one entry of the core's notify: list.
type Destination struct {
	Name   string `mapstructure:"name" yaml:"name"`
	URL    string `mapstructure:"url" yaml:"url"`
	Format string `mapstructure:"format" yaml:"format"`
	// SecretFile holds the signing secret (json): whsec_ and base64, as
	// the specification writes secrets, or any other text, used as is.
	SecretFile string `mapstructure:"secret_file" yaml:"secret_file"`
	// Events are globs of event types; empty: every event.
	Events []string `mapstructure:"events" yaml:"events"`
	// Clusters are globs of cluster ids; empty: every cluster. Events
	// that name no cluster pass.
	Clusters []string `mapstructure:"clusters" yaml:"clusters"`
}

// Known is what the configured globs are checked against.
type Known struct {
	// Clusters are the configured clusters; with Dynamic, clusters come
	// from agents too and cluster globs are not checked against them.
	Clusters []string
	Dynamic  bool
}

// Validate returns one error per bad field of dests, named notify[i].field.
// A secret file must be readable and private (the key-file mode rule).
func Validate(dests []Destination, allowLoopback bool, known Known) config.Errors {
	var errs config.Errors
	seen := map[string]bool{}
	for i, d := range dests {
		key := fmt.Sprintf("notify[%d]", i)
		switch {
		case d.Name == "":
			errs.Add(key+".name", "required")
		case names.CheckID(d.Name) != nil:
			errs.Add(key+".name", "%v", names.CheckID(d.Name))
		case seen[d.Name]:
			errs.Add(key+".name", "destination %q is listed twice", d.Name)
		}
		seen[d.Name] = true
		if err := checkURL(d.URL, allowLoopback); err != nil {
			errs.Add(key+".url", "%v", err)
		}
		switch d.Format {
		case FormatJSON, FormatSlack, FormatCloudEvents:
		default:
			errs.Add(key+".format", "%q is not %q, %q or %q", d.Format, FormatJSON, FormatCloudEvents, FormatSlack)
		}
		if d.SecretFile == "" {
			if d.Format == FormatJSON || d.Format == FormatCloudEvents {
				errs.Add(key+".secret_file", "required with format %s (the signing secret)", d.Format)
			}
		} else if _, err := LoadSecret(d.SecretFile); err != nil {
			errs.Add(key+".secret_file", "%v", err)
		}
		for j, g := range d.Events {
			if !glob.Valid(g) {
				errs.Add(fmt.Sprintf("%s.events[%d]", key, j), "%q is not a valid glob", g)
			} else if !slices.ContainsFunc(store.EventTypes, func(t string) bool { return glob.Match(g, t) }) {
				errs.Add(fmt.Sprintf("%s.events[%d]", key, j), "%q matches no event type (such as %s)", g,
					strings.Join([]string{store.EventApprovalWaiting, store.EventRunPaused, store.EventNodeDown}, ", "))
			}
		}
		for j, g := range d.Clusters {
			if !glob.Valid(g) {
				errs.Add(fmt.Sprintf("%s.clusters[%d]", key, j), "%q is not a valid glob", g)
			} else if !known.Dynamic && !slices.ContainsFunc(known.Clusters, func(c string) bool { return glob.Match(g, c) }) {
				errs.Add(fmt.Sprintf("%s.clusters[%d]", key, j), "%q matches no configured cluster", g)
			}
		}
	}
	if len(dests) > store.MaxDestinations {
		errs.Add("notify", "%d destinations, at most %d", len(dests), store.MaxDestinations)
	}
	return errs
}

// checkURL accepts an https URL with a host, or an http one when loopback
// destinations are allowed; a literal loopback or link-local address only
// then.
func checkURL(raw string, allowLoopback bool) error {
	if raw == "" {
		return fmt.Errorf("required (the https URL to post to)")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%s is not an http(s) URL with a host", Redact(raw))
	}
	if u.Scheme != "https" && !allowLoopback {
		return fmt.Errorf("%s is not https (plain http only with notify_allow_loopback)", Redact(raw))
	}
	if !allowLoopback && gossip.InternalHost(u.Hostname()) {
		return fmt.Errorf("%s is a loopback or link-local address (allowed only with notify_allow_loopback)", Redact(raw))
	}
	return nil
}

// Redact returns the scheme and host of a URL: its path and query may hold
// a secret (a Slack webhook's does) and are never logged or shown.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(an unreadable URL)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// LoadSecret reads a signing secret: the file must be private to its owner.
// "whsec_" and base64 is decoded; any other text is the secret as it is.
func LoadSecret(path string) ([]byte, error) {
	if err := config.CheckPrivateFile(path); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := parseSecret(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}

// parseSecret reads the text of a secret file.
func parseSecret(text string) ([]byte, error) {
	s := strings.TrimSpace(text)
	if rest, ok := strings.CutPrefix(s, "whsec_"); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("the whsec_ secret is not base64: %w", err)
		}
		s = string(key)
	}
	if s == "" {
		return nil, fmt.Errorf("the secret is empty")
	}
	return []byte(s), nil
}

// Route is the outbox of dests: the names of the destinations whose globs
// take e. A notify.dead event does not go to the destination it is about
// (a dead receiver would never stop hearing of itself). The destinations
// of each event type and cluster are matched once and remembered, so an
// event costs a map lookup, not a glob match per destination; the slices
// returned are shared and read-only.
func Route(dests []Destination) store.Outbox {
	if len(dests) == 0 {
		return nil
	}
	dests = slices.Clone(dests)
	var (
		mu   sync.RWMutex
		memo = map[routeKey][]string{}
	)
	return func(e *store.Event) []string {
		k := routeKey{e.Type, e.ClusterID}
		mu.RLock()
		out, ok := memo[k]
		mu.RUnlock()
		if !ok {
			for _, d := range dests {
				if wants(d, e.Type, e.ClusterID) {
					out = append(out, d.Name)
				}
			}
			mu.Lock()
			if len(memo) < maxRoutes {
				memo[k] = out
			}
			mu.Unlock()
		}
		if e.Type == store.EventNotifyDead {
			about, _ := e.Data["destination"].(string)
			if slices.Contains(out, about) {
				out = slices.DeleteFunc(slices.Clone(out), func(n string) bool { return n == about })
			}
		}
		return out
	}
}

// routeKey is what routing depends on (besides a notify.dead event's
// destination).
type routeKey struct{ typ, cluster string }

// maxRoutes bounds the remembered routes (clusters may come from agents).
const maxRoutes = 4096

func wants(d Destination, typ, cluster string) bool {
	if len(d.Events) > 0 && !slices.ContainsFunc(d.Events, func(g string) bool { return glob.Match(g, typ) }) {
		return false
	}
	if len(d.Clusters) > 0 && cluster != "" &&
		!slices.ContainsFunc(d.Clusters, func(g string) bool { return glob.Match(g, cluster) }) {
		return false
	}
	return true
}

// Names are the names of dests, in order.
func Names(dests []Destination) []string {
	out := make([]string, len(dests))
	for i, d := range dests {
		out[i] = d.Name
	}
	return out
}
