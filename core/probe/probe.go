// Package probe makes the core's own requests of a run's procedure
// (docs/runs-and-playbooks.md, "Gates" and "Core-side steps"): it
// evaluates gates (an HTTP answer, a Prometheus query) and sends calls,
// each within its timeout, never to a loopback or link-local address
// unless allowed (the rule of notification destinations: core/notify's
// client and shared/gossip's check), and resolves the core's secrets
// ({{ secret "name" }}) in a call's headers and body only as it sends it.
package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/secret"
	"github.com/musterhq/muster/shared/wire"
)

// Config is core.yaml's core_steps.
type Config struct {
	// AllowLoopback lets gates and calls reach loopback and link-local
	// addresses (`muster dev` sets it).
	AllowLoopback bool `mapstructure:"allow_loopback" yaml:"allow_loopback"`
	// Secrets are the core's secrets by name: {{ secret "name" }} in a
	// call's headers or body.
	Secrets map[string]Secret `mapstructure:"secrets" yaml:"secrets"`
}

// Secret is one of the core's secrets: the file holding its value (the
// core's user's, mode 0600, as an agent's: shared/secret) and the hosts a
// call may send it to. Whoever may create a run may write a call, and its
// URL may come from templates: the hosts, not the run, say where a secret
// may go.
type Secret struct {
	File  string   `mapstructure:"file" yaml:"file"`
	Hosts []string `mapstructure:"hosts" yaml:"hosts"`
}

// Validate checks the secrets' names, files and hosts (key is the
// section's).
func (c Config) Validate(key string) config.Errors {
	var errs config.Errors
	for name, s := range c.Secrets {
		field := key + ".secrets." + name
		if err := secret.CheckName(name); err != nil {
			errs.Add(field, "the name: %v", err)
			continue
		}
		switch {
		case s.File == "":
			errs.Add(field+".file", "the file holding the secret is required")
		case !filepath.IsAbs(s.File):
			errs.Add(field+".file", "%q is not an absolute path", s.File)
		default:
			if _, err := secret.ReadFile(name, s.File); err != nil {
				errs.Add(field+".file", "%v", err)
			}
		}
		if len(s.Hosts) == 0 {
			errs.Add(field+".hosts", "the hosts a call may send it to are required (host names, such as lb.example.com)")
		}
		for _, h := range s.Hosts {
			if h == "" || strings.ContainsAny(h, "/:@ ") || h != strings.ToLower(h) {
				errs.Add(field+".hosts", "%q is not a host name in lower case (no scheme, port or path)", h)
			}
		}
	}
	return errs
}

// Bounds of what the core reads of an answer.
const (
	maxBody      = 64 << 10 // an HTTP gate's body, a call's answer
	maxQueryBody = 1 << 20  // a Prometheus answer
	maxShown     = 200      // bytes of an answer kept in a reason
)

// Prober evaluates gates and sends calls (runs.Prober).
type Prober struct {
	cfg    Config
	client *http.Client
}

var _ runs.Prober = (*Prober)(nil)

// New builds the prober. Its client is notification deliveries': no proxy,
// no redirect followed, and no loopback or link-local address dialled
// unless allowed (checked at every dial, whatever the name resolved to).
func New(cfg Config) *Prober {
	return &Prober{cfg: cfg, client: notify.NewClient(runs.MaxCoreTimeoutS*time.Second, cfg.AllowLoopback)}
}

// target checks a rendered URL before it is asked.
func (p *Prober) target(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("%s is not an http(s) URL with a host", notify.Redact(raw))
	}
	if !p.cfg.AllowLoopback && gossip.InternalHost(u.Hostname()) {
		return nil, fmt.Errorf("%s is a loopback or link-local address (allowed only with core_steps.allow_loopback)",
			notify.Redact(raw))
	}
	return u, nil
}

// get asks u within timeout and returns the status and at most max bytes of
// the body.
func (p *Prober) do(ctx context.Context, req *http.Request, timeout time.Duration, max int64) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := p.client.Do(req.WithContext(ctx))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, max))
	return resp.StatusCode, body, err
}

// Gate evaluates g.
func (p *Prober) Gate(ctx context.Context, g wire.Gate, timeout time.Duration) (string, bool, string) {
	if g.HTTP != nil {
		return p.httpGate(ctx, g.HTTP, timeout)
	}
	return p.promGate(ctx, g.Prometheus, timeout)
}

func (p *Prober) httpGate(ctx context.Context, g *wire.HTTPGate, timeout time.Duration) (string, bool, string) {
	u, err := p.target(g.URL)
	if err != nil {
		return "", false, err.Error()
	}
	req, _ := http.NewRequest(http.MethodGet, u.String(), nil)
	status, body, err := p.do(ctx, req, timeout, maxBody)
	if err != nil {
		return "", false, fmt.Sprintf("GET %s: %v", notify.Redact(g.URL), errText(err))
	}
	want := g.ExpectStatus
	if want == 0 {
		want = http.StatusOK
	}
	value := strconv.Itoa(status)
	switch {
	case status != want:
		return value, false, fmt.Sprintf("answered %d, not %d", status, want)
	case g.BodyContains != "" && !strings.Contains(string(body), g.BodyContains):
		return value, false, fmt.Sprintf("answered %d without %q in its body", status, g.BodyContains)
	}
	return value, true, fmt.Sprintf("answered %d", status)
}

// promAnswer is what the Prometheus HTTP API answers an instant query.
type promAnswer struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (p *Prober) promGate(ctx context.Context, g *wire.PrometheusGate, timeout time.Duration) (string, bool, string) {
	expect, err := runs.ParseExpect(g.Expect)
	if err != nil {
		return "", false, err.Error()
	}
	u, err := p.target(g.URL)
	if err != nil {
		return "", false, err.Error()
	}
	u = u.JoinPath("api", "v1", "query")
	u.RawQuery = url.Values{"query": {g.Query}}.Encode()
	req, _ := http.NewRequest(http.MethodGet, u.String(), nil)
	status, body, err := p.do(ctx, req, timeout, maxQueryBody)
	if err != nil {
		return "", false, fmt.Sprintf("query %s: %v", notify.Redact(g.URL), errText(err))
	}
	return judgeProm(status, body, expect)
}

// judgeProm reads a Prometheus answer (status, body: what another server
// sent) and says whether every sample meets expect: the values seen
// (bounded), the verdict and its words.
func judgeProm(status int, body []byte, expect runs.Expect) (string, bool, string) {
	var a promAnswer
	if err := json.Unmarshal(body, &a); err != nil || a.Status != "success" {
		why := shownText(a.Error)
		if why == "" {
			// Not a Prometheus answer: its body is never kept, so that a
			// gate cannot read another internal service's pages.
			why = fmt.Sprintf("answered %d, not a Prometheus answer (%d bytes)", status, len(body))
		}
		return "", false, "the query failed: " + why
	}
	var samples []promSample
	switch a.Data.ResultType {
	case "vector":
		if err := json.Unmarshal(a.Data.Result, &samples); err != nil {
			return "", false, "the query's answer is not a vector"
		}
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(a.Data.Result, &v); err != nil {
			return "", false, "the query's answer is not a scalar"
		}
		samples = []promSample{{Value: v}}
	default:
		return "", false, fmt.Sprintf("the query answers a %s, not a vector or a scalar", a.Data.ResultType)
	}
	if len(samples) == 0 {
		return "", false, "the query has no samples"
	}
	var values []string
	pass, bad := true, ""
	for _, s := range samples {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		label := sampleLabel(s.Metric)
		values = append(values, label+str)
		if err != nil || !expect.Holds(v) {
			if pass {
				bad = fmt.Sprintf("%s%s is not %s %s", label, str, expect.Op, strconv.FormatFloat(expect.Value, 'g', -1, 64))
			}
			pass = false
		}
	}
	value := strings.Join(values, ", ")
	if len(value) > maxShown {
		value = value[:maxShown] + "…"
	}
	if !pass {
		return value, false, bad
	}
	return value, true, fmt.Sprintf("%s %s %s", value, expect.Op, strconv.FormatFloat(expect.Value, 'g', -1, 64))
}

// sampleLabel names a sample among several by its labels ("" alone).
func sampleLabel(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+strconv.Quote(m[k]))
	}
	if len(parts) == 0 {
		return ""
	}
	return "{" + strings.Join(parts, ",") + "} "
}

// Call sends c; it succeeds on a 2xx answer.
func (p *Prober) Call(ctx context.Context, c wire.Call, timeout time.Duration) (string, bool, string) {
	h := c.HTTP
	u, err := p.target(h.URL)
	if err != nil {
		return "", false, err.Error()
	}
	// The values of the secrets used, redacted from what is kept.
	used := &secret.Redactor{}
	read := func(name string) (string, error) { return p.secret(name, u.Hostname()) }
	resolve := func(s string) (string, error) { return secret.ResolveString(s, read, used) }
	body, err := resolve(h.Body)
	if err != nil {
		return "", false, err.Error()
	}
	method := h.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, u.String(), strings.NewReader(body))
	if err != nil {
		return "", false, err.Error()
	}
	for k, v := range h.Headers {
		rv, err := resolve(v)
		if err != nil {
			return "", false, err.Error()
		}
		req.Header.Set(k, rv)
	}
	status, answer, err := p.do(ctx, req, timeout, maxBody)
	if err != nil {
		return "", false, used.Redact(fmt.Sprintf("%s %s: %v", method, notify.Redact(h.URL), errText(err)))
	}
	value := strconv.Itoa(status)
	if status < 200 || status > 299 {
		// The answer's body is never kept: a call cannot read what
		// another internal service answers, nor a secret it echoes.
		return value, false, fmt.Sprintf("answered %d (%d bytes)", status, len(answer))
	}
	return value, true, fmt.Sprintf("answered %d", status)
}

// secret reads the value of secret name from its file (core_steps.secrets)
// for a call to host, which must be one of the secret's hosts.
func (p *Prober) secret(name, host string) (string, error) {
	s, ok := p.cfg.Secrets[name]
	if !ok {
		return "", fmt.Errorf("secret %q is not one of the core's (core_steps.secrets)", name)
	}
	if !slices.Contains(s.Hosts, strings.ToLower(host)) {
		return "", fmt.Errorf("secret %q may not be sent to %s: not one of its hosts (core_steps.secrets.%s.hosts)", name, host, name)
	}
	return secret.ReadFile(name, s.File)
}

// shownText is the start of a text another server sent.
func shownText(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxShown {
		s = strings.ToValidUTF8(s[:maxShown], "") + "…"
	}
	return s
}

// errText is an error without the URL the HTTP client puts in it (its
// query may hold a secret).
func errText(err error) string {
	var ue *url.Error
	if e, ok := err.(*url.Error); ok {
		ue = e
		return ue.Err.Error()
	}
	return err.Error()
}
