package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/musterhq/muster/shared/wire"
)

// NotifyDestinations calls GET /api/v1/notify.
func (c *Core) NotifyDestinations(ctx context.Context) ([]wire.NotifyDestination, error) {
	var out wire.NotifyList
	_, err := c.call(ctx, http.MethodGet, "/api/v1/notify", nil, &out)
	return out.Destinations, err
}

// NotifyTest calls POST /api/v1/notify/{name}/test.
func (c *Core) NotifyTest(ctx context.Context, name string) (*wire.NotifyTestResult, error) {
	var out wire.NotifyTestResult
	_, err := c.call(ctx, http.MethodPost, "/api/v1/notify/"+url.PathEscape(name)+"/test", nil, &out)
	return &out, err
}

// NotifyDeliveries calls GET /api/v1/notify/{name}/deliveries.
func (c *Core) NotifyDeliveries(ctx context.Context, name, state string, before int64, limit int) (*wire.NotifyDeliveries, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	if before > 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out wire.NotifyDeliveries
	_, err := c.call(ctx, http.MethodGet, "/api/v1/notify/"+url.PathEscape(name)+"/deliveries"+query(q), nil, &out)
	return &out, err
}

// Redeliver calls POST /api/v1/notify/deliveries/{id}/redeliver.
func (c *Core) Redeliver(ctx context.Context, id int64) (*wire.NotifyDelivery, error) {
	var out wire.NotifyDelivery
	_, err := c.call(ctx, http.MethodPost, "/api/v1/notify/deliveries/"+strconv.FormatInt(id, 10)+"/redeliver", nil, &out)
	return &out, err
}
