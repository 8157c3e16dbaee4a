package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// Core calls the core's API with a bearer token.
type Core struct {
	bases []string
	cur   atomic.Int32 // the index in bases of the core that last answered
	token string
	http  *http.Client
}

// NewCore returns a client for the core at addr ("host:port" or a URL),
// authenticating with token. addr may list several replicas separated by
// commas: a call goes to the one that answered last, and moves on to the
// next when it cannot connect (nothing was sent, so any call may move). A
// nil hc uses a client without a timeout; callers pass contexts (an event
// stream has no end).
func NewCore(addr, token string, hc *http.Client) *Core {
	if hc == nil {
		hc = &http.Client{}
	}
	c := &Core{token: token, http: hc}
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.bases = append(c.bases, BaseURL(a))
		}
	}
	if len(c.bases) == 0 {
		c.bases = []string{BaseURL(addr)}
	}
	return c
}

// Addr returns the base URL the client talks to: the replica that answered
// last.
func (c *Core) Addr() string { return c.bases[c.cur.Load()] }

// Addrs returns every base URL the client may talk to, in order.
func (c *Core) Addrs() []string { return slices.Clone(c.bases) }

// ErrNoCore is a call that could not connect to any of the addresses.
var ErrNoCore = errors.New("no core reachable")

// DialFailed reports an error of connecting (refused, no route, unknown
// host, dial timeout): the request was never sent.
func DialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// each runs fn on the base URLs from the current one on, until fn's error
// is not a failure to connect.
func (c *Core) each(fn func(base string) error) error {
	n := len(c.bases)
	start := int(c.cur.Load())
	var errs []error
	for i := range n {
		k := (start + i) % n
		err := fn(c.bases[k])
		if !DialFailed(err) {
			c.cur.Store(int32(k))
			return err
		}
		errs = append(errs, err)
	}
	if n == 1 {
		return errs[0]
	}
	last := errs[len(errs)-1]
	return fmt.Errorf("%w at %s (the last said: %w)", ErrNoCore, strings.Join(c.bases, ", "), last)
}

func (c *Core) call(ctx context.Context, method, path string, in, out any) (int, error) {
	var status int
	err := c.each(func(base string) error {
		var err error
		status, err = doWith(ctx, c.http, method, base+path, c.token, in, out)
		return err
	})
	return status, err
}

// Health calls GET /health.
func (c *Core) Health(ctx context.Context) error {
	_, err := c.call(ctx, http.MethodGet, "/health", nil, nil)
	return err
}

// Clusters calls GET /api/v1/clusters.
func (c *Core) Clusters(ctx context.Context) ([]wire.Cluster, error) {
	var out wire.ClusterList
	_, err := c.call(ctx, http.MethodGet, "/api/v1/clusters", nil, &out)
	return out.Clusters, err
}

// Cluster calls GET /api/v1/clusters/{id}: the cluster with its nodes.
func (c *Core) Cluster(ctx context.Context, id string) (*wire.Cluster, error) {
	var out wire.Cluster
	_, err := c.call(ctx, http.MethodGet, "/api/v1/clusters/"+url.PathEscape(id), nil, &out)
	return &out, err
}

// Replicas calls GET /api/v1/core/replicas: the core replicas and their
// leases.
func (c *Core) Replicas(ctx context.Context) (*wire.CoreReplicas, error) {
	var out wire.CoreReplicas
	_, err := c.call(ctx, http.MethodGet, "/api/v1/core/replicas", nil, &out)
	return &out, err
}

// Version calls GET /api/v1/version: the build of the core that answered.
func (c *Core) Version(ctx context.Context) (string, error) {
	var out wire.Version
	_, err := c.call(ctx, http.MethodGet, "/api/v1/version", nil, &out)
	return out.Version, err
}

// Orchestrate calls POST /api/v1/clusters/{id}/orchestrate: a pass soon.
func (c *Core) Orchestrate(ctx context.Context, id string) error {
	_, err := c.call(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(id)+"/orchestrate", nil, nil)
	return err
}

// Nodes calls GET /api/v1/nodes, for one cluster or ("") all of them, and
// only the nodes that carry every label k=v of selector (each one "k=v").
func (c *Core) Nodes(ctx context.Context, cluster string, selector ...string) ([]wire.Node, error) {
	q := url.Values{}
	if cluster != "" {
		q.Set("cluster", cluster)
	}
	for _, s := range selector {
		q.Add("label", s)
	}
	var out wire.NodeList
	_, err := c.call(ctx, http.MethodGet, "/api/v1/nodes"+query(q), nil, &out)
	return out.Nodes, err
}

// DrainNode calls POST /api/v1/clusters/{c}/nodes/{n}/drain, saying why
// (reason, "" for none).
func (c *Core) DrainNode(ctx context.Context, cluster, node, reason string) (*wire.Node, error) {
	var in any
	if reason != "" {
		in = wire.ReasonRequest{Reason: reason}
	}
	var out wire.Node
	_, err := c.call(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(cluster)+"/nodes/"+url.PathEscape(node)+"/drain", in, &out)
	return &out, err
}

// UndrainNode calls POST /api/v1/clusters/{c}/nodes/{n}/undrain.
func (c *Core) UndrainNode(ctx context.Context, cluster, node string) (*wire.Node, error) {
	var out wire.Node
	_, err := c.call(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(cluster)+"/nodes/"+url.PathEscape(node)+"/undrain", nil, &out)
	return &out, err
}

// ForgetNode calls POST /api/v1/clusters/{c}/nodes/{n}/forget.
func (c *Core) ForgetNode(ctx context.Context, cluster, node string) (*wire.ForgetResult, error) {
	var out wire.ForgetResult
	_, err := c.call(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(cluster)+"/nodes/"+url.PathEscape(node)+"/forget", nil, &out)
	return &out, err
}

// ActionFilter selects, orders and pages GET /api/v1/actions. Zero fields
// do not filter.
type ActionFilter struct {
	Cluster string
	Node    string
	// Run lists the child actions of one run.
	Run    string
	States []action.State
	Kinds  []string
	// Sort is like "created_ts:desc,id:asc".
	Sort   string
	Limit  int
	Marker string
}

func (f ActionFilter) values() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("cluster", f.Cluster)
	set("node", f.Node)
	set("run", f.Run)
	states := make([]string, len(f.States))
	for i, s := range f.States {
		states[i] = string(s)
	}
	set("state", strings.Join(states, ","))
	set("kind", strings.Join(f.Kinds, ","))
	set("sort", f.Sort)
	set("marker", f.Marker)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// Actions calls GET /api/v1/actions: one page.
func (c *Core) Actions(ctx context.Context, f ActionFilter) (*wire.ActionList, error) {
	var out wire.ActionList
	_, err := c.call(ctx, http.MethodGet, "/api/v1/actions"+query(f.values()), nil, capped{&out, pageLimit(f.Limit, maxCorePage)})
	return &out, err
}

// CreateAction calls POST /api/v1/actions.
func (c *Core) CreateAction(ctx context.Context, req *wire.CreateActionRequest) (*action.Action, error) {
	var out action.Action
	_, err := c.call(ctx, http.MethodPost, "/api/v1/actions", req, &out)
	return &out, err
}

// CreateActions calls POST /api/v1/actions with req.Target set: one action
// per node the target picks, all or none.
func (c *Core) CreateActions(ctx context.Context, req *wire.CreateActionRequest) (*wire.CreatedActions, error) {
	var out wire.CreatedActions
	_, err := c.call(ctx, http.MethodPost, "/api/v1/actions", req, &out)
	return &out, err
}

// Action calls GET /api/v1/actions/{id}: ref is an id or a unique prefix of
// at least 8 characters. The answer carries the history.
func (c *Core) Action(ctx context.Context, ref string) (*action.Action, error) {
	var out action.Action
	_, err := c.call(ctx, http.MethodGet, "/api/v1/actions/"+url.PathEscape(ref), nil, capped{&out, OneRecordLimit})
	return &out, err
}

func (c *Core) actionCall(ctx context.Context, ref, verb string) (*action.Action, int, error) {
	return c.actionCallWhy(ctx, ref, verb, "")
}

// actionCallWhy is actionCall with the person's reason ("" sends no body).
func (c *Core) actionCallWhy(ctx context.Context, ref, verb, reason string) (*action.Action, int, error) {
	var out action.Action
	var in any
	if reason != "" {
		in = wire.ReasonRequest{Reason: reason}
	}
	status, err := c.call(ctx, http.MethodPost, "/api/v1/actions/"+url.PathEscape(ref)+"/"+verb, in, capped{&out, OneRecordLimit})
	return &out, status, err
}

// Approve calls POST /api/v1/actions/{id}/approve.
func (c *Core) Approve(ctx context.Context, ref string) (*action.Action, error) {
	a, _, err := c.actionCall(ctx, ref, "approve")
	return a, err
}

// Decide calls POST /api/v1/actions/{id}/approve, /reject or /urgent (verb) with the
// person's reason, which the core keeps in the history and the event.
func (c *Core) Decide(ctx context.Context, ref, verb, reason string) (*action.Action, error) {
	if verb != "approve" && verb != "reject" && verb != "urgent" {
		return nil, fmt.Errorf("decide: verb %q: want approve, reject or urgent", verb)
	}
	v, err := c.DecideView(ctx, ref, verb, reason)
	if err != nil {
		return nil, err
	}
	return &v.Action, nil
}

// DecideView is Decide answering the action with where its approval
// stands (an approval of one level of several leaves it waiting).
func (c *Core) DecideView(ctx context.Context, ref, verb, reason string) (*wire.ActionView, error) {
	if verb != "approve" && verb != "reject" && verb != "urgent" {
		return nil, fmt.Errorf("decide: verb %q: want approve, reject or urgent", verb)
	}
	var out wire.ActionView
	var in any
	if reason != "" {
		in = wire.ReasonRequest{Reason: reason}
	}
	_, err := c.call(ctx, http.MethodPost, "/api/v1/actions/"+url.PathEscape(ref)+"/"+verb, in, capped{&out, OneRecordLimit})
	return &out, err
}

// ActionView is Action with where its approval stands.
func (c *Core) ActionView(ctx context.Context, ref string) (*wire.ActionView, error) {
	var out wire.ActionView
	_, err := c.call(ctx, http.MethodGet, "/api/v1/actions/"+url.PathEscape(ref), nil, capped{&out, OneRecordLimit})
	return &out, err
}

// Reject calls POST /api/v1/actions/{id}/reject.
func (c *Core) Reject(ctx context.Context, ref string) (*action.Action, error) {
	a, _, err := c.actionCall(ctx, ref, "reject")
	return a, err
}

// Cancel calls POST /api/v1/actions/{id}/cancel. requested is true when the
// agent holds the action and the cancel was only requested (202); false
// when the action was cancelled at once.
func (c *Core) Cancel(ctx context.Context, ref string) (a *action.Action, requested bool, err error) {
	return c.CancelBecause(ctx, ref, "")
}

// CancelBecause is Cancel with the person's reason, kept in the action's
// history and the event ("" gives none).
func (c *Core) CancelBecause(ctx context.Context, ref, reason string) (a *action.Action, requested bool, err error) {
	a, status, err := c.actionCallWhy(ctx, ref, "cancel", reason)
	return a, status == http.StatusAccepted, err
}

// Retry calls POST /api/v1/actions/{id}/retry and returns the new action.
func (c *Core) Retry(ctx context.Context, ref string) (*action.Action, error) {
	return c.RetryBecause(ctx, ref, "")
}

// RetryBecause is Retry with the person's reason, kept in the new action's
// first history line and its event ("" gives none).
func (c *Core) RetryBecause(ctx context.Context, ref, reason string) (*action.Action, error) {
	a, _, err := c.actionCallWhy(ctx, ref, "retry", reason)
	return a, err
}

// EventFilter narrows the event log and its stream. Zero fields do not filter.
type EventFilter struct {
	ActionID string
	RunID    string
	Cluster  string
	Node     string
	// Types are event types or families ("node.*"); the core refuses an
	// unknown one with a 400.
	Types []string
}

func (f EventFilter) values() url.Values {
	q := url.Values{}
	if f.ActionID != "" {
		q.Set("action_id", f.ActionID)
	}
	if f.RunID != "" {
		q.Set("run_id", f.RunID)
	}
	if f.Cluster != "" {
		q.Set("cluster", f.Cluster)
	}
	if f.Node != "" {
		q.Set("node", f.Node)
	}
	if len(f.Types) > 0 {
		q.Set("type", strings.Join(f.Types, ","))
	}
	return q
}

// Events calls GET /api/v1/events: up to limit events after since, oldest
// first. A negative since asks for the newest limit events instead.
func (c *Core) Events(ctx context.Context, since int64, limit int, f EventFilter) (*wire.EventList, error) {
	q := f.values()
	switch {
	case since >= 0:
		q.Set("since", strconv.FormatInt(since, 10))
		if limit > 0 {
			q.Set("limit", strconv.Itoa(limit))
		}
	case limit > 0:
		q.Set("tail", strconv.Itoa(limit))
	}
	var out wire.EventList
	_, err := c.call(ctx, http.MethodGet, "/api/v1/events"+query(q), nil, &out)
	return &out, err
}

// CreateToken calls POST /api/v1/tokens. The answer carries the secret, the
// only time it is ever shown.
func (c *Core) CreateToken(ctx context.Context, name string, roles []string) (*wire.TokenSecret, error) {
	var out wire.TokenSecret
	_, err := c.call(ctx, http.MethodPost, "/api/v1/tokens", wire.CreateTokenRequest{Name: name, Roles: roles}, &out)
	return &out, err
}

// CreateTokenWith calls POST /api/v1/tokens with every field of req (a
// join token's TTL, cluster and uses).
func (c *Core) CreateTokenWith(ctx context.Context, req wire.CreateTokenRequest) (*wire.TokenSecret, error) {
	var out wire.TokenSecret
	_, err := c.call(ctx, http.MethodPost, "/api/v1/tokens", req, &out)
	return &out, err
}

// EnrollCA calls GET /api/v1/enroll/ca: the agent CA bundle, public.
func (c *Core) EnrollCA(ctx context.Context) (*wire.EnrollCA, error) {
	var out wire.EnrollCA
	_, err := c.call(ctx, http.MethodGet, "/api/v1/enroll/ca", nil, &out)
	return &out, err
}

// Enroll calls POST /api/v1/enroll with the client's token as join token.
func (c *Core) Enroll(ctx context.Context, req wire.EnrollRequest) (*wire.EnrollResponse, error) {
	var out wire.EnrollResponse
	_, err := c.call(ctx, http.MethodPost, "/api/v1/enroll", req, &out)
	return &out, err
}

// Renew calls POST /api/v1/enroll/renew; the client's HTTP client must
// present the agent's certificate (mutual TLS).
func (c *Core) Renew(ctx context.Context, req wire.RenewRequest) (*wire.EnrollResponse, error) {
	var out wire.EnrollResponse
	_, err := c.call(ctx, http.MethodPost, "/api/v1/enroll/renew", req, &out)
	return &out, err
}

// ReplaceNode calls POST /api/v1/clusters/{c}/nodes/{old}/replace: node
// with takes old's declared place and labels.
func (c *Core) ReplaceNode(ctx context.Context, cluster, old, with string) (*wire.ReplaceResult, error) {
	var out wire.ReplaceResult
	_, err := c.call(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(cluster)+"/nodes/"+url.PathEscape(old)+"/replace",
		wire.ReplaceNodeRequest{With: with}, &out)
	return &out, err
}

// ApproveOnAlert calls POST /api/v1/clusters/{c}/on-alert/approve; with
// a digest, only if it is the on_alert playbook's digest now.
func (c *Core) ApproveOnAlert(ctx context.Context, cluster, digest string) (*wire.OnAlert, error) {
	var in any
	if digest != "" {
		in = wire.ApproveRunRequest{Digest: digest}
	}
	var out wire.OnAlert
	_, err := c.call(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(cluster)+"/on-alert/approve", in, &out)
	return &out, err
}

// RevokeNode calls POST /api/v1/clusters/{c}/nodes/{n}/revoke.
func (c *Core) RevokeNode(ctx context.Context, cluster, node, reason string) (*wire.RevokeResult, error) {
	var out wire.RevokeResult
	_, err := c.call(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(cluster)+"/nodes/"+url.PathEscape(node)+"/revoke",
		wire.RevokeRequest{Reason: reason}, &out)
	return &out, err
}

// Tokens calls GET /api/v1/tokens.
func (c *Core) Tokens(ctx context.Context) ([]wire.Token, error) {
	var out wire.TokenList
	_, err := c.call(ctx, http.MethodGet, "/api/v1/tokens", nil, &out)
	return out.Tokens, err
}

// RevokeToken calls DELETE /api/v1/tokens/{name}.
func (c *Core) RevokeToken(ctx context.Context, name string) error {
	_, err := c.call(ctx, http.MethodDelete, "/api/v1/tokens/"+url.PathEscape(name), nil, nil)
	return err
}

func query(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// maxCorePage is the largest page of actions the core lists (its API's limit).
const maxCorePage = 500

// EventLimit bounds one message of the event stream.
const EventLimit = 1 << 20

// Stream opens GET /api/v1/events/stream. With since < 0 it delivers the
// events appended after it returns; otherwise those after since (sent as
// Last-Event-ID, as a reconnecting EventSource would). When Stream returns,
// the core has fixed the starting point: nothing appended later is missed.
// The stream ends when ctx ends or Close is called.
func (c *Core) Stream(ctx context.Context, since int64, f EventFilter) (*EventStream, error) {
	var req *http.Request
	var resp *http.Response
	err := c.each(func(base string) error {
		var err error
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/events/stream"+query(f.values()), nil)
		if err != nil {
			return err
		}
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+c.token)
		if since >= 0 {
			req.Header.Set("Last-Event-ID", strconv.FormatInt(since, 10))
		}
		resp, err = c.http.Do(req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("event stream: unexpected content type %q", ct)
	}
	return &EventStream{body: resp.Body, r: bufio.NewReader(resp.Body), last: since, url: req.URL.Redacted()}, nil
}

// EventStream reads Server-Sent Events from the core. It is not safe for
// concurrent use; Close may be called from another goroutine to end Next.
type EventStream struct {
	body io.ReadCloser
	r    *bufio.Reader
	last int64
	url  string
}

// ErrStreamClosed is returned by Next once the stream has ended.
var ErrStreamClosed = errors.New("event stream closed")

// LastID returns the sequence number of the last event read (what to pass
// as since to resume).
func (s *EventStream) LastID() int64 { return s.last }

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }

// Next blocks until the next event arrives and returns it. When the server
// ends the stream it returns an error wrapping ErrStreamClosed; a message
// over EventLimit is a *TooLargeError (the stream is then unusable).
func (s *EventStream) Next() (*wire.Event, error) {
	var data []string
	var id string
	read := 0
	for {
		line, err := s.readLine(EventLimit - read)
		if err != nil {
			return nil, err
		}
		read += len(line)
		line = strings.TrimRight(line, "\r\n")
		if line == "" { // end of one message
			if len(data) == 0 {
				id = ""
				continue
			}
			var ev wire.Event
			if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &ev); err != nil {
				return nil, fmt.Errorf("event stream: decode event %s: %w", id, err)
			}
			if n, err := strconv.ParseInt(id, 10, 64); err == nil {
				s.last = n
			} else {
				s.last = ev.Seq
			}
			return &ev, nil
		}
		if strings.HasPrefix(line, ":") { // comment (keep-alive)
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			data = append(data, value)
		case "id":
			id = value
		}
	}
}

// readLine reads one line of at most max bytes.
func (s *EventStream) readLine(max int) (string, error) {
	var b []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		b = append(b, chunk...)
		if len(b) > max {
			return "", &TooLargeError{Method: http.MethodGet, URL: s.url, Limit: EventLimit}
		}
		switch {
		case err == nil:
			return string(b), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return "", fmt.Errorf("%w: %v", ErrStreamClosed, err)
		}
	}
}

// Teams calls GET /api/v1/teams.
func (c *Core) Teams(ctx context.Context) ([]wire.Team, error) {
	var out wire.TeamList
	_, err := c.call(ctx, http.MethodGet, "/api/v1/teams", nil, &out)
	return out.Teams, err
}

// Team calls GET /api/v1/teams/{name}.
func (c *Core) Team(ctx context.Context, name string) (*wire.Team, error) {
	var out wire.Team
	_, err := c.call(ctx, http.MethodGet, "/api/v1/teams/"+url.PathEscape(name), nil, &out)
	return &out, err
}

// CreateTeam calls POST /api/v1/teams.
func (c *Core) CreateTeam(ctx context.Context, req wire.CreateTeamRequest) (*wire.Team, error) {
	var out wire.Team
	_, err := c.call(ctx, http.MethodPost, "/api/v1/teams", req, &out)
	return &out, err
}

// DeleteTeam calls DELETE /api/v1/teams/{name}.
func (c *Core) DeleteTeam(ctx context.Context, name string) error {
	_, err := c.call(ctx, http.MethodDelete, "/api/v1/teams/"+url.PathEscape(name), nil, nil)
	return err
}

// AddTeamMember calls POST /api/v1/teams/{name}/members, or with remove
// DELETE /api/v1/teams/{name}/members/{person}.
func (c *Core) AddTeamMember(ctx context.Context, team, person string, remove bool) (*wire.Team, error) {
	var out wire.Team
	var err error
	if remove {
		_, err = c.call(ctx, http.MethodDelete, "/api/v1/teams/"+url.PathEscape(team)+"/members/"+url.PathEscape(person), nil, &out)
	} else {
		_, err = c.call(ctx, http.MethodPost, "/api/v1/teams/"+url.PathEscape(team)+"/members", wire.TeamMemberRequest{Person: person}, &out)
	}
	return &out, err
}

// MapTeamGroup calls POST /api/v1/teams/{name}/groups, or with remove
// DELETE /api/v1/teams/{name}/groups/{group}.
func (c *Core) MapTeamGroup(ctx context.Context, team, group string, remove bool) (*wire.Team, error) {
	var out wire.Team
	var err error
	if remove {
		_, err = c.call(ctx, http.MethodDelete, "/api/v1/teams/"+url.PathEscape(team)+"/groups/"+url.PathEscape(group), nil, &out)
	} else {
		_, err = c.call(ctx, http.MethodPost, "/api/v1/teams/"+url.PathEscape(team)+"/groups", wire.TeamGroupRequest{Group: group}, &out)
	}
	return &out, err
}

// Grants calls GET /api/v1/grants.
func (c *Core) Grants(ctx context.Context) ([]wire.Grant, error) {
	var out wire.GrantList
	_, err := c.call(ctx, http.MethodGet, "/api/v1/grants", nil, &out)
	return out.Grants, err
}

// CreateGrant calls POST /api/v1/grants.
func (c *Core) CreateGrant(ctx context.Context, req wire.CreateGrantRequest) (*wire.Grant, error) {
	var out wire.Grant
	_, err := c.call(ctx, http.MethodPost, "/api/v1/grants", req, &out)
	return &out, err
}

// RevokeGrant calls DELETE /api/v1/grants/{id}.
func (c *Core) RevokeGrant(ctx context.Context, id string) error {
	_, err := c.call(ctx, http.MethodDelete, "/api/v1/grants/"+url.PathEscape(id), nil, nil)
	return err
}

// Freezes calls GET /api/v1/freezes: of one cluster when cluster is set,
// lifted and ended ones too with all.
func (c *Core) Freezes(ctx context.Context, cluster string, all bool) ([]wire.Freeze, error) {
	q := url.Values{}
	if cluster != "" {
		q.Set("cluster", cluster)
	}
	if all {
		q.Set("all", "true")
	}
	path := "/api/v1/freezes"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out wire.FreezeList
	_, err := c.call(ctx, http.MethodGet, path, nil, &out)
	return out.Freezes, err
}

// CreateFreeze calls POST /api/v1/clusters/{cluster}/freezes.
func (c *Core) CreateFreeze(ctx context.Context, cluster string, req wire.CreateFreezeRequest) (*wire.Freeze, error) {
	var out wire.Freeze
	_, err := c.call(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(cluster)+"/freezes", req, &out)
	return &out, err
}

// LiftFreeze calls POST /api/v1/freezes/{id}/lift.
func (c *Core) LiftFreeze(ctx context.Context, id, reason string) (*wire.Freeze, error) {
	var out wire.Freeze
	_, err := c.call(ctx, http.MethodPost, "/api/v1/freezes/"+url.PathEscape(id)+"/lift", wire.LiftFreezeRequest{Reason: reason}, &out)
	return &out, err
}
