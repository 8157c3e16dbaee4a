package api

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// oidcInfo says where to sign in (`muster login`): the OpenID provider's
// issuer, the client and the scopes. 404 when single sign-on is off.
func (s *Server) oidcInfo(c *echo.Context) error {
	if s.cfg.SSO == nil {
		return fmt.Errorf("single sign-on is not configured: %w", store.ErrNotFound)
	}
	cfg := s.cfg.SSO.Config()
	return c.JSON(http.StatusOK, wire.OIDCInfo{Issuer: cfg.Issuer, ClientID: cfg.ClientID, Scopes: cfg.Scopes,
		UsernameClaim: cfg.UsernameClaim, GroupsClaim: cfg.GroupsClaim})
}
