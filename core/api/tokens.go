package api

import (
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

func (s *Server) createToken(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req wire.CreateTokenRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	out, err := s.ops.CreateToken(c.Request().Context(), who(c), &req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out)
}

func (s *Server) listTokens(c *echo.Context) error {
	ctx := c.Request().Context()
	out := wire.TokenList{Tokens: []wire.Token{}}
	err := s.st.Read(ctx, func(r store.Reader) error {
		toks, err := r.Tokens(ctx)
		for _, t := range toks {
			roles := t.Roles
			if roles == nil {
				roles = []string{}
			}
			out.Tokens = append(out.Tokens, wire.Token{Name: t.Name, Roles: roles, CreatedTS: t.CreatedTS,
				ExpiresTS: t.ExpiresTS, ClusterID: t.ClusterID, UsesLeft: t.UsesLeft, Labels: t.Labels})
		}
		return err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// revokeToken deletes a token (204). The last admin token cannot be revoked:
// nobody could make tokens afterwards.
func (s *Server) revokeToken(c *echo.Context) error {
	if err := optionalBody(c, nil); err != nil {
		return err
	}
	if err := s.ops.RevokeToken(c.Request().Context(), who(c), c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
