package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/schedule/recur"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// NextOccurrences is how many next occurrences a schedule's answer lists.
const NextOccurrences = 5

// applySchedule creates a schedule (201), or changes the schedule of that
// name, which sends it back to approval (201); the same schedule again
// changes nothing (200). Bad input is a 400 naming the field.
func (s *Server) applySchedule(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeSchedule(body, s.cfg.Schedules.MinEvery)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var out wire.Schedule
	var outcome string
	err = s.st.Update(ctx, func(tx store.Tx) error {
		sc, o, err := s.cfg.Schedules.Apply(ctx, tx, req, s.who(c))
		if err != nil {
			return err
		}
		outcome = o
		out, err = recur.View(ctx, tx, sc, time.Now(), NextOccurrences, false)
		return err
	})
	if err != nil {
		return err
	}
	out.Outcome = outcome
	status := http.StatusCreated
	if outcome == recur.Unchanged {
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
		list, next, err := store.SchedulePage(ctx, r, q)
		if err != nil {
			return err
		}
		out.NextMarker = next
		now := time.Now()
		for i := range list {
			v, err := recur.View(ctx, r, &list[i], now, 1, false)
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
	if err := names.CheckID(name); err != nil {
		return "", badRequest("schedule name: %v", err)
	}
	return name, nil
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
		out, err = recur.View(ctx, r, sc, time.Now(), NextOccurrences, true)
		return err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// changeSchedule reads the call's body into body (nil: none allowed), makes
// one change to the schedule named by the path, and answers it as it is
// after it.
func (s *Server) changeSchedule(c *echo.Context, body any, fn func(ctx context.Context, tx store.Tx, name string) (*store.Schedule, error)) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	if err := optionalBody(c, body); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var out wire.Schedule
	err = s.st.Update(ctx, func(tx store.Tx) error {
		sc, err := fn(ctx, tx, name)
		if err != nil {
			return err
		}
		out, err = recur.View(ctx, tx, sc, time.Now(), NextOccurrences, false)
		return err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// approveSchedule approves a schedule (an approver other than whoever
// created or last changed it). With {"digest": "..."}, the approval holds
// only if it is the schedule's digest now, or it is a 409.
func (s *Server) approveSchedule(c *echo.Context) error {
	var req wire.ApproveScheduleRequest
	return s.changeSchedule(c, &req, func(ctx context.Context, tx store.Tx, name string) (*store.Schedule, error) {
		return s.cfg.Schedules.Approve(ctx, tx, name, req.Digest, s.who(c))
	})
}

func (s *Server) rejectSchedule(c *echo.Context) error {
	var req wire.ReasonRequest
	return s.changeSchedule(c, &req, func(ctx context.Context, tx store.Tx, name string) (*store.Schedule, error) {
		return s.cfg.Schedules.Reject(ctx, tx, name, req.Reason, s.who(c))
	})
}

func (s *Server) pauseSchedule(c *echo.Context) error {
	return s.changeSchedule(c, nil, func(ctx context.Context, tx store.Tx, name string) (*store.Schedule, error) {
		return s.cfg.Schedules.Pause(ctx, tx, name, s.who(c))
	})
}

func (s *Server) resumeSchedule(c *echo.Context) error {
	return s.changeSchedule(c, nil, func(ctx context.Context, tx store.Tx, name string) (*store.Schedule, error) {
		return s.cfg.Schedules.Resume(ctx, tx, name, s.who(c))
	})
}

// deleteSchedule removes a schedule (204); its runs stay.
func (s *Server) deleteSchedule(c *echo.Context) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	if err := optionalBody(c, nil); err != nil {
		return err
	}
	ctx := c.Request().Context()
	err = s.st.Update(ctx, func(tx store.Tx) error {
		_, err := s.cfg.Schedules.Delete(ctx, tx, name, s.who(c))
		return err
	})
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// scheduleError maps a schedule's bad field to a 400 naming it.
func scheduleError(err error) (int, string, bool) {
	if errors.Is(err, schedule.ErrInvalid) {
		return http.StatusBadRequest, wire.CodeBadRequest, true
	}
	return 0, "", false
}

// errorField is the field a bad request names ("" when none).
func errorField(err error) string {
	var fe *schedule.FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}
