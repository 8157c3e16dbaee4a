package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// maxAgentPage is the largest page an agent lists (its API's limit).
const maxAgentPage = 5000

// Agent calls one agent's API. Every answer is read up to a limit
// (InfoLimit, RecordLimit per record of a page, ...); past it the call
// fails with ErrTooLarge.
type Agent struct {
	base string
	http *http.Client
}

// NewAgent returns a client for the agent at addr ("host:port" or a URL).
// A nil hc uses a client without a timeout; callers pass contexts.
func NewAgent(addr string, hc *http.Client) *Agent {
	if hc == nil {
		hc = &http.Client{}
	}
	return &Agent{base: BaseURL(addr), http: hc}
}

// BaseURL turns "host:port" into "http://host:port" and trims a trailing slash.
func BaseURL(addr string) string {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimRight(addr, "/")
}

// Info calls GET /api/v1/info.
func (a *Agent) Info(ctx context.Context) (*wire.AgentInfo, error) {
	var out wire.AgentInfo
	if _, err := do(ctx, a.http, http.MethodGet, a.base+"/api/v1/info", nil, capped{&out, InfoLimit}); err != nil {
		return &out, err
	}
	if err := out.Check(); err != nil {
		return &wire.AgentInfo{}, fmt.Errorf("GET %s/api/v1/info: %w", a.base, err)
	}
	return &out, nil
}

// ChangeCounter calls GET /api/v1/changes: the agent's change counter
// (wire.ChangeCounter). An agent of an earlier release answers 404
// (ErrNotFound).
func (a *Agent) ChangeCounter(ctx context.Context) (*wire.ChangeCounter, error) {
	var out wire.ChangeCounter
	if _, err := do(ctx, a.http, http.MethodGet, a.base+"/api/v1/changes", nil, capped{&out, ChangeCounterLimit}); err != nil {
		return nil, err
	}
	if err := out.Check(); err != nil {
		return nil, fmt.Errorf("GET %s/api/v1/changes: %w", a.base, err)
	}
	return &out, nil
}

// Changes calls GET /api/v1/actions. since < 0 lists everything. ack first
// tells the agent, with Ack, that everything up to since is durably stored by
// the caller.
func (a *Agent) Changes(ctx context.Context, since int64, limit int, ack bool) (*wire.ChangesPage, error) {
	if ack && since >= 0 {
		if err := a.Ack(ctx, since); err != nil {
			return &wire.ChangesPage{}, err
		}
	}
	q := url.Values{}
	if since >= 0 {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out wire.ChangesPage
	_, err := do(ctx, a.http, http.MethodGet, a.base+"/api/v1/actions?"+q.Encode(), nil, capped{&out, pageLimit(limit, maxAgentPage)})
	return &out, err
}

// WaitChanges calls GET /api/v1/actions?since=…&limit=…&wait=…, a blocking
// query: when nothing changed after since, the agent holds the request until
// something does or wait ends (it cuts a longer wait to its own bound), then
// answers as Changes would, with an empty page when nothing changed. ctx must
// outlast wait. An agent of an earlier release ignores wait and answers at
// once: a caller that gets an empty page much sooner than wait must not ask
// again at once.
func (a *Agent) WaitChanges(ctx context.Context, since int64, limit int, wait time.Duration) (*wire.ChangesPage, error) {
	q := url.Values{}
	q.Set("since", strconv.FormatInt(max(since, 0), 10))
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	q.Set("wait", wait.String())
	var out wire.ChangesPage
	_, err := do(ctx, a.http, http.MethodGet, a.base+"/api/v1/actions?"+q.Encode(), nil, capped{&out, pageLimit(limit, maxAgentPage)})
	return &out, err
}

// Ack calls POST /api/v1/actions/ack: every change up to cursor is durably
// stored by the caller. An agent of the previous release has no such route
// (404 or 405): that is not an error, its finished records wait for
// retention_max instead.
func (a *Agent) Ack(ctx context.Context, cursor int64) error {
	_, err := do(ctx, a.http, http.MethodPost, a.base+"/api/v1/actions/ack", wire.AckRequest{Cursor: cursor}, capped{nil, InfoLimit})
	var ae *APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed) {
		return nil
	}
	return err
}

// Push calls POST /api/v1/actions. It returns the agent's record and the
// status of the answer for 201 (queued), 200 (the same id and content were
// there) and 409 (the agent holds the id with other content: its record, from
// the error body, wins). Otherwise the error matches ErrGone (410),
// ErrRefused (422, with the agent's message), another sentinel of its
// status, or none when no answer came (Answered is false).
func (a *Agent) Push(ctx context.Context, req *wire.PushRequest) (*action.Action, int, error) {
	var out action.Action
	status, err := do(ctx, a.http, http.MethodPost, a.base+"/api/v1/actions", req, capped{&out, OneRecordLimit})
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) && errors.Is(err, ErrConflict) && ae.Detail.Record != nil {
			return ae.Detail.Record, ae.Status, nil
		}
		return nil, status, err
	}
	return &out, status, nil
}

// Get calls GET /api/v1/actions/{id}.
func (a *Agent) Get(ctx context.Context, id string) (*action.Action, error) {
	var out action.Action
	_, err := do(ctx, a.http, http.MethodGet, a.base+"/api/v1/actions/"+url.PathEscape(id), nil, capped{&out, OneRecordLimit})
	return &out, err
}

// Cancel calls POST /api/v1/actions/{id}/cancel. A 409 (the action has
// finished) matches ErrFinal as well as ErrConflict; a 404 ErrNotFound.
func (a *Agent) Cancel(ctx context.Context, id string) (*action.Action, error) {
	var out action.Action
	_, err := do(ctx, a.http, http.MethodPost, a.base+"/api/v1/actions/"+url.PathEscape(id)+"/cancel", nil, capped{&out, OneRecordLimit})
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		ae.final = true
	}
	return &out, err
}

// Health calls GET /api/v1/health.
func (a *Agent) Health(ctx context.Context) error {
	_, err := do(ctx, a.http, http.MethodGet, a.base+"/api/v1/health", nil, capped{nil, InfoLimit})
	return err
}

// do sends one JSON request and decodes a 2xx answer into out, reading at
// most DefaultLimit bytes of it, or the limit of a capped out.
func do(ctx context.Context, hc *http.Client, method, u string, in, out any) (int, error) {
	return doWith(ctx, hc, method, u, "", in, out)
}

func doWith(ctx context.Context, hc *http.Client, method, u, token string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, err
	}
	if in != nil || method != http.MethodGet {
		// Every write declares JSON, a body-less one included: the
		// agent's API refuses any other.
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, decodeError(resp)
	}
	out, n := limit(out)
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := readJSON(resp, n, out); err != nil {
			return resp.StatusCode, err
		}
	} else if err := discard(resp, n); err != nil {
		return resp.StatusCode, err
	}
	return resp.StatusCode, nil
}
