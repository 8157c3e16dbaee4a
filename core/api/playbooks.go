package api

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

func playbookVersion(p *store.Playbook) wire.PlaybookVersion {
	return wire.PlaybookVersion{Name: p.Name, Version: p.Version, Description: p.Description, Digest: p.Digest,
		CreatedBy: p.CreatedBy, CreatedTS: p.CreatedTS, Source: p.Source}
}

// applyPlaybook stores a new version of a playbook: 201, or 200 with
// changed false when the document is the newest version already.
func (s *Server) applyPlaybook(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req wire.ApplyPlaybookRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	p, changed, err := s.ops.ApplyPlaybook(c.Request().Context(), who(c), req.Document)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if changed {
		status = http.StatusCreated
	}
	return c.JSON(status, wire.Playbook{PlaybookVersion: playbookVersion(p), Document: p.Document, Changed: changed})
}

func (s *Server) listPlaybooks(c *echo.Context) error {
	ctx := c.Request().Context()
	out := wire.PlaybookList{Playbooks: []wire.PlaybookVersion{}}
	err := s.st.Read(ctx, func(r store.Reader) error {
		list, err := r.Playbooks(ctx)
		for i := range list {
			out.Playbooks = append(out.Playbooks, playbookVersion(&list[i]))
		}
		return err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) showPlaybook(c *echo.Context) error {
	name := c.Param("name")
	if !playbook.ValidName(name) {
		return badRequest("%q is not a playbook name", name)
	}
	version := 0
	if v := c.QueryParam("version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return badRequest("version must be a positive integer, not %q", v)
		}
		version = n
	}
	ctx := c.Request().Context()
	var out wire.Playbook
	err := s.st.Read(ctx, func(r store.Reader) error {
		p, err := r.Playbook(ctx, name, version)
		if err != nil {
			return err
		}
		out = wire.Playbook{PlaybookVersion: playbookVersion(p), Document: p.Document}
		vs, err := r.PlaybookVersions(ctx, name)
		for i := range vs {
			out.Versions = append(out.Versions, playbookVersion(&vs[i]))
		}
		return err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func decodePlan(c *echo.Context) (*wire.PlanRequest, error) {
	if !playbook.ValidName(c.Param("name")) {
		return nil, badRequest("%q is not a playbook name", c.Param("name"))
	}
	body, err := readBody(c)
	if err != nil {
		return nil, err
	}
	var req wire.PlanRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if req.ClusterID == "" {
		return nil, badRequest("cluster_id is required")
	}
	return &req, nil
}

// planPlaybook answers what starting the playbook would create; it writes
// nothing.
func (s *Server) planPlaybook(c *echo.Context) error {
	req, err := decodePlan(c)
	if err != nil {
		return err
	}
	out, err := s.ops.PlanPlaybook(c.Request().Context(), who(c), c.Param("name"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// startPlaybook creates a run from the playbook's plan.
func (s *Server) startPlaybook(c *echo.Context) error {
	req, err := decodePlan(c)
	if err != nil {
		return err
	}
	out, err := s.ops.StartPlaybook(c.Request().Context(), who(c), c.Param("name"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out.View())
}
