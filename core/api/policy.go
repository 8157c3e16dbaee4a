package api

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/shared/wire"
)

// Policy records and declarative apply (docs/policy-as-data.md): decode,
// call core/ops, render.

// decodePutPolicy decodes the body of PUT /api/v1/policies/{kind}/{id}
// strictly; the operations check the spec and the reason.
var decodePutPolicy = decodeBody[wire.PutPolicyRequest]

// decodeDeletePolicy decodes the body of POST
// /api/v1/policies/{kind}/{id}/delete strictly.
var decodeDeletePolicy = decodeBody[wire.DeletePolicyRequest]

// decodeApplyPolicy decodes the body of POST /api/v1/policy/apply
// strictly: a whole policy document, no unknown field at any depth; the
// operations check every entry.
var decodeApplyPolicy = decodeBody[wire.ApplyPolicyRequest]

func (s *Server) putPolicy(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodePutPolicy(body)
	if err != nil {
		return err
	}
	out, err := s.ops.PutPolicy(c.Request().Context(), who(c), c.Param("kind"), c.Param("id"), req)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if out.Version == 1 || out.CreatedTS.Equal(out.UpdatedTS) {
		status = http.StatusCreated
	}
	return c.JSON(status, out)
}

func (s *Server) deletePolicy(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeDeletePolicy(body)
	if err != nil {
		return err
	}
	out, err := s.ops.DeletePolicy(c.Request().Context(), who(c), c.Param("kind"), c.Param("id"), req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) listPolicies(c *echo.Context) error {
	all := false
	if v := c.QueryParam("all"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return ops.BadRequest("all %q: want true or false", v)
		}
		all = b
	}
	ps, err := s.ops.Policies(c.Request().Context(), who(c), c.QueryParam("kind"), c.QueryParam("cluster"), all)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.PolicyRecordList{Policies: ps})
}

func (s *Server) policyHistory(c *echo.Context) error {
	hs, err := s.ops.PolicyHistory(c.Request().Context(), who(c), c.Param("kind"), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.PolicyHistory{Changes: hs})
}

func (s *Server) applyPolicy(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeApplyPolicy(body)
	if err != nil {
		return err
	}
	out, err := s.ops.ApplyPolicy(c.Request().Context(), who(c), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
