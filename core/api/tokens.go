package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/schedule/recur"
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
	roles, err := auth.CheckToken(req.Name, req.Roles)
	if err != nil {
		return err
	}
	o := auth.Options{ClusterID: req.ClusterID, Uses: req.Uses}
	if req.TTL != "" {
		if o.TTL, err = time.ParseDuration(req.TTL); err != nil || o.TTL <= 0 {
			return badRequest("ttl %q is not a positive Go duration such as 24h", req.TTL)
		}
	}
	secret, tok, err := auth.CreateTokenWith(c.Request().Context(), s.st, req.Name, roles, o, caller(c).Name, clientAddr(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, wire.TokenSecret{Name: req.Name, Roles: roles, Token: secret,
		ExpiresTS: tok.ExpiresTS, ClusterID: tok.ClusterID, UsesLeft: tok.UsesLeft})
}

func (s *Server) listTokens(c *echo.Context) error {
	ctx := c.Request().Context()
	out := wire.TokenList{Tokens: []wire.Token{}}
	err := s.st.Read(ctx, func(r store.Reader) error {
		toks, err := r.Tokens(ctx)
		for _, t := range toks {
			out.Tokens = append(out.Tokens, wire.Token{Name: t.Name, Roles: t.Roles, CreatedTS: t.CreatedTS,
				ExpiresTS: t.ExpiresTS, ClusterID: t.ClusterID, UsesLeft: t.UsesLeft})
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
	ctx := c.Request().Context()
	name := c.Param("name")
	err := s.st.Update(ctx, func(tx store.Tx) error {
		if err := lastAdmin(ctx, tx, name); err != nil {
			return err
		}
		if err := auth.RevokeTokenTx(ctx, tx, name, caller(c).Name, clientAddr(c)); err != nil {
			return err
		}
		// Schedules approved by this token wait for approval again.
		_, err := recur.Unapproved(ctx, tx, name, time.Now())
		return err
	})
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func lastAdmin(ctx context.Context, r store.Reader, name string) error {
	toks, err := r.Tokens(ctx)
	if err != nil {
		return err
	}
	admins, isAdmin := 0, false
	for _, t := range toks {
		if slices.Contains(t.Roles, store.RoleAdmin) {
			admins++
			isAdmin = isAdmin || t.Name == name
		}
	}
	if isAdmin && admins == 1 {
		return fmt.Errorf("%w: %s is the last admin token; create another admin first", ErrConflict, name)
	}
	return nil
}
