package api

import (
	"strconv"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/shared/apiserver"
)

// metrics are the API's own: requests by method, route and status.
type metrics struct {
	requests *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "muster_agent_api_requests_total",
		Help: "API requests by method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or other), route template (or unmatched) and status code.",
	}, []string{"method", "route", "code"})}
	if reg != nil {
		reg.MustRegister(m.requests)
	}
	return m
}

// middleware counts every request, with labels from closed sets only: a raw
// method or path would let any client add a series per request.
func (m *metrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		err := next(c)
		_, status := echo.ResolveResponseStatus(c.Response(), err)
		if err != nil {
			status = classify(err).status
		}
		m.requests.WithLabelValues(apiserver.MethodLabel(c.Request().Method), apiserver.RouteLabel(c),
			strconv.Itoa(status)).Inc()
		return err
	}
}
