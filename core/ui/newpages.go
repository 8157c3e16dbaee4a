package ui

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/target"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/names"
)

// newSchedulePath is the New schedule page: "-" starts no schedule's name,
// so no schedule's page is hidden behind it.
const newSchedulePath = "/ui/schedules/-/new"

// kindChoice is a kind the nodes of a cluster advertise, with how many
// do and the args_schema they announce (the first node's, shown as help).
type kindChoice struct {
	Kind   string
	Nodes  int
	Schema string
}

type newActionData struct {
	Clusters []store.Cluster
	Nodes    []store.Node
	Kinds    []kindChoice
	Form     newActionForm
	Errs     fieldErrs
	// Created are the actions a create over labels made, shown with links.
	Created []action.Action
}

// newActionPage shows the New action form; ?cluster= (the only cluster
// the visitor may read, else none) fills its node and kind choices.
func (s *Server) newActionPage(w http.ResponseWriter, r *http.Request, v *visitor) {
	q := r.URL.Query()
	f := newActionForm{Args: "{}"}
	for name, dst := range map[string]*string{"cluster": &f.Cluster, "node": &f.Node, "kind": &f.Kind} {
		if val, err := plainField(q, name, maxFilter); err == nil {
			*dst = val
		}
	}
	s.showNewAction(w, r, v, http.StatusOK, f, fieldErrs{})
}

// showNewAction renders the New action form as f with errs next to the
// fields, with the clusters, nodes and kinds the visitor may choose.
func (s *Server) showNewAction(w http.ResponseWriter, r *http.Request, v *visitor, status int, f newActionForm, errs fieldErrs) {
	s.showNewActionWith(w, r, v, status, newActionData{Form: f, Errs: errs})
}

// showNewActionCreated answers a create over a target: the form again,
// with the actions it made.
func (s *Server) showNewActionCreated(w http.ResponseWriter, r *http.Request, v *visitor, f newActionForm, created []action.Action) {
	s.showNewActionWith(w, r, v, http.StatusOK, newActionData{Form: f, Errs: fieldErrs{}, Created: created})
}

func (s *Server) showNewActionWith(w http.ResponseWriter, r *http.Request, v *visitor, status int, d newActionData) {
	ctx := r.Context()
	if d.Form.RequestID == "" || d.Created != nil {
		// A new submission of the form (a re-post of one answered already
		// carries the old id, and makes nothing new).
		d.Form.RequestID = action.NewID()
	}
	errs := d.Errs
	err := s.st.Read(ctx, func(rd store.Reader) error {
		var err error
		if d.Clusters, err = creatableClusters(ctx, rd, v); err != nil {
			return err
		}
		if d.Form.Cluster == "" && len(d.Clusters) == 1 {
			d.Form.Cluster = d.Clusters[0].ID
		}
		if !slices.ContainsFunc(d.Clusters, func(c store.Cluster) bool { return c.ID == d.Form.Cluster }) {
			return nil
		}
		d.Nodes, err = rd.Nodes(ctx, d.Form.Cluster)
		return err
	})
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	d.Kinds = advertisedKinds(d.Nodes)
	if d.Nodes == nil {
		// Only the cluster's choice is shown: the errors of the other
		// fields go above it, so that none is lost.
		d.Errs = fieldErrs{}
		for _, k := range []string{"", "cluster", "node", "target", "kind", "args", "not_before", "timeout"} {
			if msg, ok := errs[k]; ok {
				if d.Errs[""] != "" {
					msg = d.Errs[""] + "; " + msg
				}
				d.Errs[""] = msg
			}
		}
	}
	vw := newView(v, "New action", "actions")
	vw.Data = d
	s.render(w, r, status, "newaction", vw)
}

// advertisedKinds are the kinds nodes advertise, by name.
func advertisedKinds(nodes []store.Node) []kindChoice {
	by := map[string]*kindChoice{}
	for _, n := range nodes {
		for _, k := range n.Kinds {
			c := by[k]
			if c == nil {
				c = &kindChoice{Kind: k}
				by[k] = c
			}
			c.Nodes++
			if raw, ok := n.ArgsSchemas[k]; ok && c.Schema == "" {
				c.Schema = prettyArgs(raw)
			}
		}
	}
	out := make([]kindChoice, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// createAction creates the action of the New action form through the
// operations, as the API's create does: the same checks (the args against
// the node's args_schema among them) and the same events. A refused form
// is shown again with the error next to its field, and nothing is made.
//
// With labels instead of a node, it makes one action per node they pick,
// all or none (ops.CreateActions), and answers the form again with how
// many were made and a link to each.
func (s *Server) createAction(w http.ResponseWriter, r *http.Request, v *visitor) {
	f, req, tgt, errs := decodeNewAction(r.PostForm, s.now())
	if len(errs) > 0 {
		s.showNewAction(w, r, v, http.StatusBadRequest, f, errs)
		return
	}
	if tgt != nil {
		s.createActions(w, r, v, f, req, *tgt)
		return
	}
	rec, err := s.ops.CreateAction(r.Context(), v.caller(r), req)
	if err != nil {
		p := ops.Describe(err)
		if p.Status >= http.StatusInternalServerError {
			s.log.Error("create action", "err", err)
		}
		msg := strings.TrimPrefix(p.Message, ops.ErrUnprocessable.Error()+": ")
		field := actionField(msg)
		if errors.Is(err, store.ErrNotFound) {
			// No such cluster or node, or one the visitor may not read.
			field, msg = "node", "there is no such node in this cluster"
		}
		if errors.Is(err, ops.ErrUnprocessable) && !strings.Contains(msg, "args") {
			field = "kind"
		}
		s.showNewAction(w, r, v, p.Status, f, fieldErrs{field: msg})
		return
	}
	http.Redirect(w, r, "/ui/actions/"+rec.ID+"?done=created&id="+rec.ID, http.StatusSeeOther)
}

// createActions makes the actions of the New action form over a target
// and answers the form again, kept as typed, with the actions made. The
// form's request_id makes a re-post of it (a refresh of this answer) create
// nothing new: it answers with the actions the first post made.
func (s *Server) createActions(w http.ResponseWriter, r *http.Request, v *visitor, f newActionForm, req ops.ActionRequest, t target.Target) {
	recs, _, err := s.ops.CreateActions(r.Context(), v.caller(r), req, t)
	if err != nil {
		p := ops.Describe(err)
		if p.Status >= http.StatusInternalServerError {
			s.log.Error("create actions", "err", err)
		}
		msg := strings.TrimPrefix(p.Message, ops.ErrUnprocessable.Error()+": ")
		field := actionField(msg)
		switch {
		case errors.Is(err, store.ErrNotFound):
			field, msg = "", "there is no such cluster"
		case strings.Contains(msg, "no node has the labels"), strings.Contains(msg, "has no nodes"), strings.Contains(msg, "narrow the selector"):
			field = "target"
		case errors.Is(err, ops.ErrUnprocessable) && !strings.Contains(msg, "args"):
			field = "kind"
		}
		s.showNewAction(w, r, v, p.Status, f, fieldErrs{field: msg})
		return
	}
	created := make([]action.Action, len(recs))
	for i, rec := range recs {
		created[i] = rec.Action
	}
	s.showNewActionCreated(w, r, v, f, created)
}

// A change of an action its page offers, beside the decisions.
type actionChange string

const (
	actionCancel actionChange = "cancel"
	actionRetry  actionChange = "retry"
)

// changeAction cancels or retries an action through the operations, with
// the optional reason of the form, as the API's routes do.
func (s *Server) changeAction(c actionChange) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, v *visitor) {
		id := r.PathValue("id")
		if !action.ValidID(id) {
			s.renderError(w, r, v, http.StatusNotFound, "There is no such action.")
			return
		}
		reason, err := plainField(r.PostForm, "reason", maxReason)
		if err != nil {
			s.renderError(w, r, v, http.StatusBadRequest, "Nothing changed: the "+formMessage(err)+".")
			return
		}
		var rec *store.Record
		done := "cancelled"
		switch c {
		case actionCancel:
			var pending bool
			rec, pending, err = s.ops.CancelAction(r.Context(), v.caller(r), id, reason)
			if pending {
				done = "cancel-requested"
			}
		case actionRetry:
			rec, err = s.ops.RetryAction(r.Context(), v.caller(r), id, reason)
			done = "retried"
		}
		if err != nil {
			s.refusedChange(w, r, v, "action", string(c), id, err)
			return
		}
		http.Redirect(w, r, "/ui/actions/"+rec.ID+"?done="+done+"&id="+rec.ID, http.StatusSeeOther)
	}
}

// cancellable and retryable say whether an action's page offers Cancel
// and Retry: the states the operations take them in (a cancel asked for
// already waits for the agent).
func cancellable(a *action.Action, requested bool) bool { return !a.State.Final() && !requested }
func retryable(a *action.Action) bool                   { return a.State.Final() }

type newScheduleData struct {
	Clusters    []store.Cluster
	Playbooks   []store.Playbook
	Concurrency []string
	Form        newScheduleForm
	Errs        fieldErrs
	// Preview are the next occurrences of the cron, in its time zone.
	Preview []string
	// Zone is the time zone the preview is in.
	Zone string
}

// newSchedulePage shows the New schedule form; ?cluster= picks the cluster,
// whose first maintenance window's time zone is the form's first zone.
func (s *Server) newSchedulePage(w http.ResponseWriter, r *http.Request, v *visitor) {
	q := r.URL.Query()
	f := newScheduleForm{Version: "latest", Concurrency: store.ConcurrencyForbid}
	for name, dst := range map[string]*string{"cluster": &f.Cluster, "playbook": &f.Playbook} {
		if val, err := plainField(q, name, maxFilter); err == nil && names.CheckID(val) == nil {
			*dst = val
		}
	}
	f.Timezone = s.clusterZone(f.Cluster)
	s.showNewSchedule(w, r, v, http.StatusOK, f, fieldErrs{}, false)
}

// clusterZone is the time zone of the cluster's first maintenance window
// ("" when it has none: UTC).
func (s *Server) clusterZone(cluster string) string {
	if cluster == "" || s.cfg.Calendars == nil {
		return ""
	}
	cal := s.cfg.Calendars.Load().Of(cluster)
	if cal == nil || len(cal.Windows) == 0 {
		return ""
	}
	if z := cal.Windows[0].Cron.Location().String(); z != "UTC" {
		return z
	}
	return ""
}

// showNewSchedule renders the New schedule form, with the preview of its
// cron when it has one (preview: a cron error is shown next to the cron).
func (s *Server) showNewSchedule(w http.ResponseWriter, r *http.Request, v *visitor, status int, f newScheduleForm, errs fieldErrs, preview bool) {
	ctx := r.Context()
	d := newScheduleData{Form: f, Errs: errs, Concurrency: scheduleConcurrency, Zone: f.Timezone}
	if d.Zone == "" {
		d.Zone = "UTC"
	}
	if f.Cron != "" {
		if _, bad := errs["cron"]; !bad {
			if _, bad := errs["timezone"]; !bad {
				next, err := cronPreview(f.Cron, f.Timezone, s.now(), scheduleNext)
				switch {
				case err == nil:
					d.Preview = next
				case preview:
					field := "cron"
					if strings.Contains(err.Error(), "timezone") {
						field = "timezone"
					}
					errs.set(field, err.Error())
					status = http.StatusBadRequest
				}
			}
		}
	}
	err := s.st.Read(ctx, func(rd store.Reader) error {
		var err error
		if d.Clusters, err = creatableClusters(ctx, rd, v); err != nil {
			return err
		}
		d.Playbooks, err = rd.Playbooks(ctx)
		return err
	})
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	if len(d.Playbooks) > playbooksShown {
		d.Playbooks = d.Playbooks[:playbooksShown]
	}
	vw := newView(v, "New schedule", "schedules")
	vw.Data = d
	s.render(w, r, status, "newschedule", vw)
}

// createSchedule previews (do=preview) or applies (do=create) the New
// schedule form through the operations, as `muster schedule create` does:
// a schedule of that name is changed, and either waits for approval. A
// refused form is shown again with the error next to its field, and
// nothing is stored.
func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request, v *visitor) {
	f, req, errs := decodeNewSchedule(r.PostForm)
	if r.PostForm.Get("do") == "preview" {
		// Only the cron and its zone matter to the preview.
		for k := range errs {
			if k != "cron" && k != "timezone" {
				delete(errs, k)
			}
		}
		status := http.StatusOK
		if len(errs) > 0 {
			status = http.StatusBadRequest
		}
		s.showNewSchedule(w, r, v, status, f, errs, true)
		return
	}
	if len(errs) > 0 {
		s.showNewSchedule(w, r, v, http.StatusBadRequest, f, errs, false)
		return
	}
	// A schedule of the same name is changed (and so waits for approval
	// again) only when the form says to replace it.
	apply := s.ops.CreateSchedule
	if f.Replace {
		apply = s.ops.ApplySchedule
	}
	out, err := apply(r.Context(), v.caller(r), &req)
	if err != nil {
		p := ops.Describe(err)
		if p.Status >= http.StatusInternalServerError {
			s.log.Error("create schedule", "err", err)
		}
		field, msg := p.Field, p.Message
		if errors.Is(err, store.ErrNotFound) {
			field, msg = scheduleNotFoundField(msg), "there is no such "+scheduleNotFoundField(msg)
		}
		if field == "catch_up" || field == "name" || field == "cron" || field == "timezone" || field == "concurrency" {
			msg = strings.TrimPrefix(msg, field+": ")
		}
		s.showNewSchedule(w, r, v, p.Status, f, fieldErrs{scheduleField(field): msg}, true)
		return
	}
	done := "created"
	switch out.Outcome {
	case ops.ScheduleUnchanged:
		done = "unchanged"
	case "changed":
		done = "changed"
	}
	http.Redirect(w, r, schedulePath(out.Name)+"?done="+url.QueryEscape(done), http.StatusSeeOther)
}

// scheduleField is the form field of an apply's error field ("" the form).
func scheduleField(field string) string {
	switch field {
	case "name", "cluster", "playbook", "version", "cron", "timezone", "params", "concurrency", "catch_up":
		return field
	}
	if strings.HasPrefix(field, "params") {
		return "params"
	}
	return ""
}

// scheduleNotFoundField is what a 404 of an apply names: its cluster or its
// playbook (version).
func scheduleNotFoundField(msg string) string {
	if strings.Contains(msg, "playbook") {
		return "playbook"
	}
	return "cluster"
}

// scheduleDone is the flash of a schedule's page after a change.
func scheduleDone(name, done string) string {
	switch done {
	case "created":
		return "Created schedule " + name + ": it waits for approval by an approver other than you."
	case "changed":
		return "Changed schedule " + name + ": it waits for approval again."
	case "unchanged":
		return "Schedule " + name + " is unchanged."
	}
	return ""
}

// canCreateSomewhere reports whether the visitor may create on some
// cluster they may read (the New action and New schedule links).
func canCreateSomewhere(ctx context.Context, rd store.Reader, v *visitor) (bool, error) {
	if !v.can(auth.Create) {
		return false, nil
	}
	vis, err := v.visible(ctx, rd)
	if err != nil {
		return false, err
	}
	cs, err := rd.Clusters(ctx)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(visibleClusters(vis, cs), func(c store.Cluster) bool { return v.canOn(auth.Create, c.ID) }), nil
}

// creatableClusters are the clusters the visitor sees and may create on,
// read in rd: the choices of the New action and New schedule forms.
func creatableClusters(ctx context.Context, rd store.Reader, v *visitor) ([]store.Cluster, error) {
	vis, err := v.visible(ctx, rd)
	if err != nil {
		return nil, err
	}
	cs, err := rd.Clusters(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(visibleClusters(vis, cs), func(c store.Cluster) bool { return !v.canOn(auth.Create, c.ID) }), nil
}
