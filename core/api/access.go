package api

import (
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/shared/wire"
)

// Teams and grants (docs/api.md, "Teams and grants"): decoded here, decided
// by the operations.

// decodeTeam decodes the body of POST /api/v1/teams strictly.
var decodeTeam = decodeBody[wire.CreateTeamRequest]

// decodeGrant decodes the body of POST /api/v1/grants strictly.
var decodeGrant = decodeBody[wire.CreateGrantRequest]

func (s *Server) createTeam(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeTeam(body)
	if err != nil {
		return err
	}
	out, err := s.ops.CreateTeam(c.Request().Context(), who(c), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out)
}

func (s *Server) listTeams(c *echo.Context) error {
	ts, err := s.ops.Teams(c.Request().Context(), who(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.TeamList{Teams: ts})
}

func (s *Server) showTeam(c *echo.Context) error {
	t, err := s.ops.Team(c.Request().Context(), who(c), c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, t)
}

func (s *Server) deleteTeam(c *echo.Context) error {
	if err := optionalBody(c, nil); err != nil {
		return err
	}
	if err := s.ops.DeleteTeam(c.Request().Context(), who(c), c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// changeTeam adds a member or maps a group (from the body), or removes one
// (from the path).
func (s *Server) changeTeam(change string) echo.HandlerFunc {
	return func(c *echo.Context) error {
		var value string
		switch change {
		case ops.AddMember, ops.MapGroup:
			body, err := readBody(c)
			if err != nil {
				return err
			}
			if change == ops.AddMember {
				var req wire.TeamMemberRequest
				if err := decodeStrict(body, &req); err != nil {
					return err
				}
				value = req.Person
			} else {
				var req wire.TeamGroupRequest
				if err := decodeStrict(body, &req); err != nil {
					return err
				}
				value = req.Group
			}
		case ops.RemoveMember:
			value = c.Param("person")
		default:
			value = c.Param("group")
		}
		t, err := s.ops.ChangeTeam(c.Request().Context(), who(c), c.Param("name"), change, value)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, t)
	}
}

func (s *Server) createGrant(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeGrant(body)
	if err != nil {
		return err
	}
	out, err := s.ops.CreateGrant(c.Request().Context(), who(c), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out)
}

func (s *Server) listGrants(c *echo.Context) error {
	gs, err := s.ops.Grants(c.Request().Context(), who(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.GrantList{Grants: gs})
}

func (s *Server) revokeGrant(c *echo.Context) error {
	if err := optionalBody(c, nil); err != nil {
		return err
	}
	if err := s.ops.RevokeGrant(c.Request().Context(), who(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
