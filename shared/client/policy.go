package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/musterhq/muster/shared/wire"
)

// Policies calls GET /api/v1/policies: of one kind and one cluster when
// set, deleted ones too with all.
func (c *Core) Policies(ctx context.Context, kind, cluster string, all bool) ([]wire.PolicyRecord, error) {
	q := url.Values{}
	if kind != "" {
		q.Set("kind", kind)
	}
	if cluster != "" {
		q.Set("cluster", cluster)
	}
	if all {
		q.Set("all", "true")
	}
	path := "/api/v1/policies"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out wire.PolicyRecordList
	_, err := c.call(ctx, http.MethodGet, path, nil, &out)
	return out.Policies, err
}

func policyPath(kind, id string) string {
	return "/api/v1/policies/" + url.PathEscape(kind) + "/" + url.PathEscape(id)
}

// PutPolicy calls PUT /api/v1/policies/{kind}/{id}.
func (c *Core) PutPolicy(ctx context.Context, kind, id string, req wire.PutPolicyRequest) (*wire.PolicyRecord, error) {
	var out wire.PolicyRecord
	_, err := c.call(ctx, http.MethodPut, policyPath(kind, id), req, &out)
	return &out, err
}

// DeletePolicy calls POST /api/v1/policies/{kind}/{id}/delete.
func (c *Core) DeletePolicy(ctx context.Context, kind, id, reason string) (*wire.PolicyRecord, error) {
	var out wire.PolicyRecord
	_, err := c.call(ctx, http.MethodPost, policyPath(kind, id)+"/delete", wire.DeletePolicyRequest{Reason: reason}, &out)
	return &out, err
}

// PolicyHistory calls GET /api/v1/policies/{kind}/{id}/history.
func (c *Core) PolicyHistory(ctx context.Context, kind, id string) ([]wire.PolicyChange, error) {
	var out wire.PolicyHistory
	_, err := c.call(ctx, http.MethodGet, policyPath(kind, id)+"/history", nil, &out)
	return out.Changes, err
}

// ApplyPolicy calls POST /api/v1/policy/apply.
func (c *Core) ApplyPolicy(ctx context.Context, req wire.ApplyPolicyRequest) (*wire.PolicyPlan, error) {
	var out wire.PolicyPlan
	_, err := c.call(ctx, http.MethodPost, "/api/v1/policy/apply", req, &out)
	return &out, err
}
