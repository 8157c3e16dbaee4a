package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/musterhq/muster/shared/wire"
)

// RunFilter selects and pages GET /api/v1/runs. Zero fields do not filter.
type RunFilter struct {
	Cluster string
	States  []string
	Limit   int
	Marker  string
}

// CreateRun calls POST /api/v1/runs.
func (c *Core) CreateRun(ctx context.Context, req *wire.CreateRunRequest) (*wire.Run, error) {
	var out wire.Run
	_, err := c.call(ctx, http.MethodPost, "/api/v1/runs", req, &out)
	return &out, err
}

// Runs calls GET /api/v1/runs: one page, newest first.
func (c *Core) Runs(ctx context.Context, f RunFilter) (*wire.RunList, error) {
	q := url.Values{}
	if f.Cluster != "" {
		q.Set("cluster", f.Cluster)
	}
	if len(f.States) > 0 {
		q.Set("state", strings.Join(f.States, ","))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Marker != "" {
		q.Set("marker", f.Marker)
	}
	var out wire.RunList
	_, err := c.call(ctx, http.MethodGet, "/api/v1/runs"+query(q), nil, &out)
	return &out, err
}

// Run calls GET /api/v1/runs/{id-or-prefix}: the run with its per-node grid.
func (c *Core) Run(ctx context.Context, ref string) (*wire.Run, error) {
	var out wire.Run
	_, err := c.call(ctx, http.MethodGet, "/api/v1/runs/"+url.PathEscape(ref), nil, &out)
	return &out, err
}

// RunVerb calls POST /api/v1/runs/{id}/{verb}: approve, reject, pause,
// resume or cancel, with an optional reason (reject and cancel).
func (c *Core) RunVerb(ctx context.Context, ref, verb, reason string) (*wire.Run, error) {
	var in any
	if reason != "" {
		in = wire.ReasonRequest{Reason: reason}
	}
	var out wire.Run
	_, err := c.call(ctx, http.MethodPost, "/api/v1/runs/"+url.PathEscape(ref)+"/"+url.PathEscape(verb), in, &out)
	return &out, err
}
