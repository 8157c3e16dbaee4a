package api

import (
	"strconv"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
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
			Help: "API requests by method, route and status code.",
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
			status, _ = classify(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		m.requests.WithLabelValues(c.Request().Method, route, strconv.Itoa(status)).Inc()
		return err
	}
}
