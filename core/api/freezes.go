package api

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/shared/wire"
)

// Freezes as records (docs/architecture.md, "Policy as data"): decode,
// call core/ops, render.

// decodeFreeze decodes the body of POST /api/v1/clusters/{id}/freezes
// strictly; the operations check its times and reason.
var decodeFreeze = decodeBody[wire.CreateFreezeRequest]

// decodeLiftFreeze decodes the body of POST /api/v1/freezes/{id}/lift
// strictly.
var decodeLiftFreeze = decodeBody[wire.LiftFreezeRequest]

func (s *Server) createFreeze(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeFreeze(body)
	if err != nil {
		return err
	}
	out, err := s.ops.CreateFreeze(c.Request().Context(), who(c), c.Param("cluster"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out)
}

func (s *Server) liftFreeze(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeLiftFreeze(body)
	if err != nil {
		return err
	}
	out, err := s.ops.LiftFreeze(c.Request().Context(), who(c), c.Param("id"), req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) listFreezes(c *echo.Context) error {
	all := false
	if v := c.QueryParam("all"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return ops.BadRequest("all %q: want true or false", v)
		}
		all = b
	}
	fs, err := s.ops.Freezes(c.Request().Context(), who(c), c.QueryParam("cluster"), all)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.FreezeList{Freezes: fs})
}
