// Package apiserver holds what the agent's and the core's HTTP APIs share
// about serving: metric labels from a closed set, the JSON content type
// required on writes, and the limits of every server (timeouts, header size,
// open connections). See docs/security.md, "Server limits".
package apiserver

import (
	"net/http"

	"github.com/labstack/echo/v5"
)

// Labels of requests that fall outside the closed sets.
const (
	// OtherMethod is the method label of any method not in the known set.
	OtherMethod = "other"
	// UnmatchedRoute is the route label of a request that matched no route.
	UnmatchedRoute = "unmatched"
)

// MethodLabel returns the metric label of an HTTP method: the method itself
// when it is one of GET, HEAD, POST, PUT, PATCH, DELETE and OPTIONS, else
// "other". A raw method is never a label: a client could make one per request.
func MethodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return OtherMethod
}

// RouteLabel returns the metric label of the route a request matched: its
// template ("/api/v1/actions/:id"), never the raw path, or "unmatched".
func RouteLabel(c *echo.Context) string {
	p := c.Path()
	if p == "" || c.RouteInfo().Name == echo.NotFoundRouteName {
		return UnmatchedRoute
	}
	return p
}
