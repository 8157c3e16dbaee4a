package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// NextOccurrences is how many next occurrences a schedule's answer lists.
const NextOccurrences = ops.NextOccurrences

// applySchedule creates a schedule (201), or changes the schedule of that
// name, which sends it back to approval (201); the same schedule again
// changes nothing (200). Bad input is a 400 naming the field.
func (s *Server) applySchedule(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeSchedule(body, s.ops.MinEvery())
	if err != nil {
		return err
	}
	out, err := s.ops.ApplySchedule(c.Request().Context(), who(c), req)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if out.Outcome == ops.ScheduleUnchanged {
		status = http.StatusOK
	}
	return c.JSON(status, out)
}

// decodeSchedule reads a schedule request strictly (no unknown field, one
// object) and checks what needs no store: its name, cron, time zone,
// concurrency and catch_up (a 400 naming the field).
func decodeSchedule(body []byte, minEvery time.Duration) (*wire.CreateScheduleRequest, error) {
	var req wire.CreateScheduleRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if _, _, err := schedule.Check(&req, minEvery); err != nil {
		return nil, err
	}
	return &req, nil
}

func (s *Server) listSchedules(c *echo.Context) error {
	q := store.ScheduleQuery{ClusterID: c.QueryParam("cluster"), Marker: c.QueryParam("marker"), Limit: DefaultListLimit}
	if q.ClusterID != "" {
		if err := names.CheckID(q.ClusterID); err != nil {
			return badRequest("cluster: %v", err)
		}
	}
	states, err := listParam(c, "state")
	if err != nil {
		return err
	}
	for _, st := range states {
		st = strings.ToUpper(st)
		switch st {
		case store.SchedulePendingApprove, store.ScheduleActive, store.SchedulePaused, store.ScheduleRejected:
		default:
			return badRequest("state: %q is not a schedule state", st)
		}
		q.States = append(q.States, st)
	}
	if q.Limit, err = limitParam(c.QueryParam("limit"), q.Limit, MaxRunListLimit); err != nil {
		return err
	}
	if q.Marker != "" {
		if err := names.CheckID(q.Marker); err != nil {
			return badRequest("marker: %v", err)
		}
	}
	ctx := c.Request().Context()
	out := wire.ScheduleList{Schedules: []wire.Schedule{}}
	err = s.st.Read(ctx, func(r store.Reader) error {
		v, err := s.visible(c, r)
		if err != nil {
			return err
		}
		q.ClusterIn = v.In()
		list, next, err := store.SchedulePage(ctx, r, q)
		if err != nil {
			return err
		}
		out.NextMarker = next
		for i := range list {
			v, err := s.ops.ScheduleView(ctx, r, &list[i], 1, false)
			if err != nil {
				return err
			}
			out.Schedules = append(out.Schedules, v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// scheduleName is the schedule named by the path, checked.
func scheduleName(c *echo.Context) (string, error) {
	name := c.Param("name")
	return name, ops.CheckScheduleName(name)
}

func (s *Server) showSchedule(c *echo.Context) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var out wire.Schedule
	err = s.st.Read(ctx, func(r store.Reader) error {
		sc, err := r.Schedule(ctx, name)
		if err != nil {
			return err
		}
		if err := s.hidden(c, r, "schedule "+name, sc.ClusterID); err != nil {
			return err
		}
		out, err = s.ops.ScheduleView(ctx, r, sc, NextOccurrences, true)
		return err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// scheduleAnswer answers a schedule as a change left it (200).
func scheduleAnswer(c *echo.Context, out wire.Schedule, err error) error {
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// approveSchedule approves a schedule (an approver other than whoever
// created or last changed it). With {"digest": "..."}, the approval holds
// only if it is the schedule's digest now, or it is a 409.
func (s *Server) approveSchedule(c *echo.Context) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	var req wire.ApproveScheduleRequest
	if err := optionalBody(c, &req); err != nil {
		return err
	}
	out, err := s.ops.ApproveSchedule(c.Request().Context(), who(c), name, req.Digest)
	return scheduleAnswer(c, out, err)
}

func (s *Server) rejectSchedule(c *echo.Context) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	why, err := reason(c)
	if err != nil {
		return err
	}
	out, err := s.ops.RejectSchedule(c.Request().Context(), who(c), name, why)
	return scheduleAnswer(c, out, err)
}

// operateSchedule answers a schedule change that takes no body (or {}).
func (s *Server) operateSchedule(op func(ctx context.Context, c ops.Caller, name, reason string) (wire.Schedule, error)) echo.HandlerFunc {
	return func(c *echo.Context) error {
		name, err := scheduleName(c)
		if err != nil {
			return err
		}
		why, err := reason(c)
		if err != nil {
			return err
		}
		out, err := op(c.Request().Context(), who(c), name, why)
		return scheduleAnswer(c, out, err)
	}
}

// deleteSchedule removes a schedule (204); its runs stay.
func (s *Server) deleteSchedule(c *echo.Context) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	why, err := reason(c)
	if err != nil {
		return err
	}
	if err := s.ops.DeleteSchedule(c.Request().Context(), who(c), name, why); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
