package api

import (
	"strconv"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/agent/exposition"
	"github.com/musterhq/muster/shared/apiserver"
)

// apiMetrics are the API's own: requests by method, route and status.
type apiMetrics struct {
	requests *exposition.Family
}

// newMetrics registers the API's metrics on reg (nil: they count, unseen).
func newMetrics(reg *exposition.Registry) *apiMetrics {
	return &apiMetrics{requests: reg.Family("muster_agent_api_requests_total", exposition.Counter,
		"API requests by method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or other), route template (or unmatched) and status code.")}
}

// middleware counts every request, with labels from closed sets only: a raw
// method or path would let any client add a series per request.
func (m *apiMetrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		err := next(c)
		_, status := echo.ResolveResponseStatus(c.Response(), err)
		if err != nil {
			status = classify(err).status
		}
		m.requests.Counter("code", strconv.Itoa(status), "method", apiserver.MethodLabel(c.Request().Method),
			"route", apiserver.RouteLabel(c)).Inc()
		return err
	}
}
