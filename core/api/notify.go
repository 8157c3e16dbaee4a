package api

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// Notifier is what the API needs of the notification worker (core/notify).
type Notifier = ops.Notifier

func (s *Server) destinations() []notify.Destination { return s.ops.Destinations() }

// listNotify answers GET /api/v1/notify: each destination, its backlog,
// its last success and its last failure.
func (s *Server) listNotify(c *echo.Context) error {
	ctx := c.Request().Context()
	var stats []store.DeliveryStat
	if names := notify.Names(s.destinations()); len(names) > 0 {
		if err := s.st.Read(ctx, func(r store.Reader) error {
			var err error
			stats, err = r.DeliveryStats(ctx, names...)
			return err
		}); err != nil {
			return err
		}
	}
	by := map[string]store.DeliveryStat{}
	for _, st := range stats {
		by[st.Destination] = st
	}
	out := wire.NotifyList{Destinations: []wire.NotifyDestination{}}
	for _, d := range s.destinations() {
		st := by[d.Name]
		out.Destinations = append(out.Destinations, wire.NotifyDestination{Name: d.Name, URL: notify.Redact(d.URL),
			Format: d.Format, Events: nonNil(d.Events), Clusters: nonNil(d.Clusters), Backlog: st.Backlog, Dead: st.Dead,
			OldestPending: st.OldestPending, LastSuccess: st.LastSuccess, LastFailure: st.LastFailure, LastError: st.LastError})
	}
	return c.JSON(http.StatusOK, out)
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// testNotify answers POST /api/v1/notify/{name}/test: a signed test
// delivery sent now, outside the outbox, and how it fared.
func (s *Server) testNotify(c *echo.Context) error {
	if err := optionalBody(c, nil); err != nil {
		return err
	}
	name := c.Param("name")
	res, err := s.ops.TestNotify(c.Request().Context(), who(c), name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.NotifyTestResult{Destination: name, OK: res.OK(), Status: res.Status,
		Error: res.Err, TookMS: res.Took.Milliseconds()})
}

// maxDeliveryPage caps a page of deliveries.
const maxDeliveryPage = 500

// listDeliveries answers GET /api/v1/notify/{name}/deliveries?state=&before=&limit=.
func (s *Server) listDeliveries(c *echo.Context) error {
	ctx := c.Request().Context()
	name := c.Param("name")
	if _, err := s.ops.Destination(name); err != nil {
		return err
	}
	q, err := decodeDeliveryQuery(name, c.QueryParams())
	if err != nil {
		return err
	}
	var ds []store.Delivery
	if err := s.st.Read(ctx, func(r store.Reader) error {
		var err error
		ds, err = r.Deliveries(ctx, q)
		return err
	}); err != nil {
		return err
	}
	out := wire.NotifyDeliveries{Deliveries: []wire.NotifyDelivery{}}
	for _, d := range ds {
		out.Deliveries = append(out.Deliveries, toWireDelivery(d))
	}
	if len(ds) == q.Limit {
		out.Next = ds[len(ds)-1].ID
	}
	return c.JSON(http.StatusOK, out)
}

// decodeDeliveryQuery reads ?state=&before=&limit= (100 by default).
func decodeDeliveryQuery(name string, v url.Values) (store.DeliveryQuery, error) {
	q := store.DeliveryQuery{Destination: name, State: v.Get("state"), Limit: 100}
	switch q.State {
	case "", store.DeliveryPending, store.DeliveryDelivered, store.DeliveryDead:
	default:
		return q, badRequest("state must be %s, %s or %s, not %q", store.DeliveryPending, store.DeliveryDelivered, store.DeliveryDead, q.State)
	}
	var err error
	if q.Limit, err = limitParam(v.Get("limit"), q.Limit, maxDeliveryPage); err != nil {
		return q, err
	}
	if s := v.Get("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return q, badRequest("before must be a delivery id, not %q", s)
		}
		q.Before = n
	}
	return q, nil
}

// decodeDeliveryID reads a delivery id of a path.
func decodeDeliveryID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, badRequest("%q is not a delivery id", s)
	}
	return id, nil
}

func toWireDelivery(d store.Delivery) wire.NotifyDelivery {
	return wire.NotifyDelivery{ID: d.ID, Destination: d.Destination, EventSeq: d.EventSeq, State: d.State,
		Attempts: d.Attempts, CreatedTS: d.CreatedTS, NextTS: d.NextTS, UpdatedTS: d.UpdatedTS,
		LastStatus: d.LastStatus, LastError: d.LastError}
}

// redeliver answers POST /api/v1/notify/deliveries/{id}/redeliver: the
// delivery is pending again, due now, with its tries counted from zero
// (it goes before the newer deliveries of its destination).
func (s *Server) redeliver(c *echo.Context) error {
	if err := optionalBody(c, nil); err != nil {
		return err
	}
	ctx := c.Request().Context()
	id, err := decodeDeliveryID(c.Param("id"))
	if err != nil {
		return err
	}
	d, err := s.ops.Redeliver(ctx, who(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toWireDelivery(*d))
}
