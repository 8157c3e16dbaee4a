package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/enroll"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/version"
	"github.com/musterhq/muster/shared/wire"
)

func (s *Server) health(c *echo.Context) error {
	return c.JSON(http.StatusOK, wire.Health{Status: "ok"})
}

// showVersion answers the build of this replica (any reader may ask: the
// version says which fixes a core has, so it is not public).
func (s *Server) showVersion(c *echo.Context) error {
	return c.JSON(http.StatusOK, wire.Version{Version: version.Version})
}

func toWireNode(n store.Node) wire.Node {
	kinds := n.Kinds
	if kinds == nil {
		kinds = []string{}
	}
	return wire.Node{
		ClusterID: n.ClusterID, ID: n.ID, Addr: n.Addr, Source: n.Source, Status: nodes.Status(&n),
		StatusReason: n.StatusReason, Drained: n.Drained, DrainedBy: n.DrainedBy, DrainReason: n.DrainReason,
		StoreID: n.StoreID, Kinds: kinds, Version: n.Version,
		LastContact: n.LastContact, UpdatedTS: n.UpdatedTS, Labels: labels.Merge(nil, n.Labels),
		ArgsSchemas: n.ArgsSchemas, ArgsSchemasRefused: ops.RefusedSchemas(n.ArgsSchemas),
		Secrets: n.Secrets, CoreLabels: n.CoreLabels, Replaces: n.Replaces,
	}
}

func toWireCluster(c store.Cluster, all []store.Node, m nodes.Membership) wire.Cluster {
	return wire.Cluster{ID: c.ID, Status: c.Status, StatusReason: c.StatusReason, UpdatedTS: c.UpdatedTS,
		NodeCounts: nodes.Counts(all, c.ID), Members: ops.MembersOf(m, c.ID, all, time.Now())}
}

func (s *Server) listClusters(c *echo.Context) error {
	ctx := c.Request().Context()
	out := wire.ClusterList{Clusters: []wire.Cluster{}}
	err := s.st.Read(ctx, func(r store.Reader) error {
		cs, err := r.Clusters(ctx)
		if err != nil {
			return err
		}
		nodes, err := r.Nodes(ctx, "")
		if err != nil {
			return err
		}
		v, err := s.visible(c, r)
		if err != nil {
			return err
		}
		for _, cl := range cs {
			if v.Has(cl.ID) {
				out.Clusters = append(out.Clusters, toWireCluster(cl, nodes, s.ops.Members().Load()))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) showCluster(c *echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("cluster")
	var out wire.Cluster
	err := s.st.Read(ctx, func(r store.Reader) error {
		if err := s.hidden(c, r, "cluster "+id, id); err != nil {
			return notFound(err, "cluster %q", id)
		}
		cl, err := r.Cluster(ctx, id)
		if err != nil {
			return notFound(err, "cluster %q", id)
		}
		nodes, err := r.Nodes(ctx, id)
		if err != nil {
			return err
		}
		out = toWireCluster(*cl, nodes, s.ops.Members().Load())
		pol := s.ops.Budget().Load()
		if _, ok := pol.Limit(id); ok {
			open, err := r.OpenActions(ctx, id, "")
			if err != nil {
				return err
			}
			u, err := ops.BudgetUsage(ctx, r, pol, id, nodes, open)
			if err != nil {
				return err
			}
			out.Budget = toWireBudget(u, open)
		}
		if cal := s.cfg.Calendars.Load().Of(id); cal != nil {
			open, err := r.OpenActions(ctx, id, "")
			if err != nil {
				return err
			}
			out.Calendar = schedule.CalendarView(cal, time.Now(), schedule.WaitingForTime(open))
		}
		reqs, err := r.ReplaceRequests(ctx, id)
		if err != nil {
			return err
		}
		if out.OnAlert, err = s.ops.OnAlertView(ctx, r, id); err != nil {
			return err
		}
		for _, q := range reqs {
			out.ReplaceRequests = append(out.ReplaceRequests, wire.ReplaceRequest{NodeID: q.NodeID, Replaces: q.Replaces,
				Token: q.Token, RequestedTS: q.RequestedTS})
		}
		out.Nodes = []wire.Node{}
		for _, n := range nodes {
			out.Nodes = append(out.Nodes, toWireNode(n))
		}
		revoked, err := enroll.RevokedNodes(ctx, r, id)
		if err != nil {
			return err
		}
		withRevocations(out.Nodes, revoked)
		return nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) listNodes(c *echo.Context) error {
	ctx := c.Request().Context()
	cluster := c.QueryParam("cluster")
	sel, err := labels.ParseSelector(c.QueryParams()["label"])
	if err != nil {
		return badRequest("label: %v (use label=key=value, repeated: all must match)", err)
	}
	out := wire.NodeList{Nodes: []wire.Node{}}
	err = s.st.Read(ctx, func(r store.Reader) error {
		v, err := s.visible(c, r)
		if err != nil {
			return err
		}
		if cluster != "" {
			if err := v.Check("cluster "+cluster, cluster); err != nil {
				return notFound(err, "cluster %q", cluster)
			}
			if _, err := r.Cluster(ctx, cluster); err != nil {
				return notFound(err, "cluster %q", cluster)
			}
		}
		nodes, err := r.Nodes(ctx, cluster)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if v.Has(n.ClusterID) && labels.Set(n.Labels).Matches(sel) {
				out.Nodes = append(out.Nodes, toWireNode(n))
			}
		}
		revoked, err := enroll.RevokedNodes(ctx, r, cluster)
		if err != nil {
			return err
		}
		withRevocations(out.Nodes, revoked)
		return nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// orchestrate asks for a full sync of one cluster now (202); it runs later.
func (s *Server) orchestrate(c *echo.Context) error {
	if err := optionalBody(c, nil); err != nil {
		return err
	}
	id := c.Param("cluster")
	if err := s.ops.SyncCluster(c.Request().Context(), who(c), id); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, wire.Accepted{Status: "accepted", Message: "full sync of " + id + " requested"})
}

// drainNode drains (drained true) or undrains a node: 200 with the node.
// A drain may say why ({"reason": "..."}); an undrain takes no body.
func (s *Server) drainNode(drained bool) echo.HandlerFunc {
	return func(c *echo.Context) error {
		var req wire.ReasonRequest
		var body any
		if drained {
			body = &req
		}
		if err := optionalBody(c, body); err != nil {
			return err
		}
		ctx := c.Request().Context()
		var n *store.Node
		var err error
		if drained {
			n, err = s.ops.DrainNode(ctx, who(c), c.Param("cluster"), c.Param("node"), req.Reason)
		} else {
			n, err = s.ops.UndrainNode(ctx, who(c), c.Param("cluster"), c.Param("node"))
		}
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toWireNode(*n))
	}
}

// forgetNode removes a node for good and ends its open actions: 200.
func (s *Server) forgetNode(c *echo.Context) error {
	if err := optionalBody(c, nil); err != nil {
		return err
	}
	out := wire.ForgetResult{ClusterID: c.Param("cluster"), NodeID: c.Param("node")}
	var err error
	out.ActionsEnded, err = s.ops.ForgetNode(c.Request().Context(), who(c), out.ClusterID, out.NodeID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// decodeReplace decodes the body of a replace strictly: one object naming
// the new node, a valid node id.
func decodeReplace(body []byte) (*wire.ReplaceNodeRequest, error) {
	var req wire.ReplaceNodeRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if req.With == "" {
		return nil, badRequest("with is required: the node that takes the place")
	}
	if err := names.CheckID(req.With); err != nil {
		return nil, badRequest("with: %v", err)
	}
	return &req, nil
}

// replaceNode makes the node of the body take the path's node's declared
// place and labels, and revokes the old node's certificates: 200.
func (s *Server) replaceNode(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeReplace(body)
	if err != nil {
		return err
	}
	cluster, old := c.Param("cluster"), c.Param("node")
	rep, serials, err := s.ops.ReplaceNode(c.Request().Context(), who(c), cluster, old, req.With)
	if err != nil {
		return err
	}
	out := wire.ReplaceResult{ClusterID: cluster, NodeID: old, With: req.With, Place: rep.Place,
		Labels: rep.New.CoreLabels, ActionsEnded: rep.Ended, Serials: serials}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	if out.Serials == nil {
		out.Serials = []string{}
	}
	return c.JSON(http.StatusOK, out)
}

// approveOnAlert approves the cluster's on_alert playbook as it is now;
// with {"digest": "..."}, only if that is its digest now (409 otherwise).
func (s *Server) approveOnAlert(c *echo.Context) error {
	var req wire.ApproveRunRequest
	if err := optionalBody(c, &req); err != nil {
		return err
	}
	out, err := s.ops.ApproveOnAlert(c.Request().Context(), who(c), c.Param("cluster"), req.Digest)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// notFound names what was not found; other errors pass unchanged.
func notFound(err error, format string, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), store.ErrNotFound)
	}
	return err
}

// toWireBudget shows a cluster's disruption budget in use, with the open
// actions it holds back.
func toWireBudget(u *budget.Usage, open []store.Record) *wire.Budget {
	out := &wire.Budget{MaxUnavailable: u.Limit.String(), Max: u.Max, Unavailable: len(u.Unavailable),
		Nodes: []wire.UnavailableNode{}}
	for _, id := range u.Nodes() {
		out.Nodes = append(out.Nodes, wire.UnavailableNode{ID: id, Reason: u.Unavailable[id]})
	}
	out.Held = budget.Held(open)
	return out
}
