package api

import (
	"strconv"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/shared/apiserver"
)

// metrics are the API's own: requests by route and status, open streams.
type metrics struct {
	requests *prometheus.CounterVec
	streams  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "muster_core_api_requests_total",
			Help: "API requests by method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or other), route template (or unmatched) and status code.",
		}, []string{"method", "route", "code"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "muster_core_api_event_streams",
			Help: "Open event streams.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.streams)
	}
	return m
}

func (m *metrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		err := next(c)
		_, status := echo.ResolveResponseStatus(c.Response(), err)
		if err != nil {
			status = statusOf(err)
		}
		// Labels from closed sets only: a raw method or path would let any
		// client, before login, add a series per request.
		m.requests.WithLabelValues(apiserver.MethodLabel(c.Request().Method), apiserver.RouteLabel(c),
			strconv.Itoa(status)).Inc()
		return err
	}
}
