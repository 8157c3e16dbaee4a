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
	q := listQuery(f.Cluster, f.States, f.Limit, f.Marker)
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

// RunNodes calls GET /api/v1/runs/{id-or-prefix}/nodes: the grid's cells
// of a page of at most limit (0: the core's default) of the run's nodes,
// after marker.
func (c *Core) RunNodes(ctx context.Context, ref, marker string, limit int) (*wire.RunNodeList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if marker != "" {
		q.Set("marker", marker)
	}
	var out wire.RunNodeList
	_, err := c.call(ctx, http.MethodGet, "/api/v1/runs/"+url.PathEscape(ref)+"/nodes"+query(q), nil, &out)
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

// CancelRun calls POST /api/v1/runs/{ref}/cancel; with rollback, the
// nodes the run started roll back and it ends ABORTED.
func (c *Core) CancelRun(ctx context.Context, ref, reason string, rollback bool) (*wire.Run, error) {
	var out wire.Run
	_, err := c.call(ctx, http.MethodPost, "/api/v1/runs/"+url.PathEscape(ref)+"/cancel",
		wire.CancelRunRequest{Reason: reason, Rollback: rollback}, &out)
	return &out, err
}

// RetryRun calls POST /api/v1/runs/{ref}/retry; from "failed"
// (wire.RetryFromFailed) re-runs each failed node from its failed step.
func (c *Core) RetryRun(ctx context.Context, ref, from string) (*wire.Run, error) {
	var in any
	if from != "" {
		in = wire.RetryRunRequest{From: from}
	}
	var out wire.Run
	_, err := c.call(ctx, http.MethodPost, "/api/v1/runs/"+url.PathEscape(ref)+"/retry", in, &out)
	return &out, err
}

// ApplyPlaybook calls POST /api/v1/playbooks with a YAML document.
func (c *Core) ApplyPlaybook(ctx context.Context, doc string) (*wire.Playbook, error) {
	var out wire.Playbook
	_, err := c.call(ctx, http.MethodPost, "/api/v1/playbooks", wire.ApplyPlaybookRequest{Document: doc}, &out)
	return &out, err
}

// Playbooks calls GET /api/v1/playbooks.
func (c *Core) Playbooks(ctx context.Context) ([]wire.PlaybookVersion, error) {
	var out wire.PlaybookList
	_, err := c.call(ctx, http.MethodGet, "/api/v1/playbooks", nil, &out)
	return out.Playbooks, err
}

// Playbook calls GET /api/v1/playbooks/{name}: one version (0: the newest).
func (c *Core) Playbook(ctx context.Context, name string, version int) (*wire.Playbook, error) {
	q := url.Values{}
	if version > 0 {
		q.Set("version", strconv.Itoa(version))
	}
	var out wire.Playbook
	_, err := c.call(ctx, http.MethodGet, "/api/v1/playbooks/"+url.PathEscape(name)+query(q), nil, &out)
	return &out, err
}

// PlanPlaybook calls POST /api/v1/playbooks/{name}/plan.
func (c *Core) PlanPlaybook(ctx context.Context, name string, req *wire.PlanRequest) (*wire.Plan, error) {
	var out wire.Plan
	_, err := c.call(ctx, http.MethodPost, "/api/v1/playbooks/"+url.PathEscape(name)+"/plan", req, &out)
	return &out, err
}

// StartPlaybook calls POST /api/v1/playbooks/{name}/runs.
func (c *Core) StartPlaybook(ctx context.Context, name string, req *wire.PlanRequest) (*wire.Run, error) {
	var out wire.Run
	_, err := c.call(ctx, http.MethodPost, "/api/v1/playbooks/"+url.PathEscape(name)+"/runs", req, &out)
	return &out, err
}

// ApproveRun calls POST /api/v1/runs/{id}/approve with the digest the
// approver was shown ("" approves whatever the run is).
func (c *Core) ApproveRun(ctx context.Context, ref, digest string) (*wire.Run, error) {
	var in any
	if digest != "" {
		in = wire.ApproveRunRequest{Digest: digest}
	}
	var out wire.Run
	_, err := c.call(ctx, http.MethodPost, "/api/v1/runs/"+url.PathEscape(ref)+"/approve", in, &out)
	return &out, err
}

// listQuery is the query of a list by cluster and states, paged by limit
// and marker (runs, schedules); unset fields are left out.
func listQuery(cluster string, states []string, limit int, marker string) url.Values {
	q := url.Values{}
	if cluster != "" {
		q.Set("cluster", cluster)
	}
	if len(states) > 0 {
		q.Set("state", strings.Join(states, ","))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if marker != "" {
		q.Set("marker", marker)
	}
	return q
}
