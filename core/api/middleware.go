package api

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
)

const (
	tokenKey   = "muster.token"
	callerKey  = "muster.caller"
	visibleKey = "muster.visible"
)

// hidden answers store.ErrNotFound for an object (what) of a cluster the
// caller may not read: it does not exist for them.
func (s *Server) hidden(c *echo.Context, r store.Reader, what, clusterID string) error {
	v, err := s.visible(c, r)
	if err != nil {
		return err
	}
	return v.Check(what, clusterID)
}

// visible is the set of clusters the caller may read, computed once per
// request with r (ops.Visibility): every list and read keeps what it holds.
func (s *Server) visible(c *echo.Context, r store.Reader) (ops.Visible, error) {
	if v, ok := c.Get(visibleKey).(ops.Visible); ok {
		return v, nil
	}
	v, err := ops.Visibility(c.Request().Context(), r, who(c))
	if err == nil {
		c.Set(visibleKey, v)
	}
	return v, err
}

// authenticate resolves the bearer token of the request. Missing, malformed,
// unknown and revoked tokens are all 401; the secret is never logged nor
// echoed back.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		h := c.Request().Header.Get("Authorization")
		if h == "" {
			return fmt.Errorf("%w: missing bearer token (Authorization: Bearer <token>)", auth.ErrUnauthenticated)
		}
		scheme, secret, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return fmt.Errorf("%w: malformed Authorization header, want Bearer", auth.ErrUnauthenticated)
		}
		var tok *store.Token
		err := s.st.Read(c.Request().Context(), func(r store.Reader) error {
			var err error
			tok, err = auth.Authenticate(c.Request().Context(), r, strings.TrimSpace(secret))
			return err
		})
		if err != nil {
			return err
		}
		who, err := s.ops.Identify(c.Request().Context(), tok.Name, tok.Roles, nil, clientAddr(c))
		if err != nil {
			return err
		}
		c.Set(tokenKey, tok)
		c.Set(callerKey, who)
		return next(c)
	}
}

// authorize refuses (403) a token whose roles do not grant p
// (ops.Authorize, the one check of a permission).
func (s *Server) authorize(p auth.Permission) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			if err := ops.Authorize(who(c), p); err != nil {
				return err
			}
			return next(c)
		}
	}
}

// caller returns the token of an authenticated request.
func caller(c *echo.Context) *store.Token {
	t, _ := c.Get(tokenKey).(*store.Token)
	if t == nil {
		return &store.Token{}
	}
	return t
}

// clientAddr is the address of the direct peer (proxy headers are not
// trusted), recorded in events.
func clientAddr(c *echo.Context) string { return c.RealIP() }

// logRequests logs every request at debug level: method, path, status,
// caller and duration. Never headers nor bodies: they carry secrets.
func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		start := time.Now()
		err := next(c)
		if !s.log.Enabled(c.Request().Context(), slog.LevelDebug) {
			return err
		}
		_, status := echo.ResolveResponseStatus(c.Response(), err)
		if err != nil {
			status = statusOf(err)
		}
		actor := ""
		if t, _ := c.Get(tokenKey).(*store.Token); t != nil {
			actor = t.Name
		}
		s.log.Debug("api request", "method", c.Request().Method, "path", c.Request().URL.Path,
			"status", status, "actor", actor, "client", clientAddr(c), "duration", time.Since(start))
		return err
	}
}
