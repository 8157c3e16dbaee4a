package api

import (
	"context"
	"net/http"
	"slices"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/shared/wire"
)

// ReplicaLister reports the core replicas sharing the store, with their
// leases (docs/architecture.md, "Several core replicas").
type ReplicaLister interface {
	Replicas(ctx context.Context) (*wire.CoreReplicas, error)
}

// listReplicas answers GET /api/v1/core/replicas.
func (s *Server) listReplicas(c *echo.Context) error {
	if s.cfg.Replicas == nil {
		return c.JSON(http.StatusOK, wire.CoreReplicas{Replicas: []wire.CoreReplica{}})
	}
	out, err := s.cfg.Replicas.Replicas(c.Request().Context())
	if err != nil {
		return err
	}
	// The leases name clusters: only those the caller may read.
	v, err := s.ops.Visibility(c.Request().Context(), who(c))
	if err != nil {
		return err
	}
	for i := range out.Replicas {
		out.Replicas[i].Leases = slices.DeleteFunc(out.Replicas[i].Leases, func(l wire.ClusterLease) bool { return !v.Has(l.ClusterID) })
	}
	return c.JSON(http.StatusOK, out)
}
