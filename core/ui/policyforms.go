package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// Windows, budgets and the on_alert approval on the Clusters page
// (docs/web-ui.md, docs/policy-as-data.md): the forms `muster window
// create|delete`, `muster budget set` and `muster cluster approve-on-alert`
// have, each calling the operations the API calls (ops.PutPolicy,
// ops.DeletePolicy, ops.ApproveOnAlert), which check the permission on the
// cluster, the spec and the reason: the forms only read their fields.

// Bounds of the policy forms' fields (the operations check the values).
const (
	maxCronField     = 100
	maxDurationField = 20
	maxTZField       = 64
	maxLimitField    = 20
	maxDigestField   = 128
)

// windowForm is the Add window form.
type windowForm struct {
	// Name is the window's id; "" names it after the cluster.
	Name                             string
	Cron, Duration, Timezone, Reason string
}

// decodeWindow reads the Add window form: "name" (optional, an id),
// "cron" and "duration" (required), "timezone" (optional), "reason".
func decodeWindow(v url.Values) (windowForm, error) {
	var f windowForm
	for _, fld := range []struct {
		name string
		max  int
		dst  *string
	}{{"name", names.MaxID, &f.Name}, {"cron", maxCronField, &f.Cron}, {"duration", maxDurationField, &f.Duration},
		{"timezone", maxTZField, &f.Timezone}, {"reason", maxReason, &f.Reason}} {
		s, err := plainField(v, fld.name, fld.max)
		if err != nil {
			return windowForm{}, err
		}
		*fld.dst = s
	}
	if f.Name != "" && names.CheckID(f.Name) != nil {
		return windowForm{}, formError("name %q: want letters, digits, '-', '_' or '.', as a cluster's id", f.Name)
	}
	if f.Cron == "" {
		return windowForm{}, formError("cron is required: when the window opens, like 0 2 * * *")
	}
	if f.Duration == "" {
		return windowForm{}, formError("duration is required: how long the window stays open, like 4h")
	}
	return f, nil
}

// budgetForm is the Set budget form.
type budgetForm struct {
	MaxUnavailable, Reason string
}

// decodeBudget reads the Set budget form: "max_unavailable" (required, a
// count or a percentage) and "reason".
func decodeBudget(v url.Values) (budgetForm, error) {
	m, err := plainField(v, "max_unavailable", maxLimitField)
	if err != nil {
		return budgetForm{}, err
	}
	if m == "" {
		return budgetForm{}, formError("max_unavailable is required: a count like 1 or a percentage like 10%%")
	}
	reason, err := plainField(v, "reason", maxReason)
	if err != nil {
		return budgetForm{}, err
	}
	return budgetForm{MaxUnavailable: m, Reason: reason}, nil
}

// decodeRemoveWindow reads the Remove form of a window: "reason".
func decodeRemoveWindow(v url.Values) (string, error) {
	return plainField(v, "reason", maxReason)
}

// decodeOnAlertApproval reads the Approve form of an on_alert playbook:
// "digest", the one the page showed (an approval signs what was seen).
func decodeOnAlertApproval(v url.Values) (string, error) {
	d, err := plainField(v, "digest", maxDigestField)
	if err == nil && d == "" {
		err = formError("digest is missing: reload the page and approve what it shows")
	}
	return d, err
}

// clusterOf reads a route's {cluster}; ok false has answered 404.
func (s *Server) clusterOf(w http.ResponseWriter, r *http.Request, v *visitor) (string, bool) {
	cid := r.PathValue("cluster")
	if names.CheckID(cid) != nil {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such cluster.")
		return "", false
	}
	return cid, true
}

// backToCluster answers a change with the Clusters page at the cluster.
func backToCluster(w http.ResponseWriter, r *http.Request, done, cid string) {
	http.Redirect(w, r, "/ui/clusters?done="+done+"#cluster-"+url.PathEscape(cid), http.StatusSeeOther)
}

// addWindow makes a window of the cluster (ops.PutPolicy, as
// `muster window create` and PUT /api/v1/policies/window/{id}).
func (s *Server) addWindow(w http.ResponseWriter, r *http.Request, v *visitor) {
	cid, ok := s.clusterOf(w, r, v)
	if !ok {
		return
	}
	f, err := decodeWindow(r.PostForm)
	if err != nil {
		s.renderError(w, r, v, http.StatusBadRequest, formMessage(err))
		return
	}
	// Add makes a window, never replaces one: a name the cluster's windows
	// have is refused (muster window create changes one on purpose). No
	// name: the operation names it.
	id := f.Name
	if id != "" {
		ws, err := s.ops.Policies(r.Context(), v.caller(r), wire.KindWindow, cid, false)
		if err != nil {
			s.refusedChange(w, r, v, "cluster", "add the window", cid, err)
			return
		}
		for _, p := range ws {
			if p.ID == id {
				s.renderError(w, r, v, http.StatusConflict, fmt.Sprintf(
					"Could not add the window: the cluster has a window named %s already; remove it first, or change it with muster window create %s --name %s", id, cid, id))
				return
			}
		}
	}
	spec, err := json.Marshal(wire.WindowSpec{Cluster: cid, Cron: f.Cron, Duration: f.Duration, Timezone: f.Timezone})
	if err != nil {
		s.refusedChange(w, r, v, "cluster", "add the window", cid, err)
		return
	}
	if _, err := s.ops.PutPolicy(r.Context(), v.caller(r), wire.KindWindow, id, &wire.PutPolicyRequest{Spec: spec, Reason: f.Reason}); err != nil {
		s.refusedChange(w, r, v, "cluster", "add the window", cid, err)
		return
	}
	backToCluster(w, r, "window-added", cid)
}

// removeWindow deletes a window (ops.DeletePolicy, as `muster window
// delete`).
func (s *Server) removeWindow(w http.ResponseWriter, r *http.Request, v *visitor) {
	id := r.PathValue("id")
	if names.CheckID(id) != nil {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such window.")
		return
	}
	reason, err := decodeRemoveWindow(r.PostForm)
	if err != nil {
		s.renderError(w, r, v, http.StatusBadRequest, formMessage(err))
		return
	}
	out, err := s.ops.DeletePolicy(r.Context(), v.caller(r), wire.KindWindow, id, reason)
	if err != nil {
		s.refusedChange(w, r, v, "window", "remove the window", id, err)
		return
	}
	backToCluster(w, r, "window-removed", out.ClusterID)
}

// setBudget sets the cluster's disruption budget (ops.PutPolicy, as
// `muster budget set`): a narrower one takes freeze, a wider one
// unfreeze, as the operations decide.
func (s *Server) setBudget(w http.ResponseWriter, r *http.Request, v *visitor) {
	cid, ok := s.clusterOf(w, r, v)
	if !ok {
		return
	}
	f, err := decodeBudget(r.PostForm)
	if err != nil {
		s.renderError(w, r, v, http.StatusBadRequest, formMessage(err))
		return
	}
	spec, err := json.Marshal(wire.BudgetSpec{Cluster: cid, MaxUnavailable: f.MaxUnavailable})
	if err != nil {
		s.refusedChange(w, r, v, "cluster", "set the budget", cid, err)
		return
	}
	if _, err := s.ops.PutPolicy(r.Context(), v.caller(r), wire.KindBudget, cid, &wire.PutPolicyRequest{Spec: spec, Reason: f.Reason}); err != nil {
		s.refusedChange(w, r, v, "cluster", "set the budget", cid, err)
		return
	}
	backToCluster(w, r, "budget-set", cid)
}

// approveOnAlert approves the cluster's on_alert playbook as the page
// showed it (ops.ApproveOnAlert, as `muster cluster approve-on-alert` and
// POST /api/v1/clusters/{cluster}/on-alert/approve).
func (s *Server) approveOnAlert(w http.ResponseWriter, r *http.Request, v *visitor) {
	cid, ok := s.clusterOf(w, r, v)
	if !ok {
		return
	}
	digest, err := decodeOnAlertApproval(r.PostForm)
	if err != nil {
		s.renderError(w, r, v, http.StatusBadRequest, formMessage(err))
		return
	}
	out, err := s.ops.ApproveOnAlert(r.Context(), v.caller(r), cid, digest)
	if errors.Is(err, store.ErrNotFound) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such cluster, or it names no on_alert playbook.")
		return
	}
	if err != nil {
		s.refusedChange(w, r, v, "cluster", "approve the on_alert playbook", cid, err)
		return
	}
	done := "on-alert-approved"
	if out == nil || !out.Approved {
		done = "on-alert-recorded"
	}
	backToCluster(w, r, done, cid)
}

// clusterFlash is what the Clusters page says after one of its forms.
func clusterFlash(done string) string {
	return map[string]string{
		"frozen":            "Frozen.",
		"lifted":            "The freeze is lifted.",
		"window-added":      "The window is stored: every replica holds work to it from the next change.",
		"window-removed":    "The window is removed.",
		"budget-set":        "The budget is set.",
		"on-alert-approved": "The on_alert playbook is approved: it starts when missing nodes make the cluster ALERT.",
		"on-alert-recorded": "Your approval is recorded; the on_alert playbook needs more before it may start.",
	}[done]
}
