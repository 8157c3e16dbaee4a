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

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// Agent calls one agent's API.
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
	_, err := do(ctx, a.http, http.MethodGet, a.base+"/api/v1/info", nil, &out)
	return &out, err
}

// Changes calls GET /api/v1/actions. since < 0 lists everything. ack tells the
// agent that everything up to since is durably stored by the caller.
func (a *Agent) Changes(ctx context.Context, since int64, limit int, ack bool) (*wire.ChangesPage, error) {
	q := url.Values{}
	if since >= 0 {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if ack && since >= 0 {
		q.Set("ack", "1")
	}
	var out wire.ChangesPage
	_, err := do(ctx, a.http, http.MethodGet, a.base+"/api/v1/actions?"+q.Encode(), nil, &out)
	return &out, err
}

// Push calls POST /api/v1/actions. It returns the agent's record and the
// status of the answer for 201 (queued), 200 (the same id and content were
// there) and 409 (the agent holds the id with other content: its record, from
// the error body, wins). Otherwise the error matches ErrGone (410),
// ErrRefused (422, with the agent's message), another sentinel of its
// status, or none when no answer came (Answered is false).
func (a *Agent) Push(ctx context.Context, req *wire.PushRequest) (*action.Action, int, error) {
	var out action.Action
	status, err := do(ctx, a.http, http.MethodPost, a.base+"/api/v1/actions", req, &out)
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
	_, err := do(ctx, a.http, http.MethodGet, a.base+"/api/v1/actions/"+url.PathEscape(id), nil, &out)
	return &out, err
}

// Cancel calls POST /api/v1/actions/{id}/cancel. A 409 (the action has
// finished) matches ErrFinal as well as ErrConflict; a 404 ErrNotFound.
func (a *Agent) Cancel(ctx context.Context, id string) (*action.Action, error) {
	var out action.Action
	_, err := do(ctx, a.http, http.MethodPost, a.base+"/api/v1/actions/"+url.PathEscape(id)+"/cancel", nil, &out)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		ae.final = true
	}
	return &out, err
}

// Health calls GET /api/v1/health.
func (a *Agent) Health(ctx context.Context) error {
	_, err := do(ctx, a.http, http.MethodGet, a.base+"/api/v1/health", nil, nil)
	return err
}

// do sends one JSON request and decodes a 2xx answer into out.
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
	if in != nil {
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
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s %s answer: %w", method, u, err)
		}
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode, nil
}
