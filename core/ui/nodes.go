package ui

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/enroll"
	corenodes "github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/names"
)

// nodeActionsShown bounds the action history of the Node page.
const nodeActionsShown = 50

// budgetView is a cluster's disruption budget in use, as the pages show it
// (nil: the cluster has no budget).
type budgetView struct {
	Limit       string
	Max, InUse  int
	Unavailable []unavailable
	Held        int
}

type unavailable struct{ Node, Reason string }

// budgetOf computes the budget in use of cluster c from its nodes, open
// actions and the nodes in flight in procedures the budget holds whole
// (ops.BudgetUsage), as the API's cluster view does.
func budgetOf(ctx context.Context, rd store.Reader, p budget.Policy, clusterID string, nodes []store.Node, open []store.Record) (*budgetView, error) {
	u, err := ops.BudgetUsage(ctx, rd, p, clusterID, nodes, open)
	if err != nil || u == nil {
		return nil, err
	}
	out := &budgetView{Limit: u.Limit.String(), Max: u.Max, InUse: len(u.Unavailable)}
	for _, id := range u.Nodes() {
		out.Unavailable = append(out.Unavailable, unavailable{Node: id, Reason: u.Unavailable[id]})
	}
	out.Held = budget.Held(open)
	return out, nil
}

type nodeData struct {
	Node         store.Node
	Status       string
	Revoked      bool
	RevokeReason string
	// SchemasRefused: why the core refuses the args_schema of a kind, by
	// kind (ops.RefusedSchemas).
	SchemasRefused map[string]string
	Actions        []action.Action
	More           bool
	Budget         *budgetView
	CanDrain       bool
	Self           string
}

// nodePath is the Node page of a node.
func nodePath(clusterID, nodeID string) string {
	return "/ui/clusters/" + url.PathEscape(clusterID) + "/nodes/" + url.PathEscape(nodeID)
}

func (s *Server) nodePage(w http.ResponseWriter, r *http.Request, v *visitor) {
	// The budget as it is now, loaded once for the whole page.
	budgets := s.ops.Budget().Load()
	ctx := r.Context()
	cid, nid := r.PathValue("cluster"), r.PathValue("node")
	if names.CheckID(cid) != nil || names.CheckID(nid) != nil {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such node.")
		return
	}
	d := nodeData{CanDrain: v.canOn(auth.Drain, cid), Self: nodePath(cid, nid)}
	err := s.st.Read(ctx, func(rd store.Reader) error {
		vis, err := v.visible(ctx, rd)
		if err != nil {
			return err
		}
		if err := vis.Check("node "+nid, cid); err != nil {
			return err
		}
		n, err := rd.Node(ctx, cid, nid)
		if err != nil {
			return err
		}
		d.Node, d.Status, d.SchemasRefused = *n, corenodes.Status(n), ops.RefusedSchemas(n.ArgsSchemas)
		revoked, err := enroll.RevokedNodes(ctx, rd, cid)
		if err != nil {
			return err
		}
		if rc, ok := revoked[cid+"/"+nid]; ok {
			d.Revoked, d.RevokeReason = true, rc.RevokeReason
		}
		recs, more, err := store.ActionPage(ctx, rd, store.ListQuery{ClusterID: cid, NodeID: nid,
			Sort: []store.SortKey{{Field: "created_ts", Desc: true}}, Limit: nodeActionsShown})
		if err != nil {
			return err
		}
		d.More = more != ""
		for i := range recs {
			d.Actions = append(d.Actions, recs[i].Action)
		}
		if _, ok := budgets.Limit(cid); ok {
			all, err := rd.Nodes(ctx, cid)
			if err != nil {
				return err
			}
			open, err := rd.OpenActions(ctx, cid, "")
			if err != nil {
				return err
			}
			if d.Budget, err = budgetOf(ctx, rd, budgets, cid, all, open); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such node.")
		return
	}
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	vw := newView(v, "Node "+nid, "clusters")
	switch r.URL.Query().Get("done") {
	case "drained":
		vw.Flash = "Drained node " + nid + ": it gets no new pushes."
	case "undrained":
		vw.Flash = "Undrained node " + nid + "."
	}
	live := url.Values{"cluster": {cid}, "node": {nid}}
	vw.Live = &liveRegion{URL: d.Self + "?part=live", Stream: live.Encode()}
	vw.Data = d
	s.render(w, r, http.StatusOK, "node", vw)
}

// drainForm is the drain or undrain form of the Node page.
type drainForm struct {
	Reason string
}

func decodeDrain(v url.Values) (drainForm, error) {
	reason, err := plainField(v, "reason", maxReason)
	return drainForm{Reason: reason}, err
}

// drainNode drains (drained true) or undrains a node through core/nodes, as
// the API does, then comes back to the Node page.
func (s *Server) drainNode(drained bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, v *visitor) {
		cid, nid := r.PathValue("cluster"), r.PathValue("node")
		if names.CheckID(cid) != nil || names.CheckID(nid) != nil {
			s.renderError(w, r, v, http.StatusNotFound, "There is no such node.")
			return
		}
		f, err := decodeDrain(r.PostForm)
		if err != nil {
			s.renderError(w, r, v, http.StatusBadRequest, formMessage(err))
			return
		}
		if drained {
			_, err = s.ops.DrainNode(r.Context(), v.caller(r), cid, nid, f.Reason)
		} else {
			_, err = s.ops.UndrainNode(r.Context(), v.caller(r), cid, nid)
		}
		if errors.Is(err, store.ErrNotFound) {
			s.renderError(w, r, v, http.StatusNotFound, "There is no such node.")
			return
		}
		if err != nil {
			s.refusedChange(w, r, v, "node", "change the node", nid, err)
			return
		}
		done := "drained"
		if !drained {
			done = "undrained"
		}
		http.Redirect(w, r, nodePath(cid, nid)+"?done="+done, http.StatusSeeOther)
	}
}
