package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aymanbagabas/go-udiff"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/target"
	"github.com/musterhq/muster/shared/wire"
)

// Bounds of the Playbooks pages.
const (
	playbooksShown = 200
	// versionsShown: the newest versions listed on a playbook's page.
	versionsShown = 50
	// maxParamField is the longest parameter value the plan form takes.
	maxParamField = 1000
	// planChildrenShown bounds the children a plan page lists.
	planChildrenShown = 500
)

// paramPrefix starts the names of the plan form's parameter fields.
const paramPrefix = "p."

type playbooksData struct {
	Playbooks []store.Playbook
	More      bool
}

func (s *Server) playbooks(w http.ResponseWriter, r *http.Request, v *visitor) {
	ctx := r.Context()
	var d playbooksData
	err := s.st.Read(ctx, func(rd store.Reader) error {
		var err error
		d.Playbooks, err = rd.Playbooks(ctx)
		return err
	})
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	if len(d.Playbooks) > playbooksShown {
		d.Playbooks, d.More = d.Playbooks[:playbooksShown], true
	}
	vw := newView(v, "Playbooks", "playbooks")
	vw.Data = d
	s.render(w, r, http.StatusOK, "playbooks", vw)
}

// paramField is one field of the plan form, built from a parameter's type.
type paramField struct {
	playbook.Param
	Field string // the form field's name
	Value string // the value to show: the one given, else the default
}

type playbookData struct {
	Playbook store.Playbook
	Versions []store.Playbook
	// MoreVersions: older versions than those listed exist.
	MoreVersions bool
	Description  string
	Fields       []paramField
	ParseErr     string
	Clusters     []store.Cluster
	Cluster      string
	// Limit (node ids or globs, as typed) and NotBefore (as typed) are
	// in the plan and its digest; NotBeforeAt is NotBefore read, which the
	// start form carries (RFC 3339).
	Limit, NotBefore string
	NotBeforeAt      string
	// Diff is the unified diff from version DiffFrom to the version shown.
	Diff     string
	DiffFrom int
	PlanView
	PlanErr  string
	Params   []paramValue
	CanStart bool
	Self     string
}

type paramValue struct{ Field, Value string }

// PlanView is a plan as its pages show it (template "plan-children").
type PlanView struct {
	// Plan is the plan asked for (nil: none).
	Plan *wire.Plan
	// Held counts the children the disruption budget holds now.
	Held int
	// Actions are the children a start makes; Rollback the rollback
	// steps made only on a node that fails.
	Actions  int
	Rollback int
	// Children are the first planChildrenShown children, More the others.
	More     int
	Children []wire.PlanChild
}

// newPlanView counts a plan's children for its page.
func newPlanView(p *wire.Plan) PlanView {
	v := PlanView{Plan: p}
	for _, ch := range p.Children {
		if ch.Held != "" {
			v.Held++
		}
		if ch.Rollback {
			v.Rollback++
		} else {
			v.Actions++
		}
	}
	v.Children = p.Children[:min(len(p.Children), planChildrenShown)]
	v.More = len(p.Children) - len(v.Children)
	return v
}

// playbookPath is the page of a playbook.
func playbookPath(name string) string { return "/ui/playbooks/" + url.PathEscape(name) }

// playbookPage shows a version of a playbook (the newest unless ?version=N),
// its versions, a diff from another (?diff=M), and the plan form; with
// ?plan=1 the plan of the form's cluster and parameters, and Start for the
// roles that may create runs.
func (s *Server) playbookPage(w http.ResponseWriter, r *http.Request, v *visitor) {
	ctx := r.Context()
	name := r.PathValue("name")
	if !playbook.ValidName(name) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such playbook.")
		return
	}
	q := r.URL.Query()
	version, err := versionParam(q.Get("version"))
	diffFrom, err2 := versionParam(q.Get("diff"))
	if err != nil || err2 != nil {
		s.renderError(w, r, v, http.StatusBadRequest, "A version is a positive integer.")
		return
	}
	d := playbookData{CanStart: v.can(auth.Create), Self: playbookPath(name), DiffFrom: diffFrom}
	err = s.st.Read(ctx, func(rd store.Reader) error {
		p, err := rd.Playbook(ctx, name, version)
		if err != nil {
			return err
		}
		d.Playbook = *p
		vs, err := rd.PlaybookVersions(ctx, name)
		if err != nil {
			return err
		}
		if len(vs) > versionsShown {
			vs, d.MoreVersions = vs[len(vs)-versionsShown:], true
		}
		for i := len(vs) - 1; i >= 0; i-- { // newest first
			d.Versions = append(d.Versions, vs[i])
		}
		if diffFrom > 0 {
			old, err := rd.Playbook(ctx, name, diffFrom)
			if err != nil {
				return err
			}
			d.Diff = udiff.Unified(fmt.Sprintf("version %d", old.Version), fmt.Sprintf("version %d", p.Version),
				old.Document, p.Document)
			if d.Diff == "" {
				d.Diff = "(no difference)"
			}
		}
		vis, err := v.visible(ctx, rd)
		if err != nil {
			return err
		}
		d.Clusters, err = rd.Clusters(ctx)
		d.Clusters = visibleClusters(vis, d.Clusters)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such playbook or version.")
		return
	}
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	pb, perr := playbook.Parse([]byte(d.Playbook.Document))
	status := http.StatusOK
	if perr != nil {
		d.ParseErr = perr.Error()
	} else {
		d.Description = pb.Description
		given, ferr := decodeParams(q, pb)
		d.Cluster = strings.TrimSpace(q.Get("cluster"))
		var when planWhen
		if ferr == nil {
			when, ferr = decodePlanWhen(q)
		}
		d.Limit, d.NotBefore = when.limitText, when.notBeforeText
		for _, p := range pb.Params {
			f := paramField{Param: p, Field: paramPrefix + p.Name}
			if val, ok := given[p.Name]; ok {
				f.Value = val
			} else if p.Default != nil {
				f.Value = fmt.Sprint(p.Default)
			}
			d.Fields = append(d.Fields, f)
		}
		if q.Get("plan") == "1" {
			if ferr == nil && d.Cluster == "" {
				ferr = formError("choose a cluster")
			}
			if ferr != nil {
				d.PlanErr, status = formMessage(ferr), http.StatusBadRequest
			} else {
				plan, err := s.plan(ctx, v.caller(r), pb, d.Playbook.Version, &wire.PlanRequest{ClusterID: d.Cluster, Params: given,
					Limit: when.limit, NotBefore: when.notBefore})
				if when.notBefore != nil {
					d.NotBeforeAt = when.notBefore.Format(time.RFC3339)
				}
				if err != nil {
					d.PlanErr, status = s.planError(err)
				} else {
					d.PlanView = newPlanView(plan)
					for _, f := range d.Fields {
						if val, ok := given[f.Name]; ok {
							d.Params = append(d.Params, paramValue{Field: f.Field, Value: val})
						}
					}
				}
			}
		}
	}
	vw := newView(v, "Playbook "+name, "playbooks")
	vw.Data = d
	s.render(w, r, status, "playbook", vw)
}

// planError is what the plan section says for an error of a plan or a
// start, and the page's status.
func (s *Server) planError(err error) (string, int) {
	p := ops.Describe(err)
	switch {
	case p.Internal:
		s.log.Error("playbook plan", "err", err)
		return "The plan could not be made; try again shortly.", p.Status
	case errors.Is(err, store.ErrNotFound):
		return "There is no such cluster.", http.StatusBadRequest
	}
	return p.Message, p.Status
}

// plan makes the plan of a stored playbook, with the children the budget
// would hold marked, as the API does.
func (s *Server) plan(ctx context.Context, c ops.Caller, pb *playbook.Playbook, version int, req *wire.PlanRequest) (*wire.Plan, error) {
	out, err := s.ops.Plan(ctx, c, pb, version, req)
	return &out, err
}

func versionParam(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, formError("version must be a positive integer")
	}
	return n, nil
}

// decodeParams reads the plan form's parameter fields (p.NAME) for the
// parameters pb declares: a bool's checkbox sends "true" when ticked and
// nothing otherwise, so a declared bool left out is false. Fields of
// parameters pb does not declare are refused; the types are checked by the
// plan (playbook.Values).
func decodeParams(v url.Values, pb *playbook.Playbook) (map[string]string, error) {
	declared := map[string]*playbook.Param{}
	for i := range pb.Params {
		declared[pb.Params[i].Name] = &pb.Params[i]
	}
	out := map[string]string{}
	for key := range v {
		name, ok := strings.CutPrefix(key, paramPrefix)
		if !ok {
			continue
		}
		p := declared[name]
		if p == nil {
			return nil, formError("the playbook has no parameter %q", name)
		}
		val, err := plainField(v, key, maxParamField)
		if err != nil {
			return nil, err
		}
		if val == "" && p.Type != playbook.TypeString {
			continue // left empty: the default, or the plan says it is required
		}
		out[name] = val
	}
	for name, p := range declared {
		if _, ok := out[name]; !ok && p.Type == playbook.TypeBool && v.Has("plan") {
			out[name] = "false"
		}
	}
	return out, nil
}

// startForm is the Start form of a plan: what the plan was made of, and
// its digest.
type startForm struct {
	Cluster string
	Version int
	Digest  string
	Params  map[string]string
	When    planWhen
}

// planWhen is a plan's node subset and not-before, as typed in the plan
// form and carried by the start form: both are in the plan's digest.
type planWhen struct {
	limitText, notBeforeText string
	limit                    []string
	notBefore                *time.Time
}

// decodePlanWhen reads the limit and not_before fields.
func decodePlanWhen(v url.Values) (planWhen, error) {
	var w planWhen
	var err error
	if w.limitText, err = plainField(v, "limit", maxFilter*5); err != nil {
		return w, err
	}
	if w.limit, err = target.SplitLimit(w.limitText); err != nil {
		return w, formError("%v", err)
	}
	if w.notBeforeText, err = plainField(v, "not_before", 40); err != nil {
		return w, err
	}
	if w.notBeforeText != "" {
		t, err := parseNotBefore(w.notBeforeText)
		if err != nil {
			return w, err
		}
		w.notBefore = &t
	}
	return w, nil
}

func decodeStart(v url.Values, pb *playbook.Playbook) (startForm, error) {
	var f startForm
	var err error
	if f.Cluster, err = plainField(v, "cluster", maxFilter); err != nil {
		return f, err
	}
	if f.Cluster == "" {
		return f, formError("choose a cluster")
	}
	if f.Version, err = versionParam(v.Get("version")); err != nil {
		return f, err
	}
	if f.Version == 0 {
		return f, formError("the plan's version is missing: plan again")
	}
	if f.Digest, err = plainField(v, "digest", 200); err != nil {
		return f, err
	}
	if f.Digest == "" {
		return f, formError("the plan's digest is missing: plan again")
	}
	if f.Params, err = decodeParams(v, pb); err != nil {
		return f, err
	}
	f.When, err = decodePlanWhen(v)
	return f, err
}

// startPlaybook starts a run from the plan its form carries: the stored
// version and the plan's digest, which must still be the plan's (else 409
// and nothing starts), as the API's start does.
func (s *Server) startPlaybook(w http.ResponseWriter, r *http.Request, v *visitor) {
	ctx := r.Context()
	name := r.PathValue("name")
	if !playbook.ValidName(name) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such playbook.")
		return
	}
	version, err := versionParam(r.PostForm.Get("version"))
	if err != nil || version == 0 {
		s.renderError(w, r, v, http.StatusBadRequest, "The plan's version is missing: plan again.")
		return
	}
	pb, version, err := s.ops.LoadPlaybook(ctx, v.caller(r), name, &wire.PlanRequest{Version: version})
	if errors.Is(err, store.ErrNotFound) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such playbook or version.")
		return
	}
	if err != nil {
		msg, status := s.planError(err)
		s.renderError(w, r, v, status, msg)
		return
	}
	f, err := decodeStart(r.PostForm, pb)
	if err != nil {
		s.renderError(w, r, v, http.StatusBadRequest, formMessage(err))
		return
	}
	req := &wire.PlanRequest{ClusterID: f.Cluster, Params: f.Params, Digest: f.Digest, Version: version,
		Limit: f.When.limit, NotBefore: f.When.notBefore}
	// Planned outside the write transaction, as the API's start.
	out, err := s.ops.StartLoaded(ctx, v.caller(r), pb, version, req)
	if errors.Is(err, store.ErrNotFound) {
		// No such cluster, or one the visitor may not read: the same page.
		s.renderError(w, r, v, http.StatusNotFound, "There is no such cluster.")
		return
	}
	if err != nil {
		msg, status := s.planError(err)
		s.renderError(w, r, v, status, "Could not start: "+msg)
		return
	}
	run := out.Run
	http.Redirect(w, r, "/ui/runs/"+run.ID+"?done=started&run="+run.ID, http.StatusSeeOther)
}
