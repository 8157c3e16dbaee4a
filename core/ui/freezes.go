package ui

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// Freezes on the Clusters page (docs/ui.md): a Freeze button for those who
// hold auth.Freeze on the cluster, a Lift button on each freeze for those
// who hold auth.Unfreeze; both call core/ops as the API does.

// maxFreezeFor bounds the Freeze form's duration (the operations bound the
// end at a year ahead).
const maxFreezeFor = 366 * 24 * time.Hour

// freezeForm is the Freeze form: how long, and why.
type freezeForm struct {
	For    time.Duration
	Reason string
}

// decodeFreeze reads the Freeze form: "for" a duration like 2h (1 minute
// to a year), "reason" required.
func decodeFreeze(v url.Values) (freezeForm, error) {
	var f freezeForm
	raw := strings.TrimSpace(v.Get("for"))
	d, err := time.ParseDuration(raw)
	if err != nil || d < time.Minute || d > maxFreezeFor {
		return f, formError("for %q: want a duration like 2h or 30m, from 1m to a year", raw)
	}
	reason, err := plainField(v, "reason", maxReason)
	if err != nil {
		return f, err
	}
	if reason == "" {
		return f, formError("reason is required: say why the cluster is frozen")
	}
	return freezeForm{For: d, Reason: reason}, nil
}

// decodeLift reads the Lift form: "reason" required.
func decodeLift(v url.Values) (string, error) {
	reason, err := plainField(v, "reason", maxReason)
	if err == nil && reason == "" {
		err = formError("reason is required: say why the freeze may end early")
	}
	return reason, err
}

// freezeCluster freezes a cluster from now for the form's duration, then
// comes back to the Clusters page.
func (s *Server) freezeCluster(w http.ResponseWriter, r *http.Request, v *visitor) {
	cid := r.PathValue("cluster")
	if names.CheckID(cid) != nil {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such cluster.")
		return
	}
	f, err := decodeFreeze(r.PostForm)
	if err != nil {
		s.renderError(w, r, v, http.StatusBadRequest, formMessage(err))
		return
	}
	_, err = s.ops.CreateFreeze(r.Context(), v.caller(r), cid, &wire.CreateFreezeRequest{Until: time.Now().Add(f.For), Reason: f.Reason})
	if errors.Is(err, store.ErrNotFound) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such cluster.")
		return
	}
	if err != nil {
		s.refusedChange(w, r, v, "cluster", "freeze the cluster", cid, err)
		return
	}
	http.Redirect(w, r, "/ui/clusters?done=frozen#cluster-"+url.PathEscape(cid), http.StatusSeeOther)
}

// liftFreeze lifts a freeze early, then comes back to the Clusters page.
func (s *Server) liftFreeze(w http.ResponseWriter, r *http.Request, v *visitor) {
	id := r.PathValue("id")
	reason, err := decodeLift(r.PostForm)
	if err != nil {
		s.renderError(w, r, v, http.StatusBadRequest, formMessage(err))
		return
	}
	_, err = s.ops.LiftFreeze(r.Context(), v.caller(r), id, reason)
	if errors.Is(err, store.ErrNotFound) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such freeze.")
		return
	}
	if err != nil {
		s.refusedChange(w, r, v, "freeze", "lift the freeze", id, err)
		return
	}
	http.Redirect(w, r, "/ui/clusters?done=lifted", http.StatusSeeOther)
}
