package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/musterhq/muster/shared/wire"
)

// ApplySchedule calls POST /api/v1/schedules: a new schedule, or a change
// to the one of that name (back to approval).
func (c *Core) ApplySchedule(ctx context.Context, req *wire.CreateScheduleRequest) (*wire.Schedule, error) {
	var out wire.Schedule
	_, err := c.call(ctx, http.MethodPost, "/api/v1/schedules", req, &out)
	return &out, err
}

// ScheduleFilter selects a page of schedules (GET /api/v1/schedules).
type ScheduleFilter struct {
	Cluster string
	States  []string
	Limit   int
	Marker  string
}

// SchedulePage calls GET /api/v1/schedules: one page of the schedules f
// selects, by name.
func (c *Core) SchedulePage(ctx context.Context, f ScheduleFilter) (*wire.ScheduleList, error) {
	q := listQuery(f.Cluster, f.States, f.Limit, f.Marker)
	var out wire.ScheduleList
	_, err := c.call(ctx, http.MethodGet, "/api/v1/schedules"+query(q), nil, &out)
	return &out, err
}

// Schedules calls GET /api/v1/schedules page after page: every schedule.
func (c *Core) Schedules(ctx context.Context) ([]wire.Schedule, error) {
	var all []wire.Schedule
	f := ScheduleFilter{}
	for {
		page, err := c.SchedulePage(ctx, f)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Schedules...)
		if page.NextMarker == "" || page.NextMarker == f.Marker {
			return all, nil
		}
		f.Marker = page.NextMarker
	}
}

// Schedule calls GET /api/v1/schedules/{name}.
func (c *Core) Schedule(ctx context.Context, name string) (*wire.Schedule, error) {
	var out wire.Schedule
	_, err := c.call(ctx, http.MethodGet, "/api/v1/schedules/"+url.PathEscape(name), nil, &out)
	return &out, err
}

// ScheduleVerb calls POST /api/v1/schedules/{name}/{verb}: reject (with an
// optional reason), pause or resume (each with an optional reason).
func (c *Core) ScheduleVerb(ctx context.Context, name, verb, reason string) (*wire.Schedule, error) {
	var in any
	if reason != "" {
		in = wire.ReasonRequest{Reason: reason}
	}
	var out wire.Schedule
	_, err := c.call(ctx, http.MethodPost, "/api/v1/schedules/"+url.PathEscape(name)+"/"+url.PathEscape(verb), in, &out)
	return &out, err
}

// ApproveSchedule calls POST /api/v1/schedules/{name}/approve with the
// digest the approver was shown.
func (c *Core) ApproveSchedule(ctx context.Context, name, digest string) (*wire.Schedule, error) {
	var in any
	if digest != "" {
		in = wire.ApproveScheduleRequest{Digest: digest}
	}
	var out wire.Schedule
	_, err := c.call(ctx, http.MethodPost, "/api/v1/schedules/"+url.PathEscape(name)+"/approve", in, &out)
	return &out, err
}

// DeleteSchedule calls DELETE /api/v1/schedules/{name}, with the person's
// optional reason, kept in the event.
func (c *Core) DeleteSchedule(ctx context.Context, name, reason string) error {
	var in any
	if reason != "" {
		in = wire.ReasonRequest{Reason: reason}
	}
	_, err := c.call(ctx, http.MethodDelete, "/api/v1/schedules/"+url.PathEscape(name), in, nil)
	return err
}
