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

// maxBearer bounds a bearer: longer is no token and no ID token.
const maxBearer = 16 << 10

// authenticate resolves the bearer of the request: an API token (mst_…),
// or, with single sign-on on, an ID token of the configured client (a
// person: their name and group claims; docs/architecture.md, "Single
// sign-on"). Missing, malformed, unknown, revoked, expired and unverified
// bearers are all 401; the secret is never logged nor echoed back.
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
		secret = strings.TrimSpace(secret)
		ctx := c.Request().Context()
		if s.cfg.SSO != nil && !strings.HasPrefix(secret, auth.SecretPrefix) {
			if len(secret) > maxBearer {
				return fmt.Errorf("%w: malformed token", auth.ErrUnauthenticated)
			}
			in, err := s.cfg.SSO.Verify(ctx, secret)
			if err != nil {
				// Why is logged (never the token); the caller learns only 401.
				s.log.Info("bearer ID token refused", "client", clientAddr(c), "err", err)
				return fmt.Errorf("%w: invalid or expired ID token", auth.ErrUnauthenticated)
			}
			who, err := s.ops.Identify(ctx, in.Name, nil, in.Groups, clientAddr(c))
			if err != nil {
				return err
			}
			c.Set(callerKey, who)
			return next(c)
		}
		var tok *store.Token
		err := s.st.Read(ctx, func(r store.Reader) error {
			var err error
			tok, err = auth.Authenticate(ctx, r, secret)
			return err
		})
		if err != nil {
			return err
		}
		who, err := s.ops.Identify(ctx, tok.Name, tok.Roles, nil, clientAddr(c))
		if err != nil {
			return err
		}
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

// who is the caller of an authenticated request (ops.Identify at
// authentication), with the peer's address.
func who(c *echo.Context) ops.Caller {
	w, _ := c.Get(callerKey).(ops.Caller)
	w.Addr = clientAddr(c)
	return w
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
		if w, ok := c.Get(callerKey).(ops.Caller); ok {
			actor = w.Name
		}
		s.log.Debug("api request", "method", c.Request().Method, "path", c.Request().URL.Path,
			"status", status, "actor", actor, "client", clientAddr(c), "duration", time.Since(start))
		return err
	}
}
