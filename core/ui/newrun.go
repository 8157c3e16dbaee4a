package ui

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// newRunPath is the New run page: runs are named by UUIDs, so no run's
// page is hidden behind it.
const newRunPath = "/ui/runs/new"

// maxDocumentField is the largest document the New run form takes.
const maxDocumentField = playbook.MaxSize

// newRunExample is the document the New run form starts with.
const newRunExample = `name: adhoc
stages:
  - name: ping
    kind: muster.io/debug.ping
    target: {all: true}
    max_concurrency: 1
`

// newRunForm is the New run form as typed: a run's stages written as a
// playbook's document (name, params, stages, lock), the values of its
// params, and the plan's cluster, node subset and not-before.
type newRunForm struct {
	Cluster, Document, Params, Limit, NotBefore string
	// Digest is the plan's, carried by Start.
	Digest string
}

// decodeNewRun reads the New run form into the plan request of a document
// (ops.PlanDocument, ops.StartDocument). Each refused field has its message
// in the returned fieldErrs; the request is usable only when it is empty.
// The document itself is the plan's to check.
func decodeNewRun(v url.Values) (newRunForm, *wire.PlanRequest, fieldErrs) {
	var f newRunForm
	errs := fieldErrs{}
	for name, dst := range map[string]*string{"cluster": &f.Cluster, "digest": &f.Digest} {
		s, err := plainField(v, name, maxFilter)
		if err != nil {
			errs.set(name, formMessage(err))
			continue
		}
		*dst = s
	}
	f.Document = strings.TrimSpace(strings.ReplaceAll(v.Get("document"), "\r\n", "\n"))
	switch {
	case len(f.Document) > maxDocumentField:
		errs.set("document", "the document is longer than 256 KiB")
		f.Document = ""
	case !utf8.ValidString(f.Document):
		errs.set("document", "the document is not valid UTF-8")
		f.Document = ""
	case f.Document == "":
		errs.set("document", "write the run's stages, as a playbook's")
	}
	f.Params = strings.TrimSpace(strings.ReplaceAll(v.Get("params"), "\r\n", "\n"))
	params, err := parseParamLines(f.Params)
	if err != nil {
		errs.set("params", formMessage(err))
		if len(f.Params) > maxParamsField || !utf8.ValidString(f.Params) {
			f.Params = ""
		}
	}
	when, err := decodePlanWhen(v)
	f.Limit, f.NotBefore = when.limitText, when.notBeforeText
	if err != nil {
		field := "limit"
		if strings.Contains(formMessage(err), "not") && !strings.Contains(formMessage(err), "limit") {
			field = "not_before"
		}
		errs.set(field, formMessage(err))
	}
	if f.Cluster == "" {
		errs.set("cluster", "choose a cluster")
	}
	req := &wire.PlanRequest{ClusterID: f.Cluster, Document: f.Document, Params: params, Limit: when.limit,
		NotBefore: when.notBefore, Digest: f.Digest}
	return f, req, errs
}

type newRunData struct {
	Clusters []store.Cluster
	Form     newRunForm
	Errs     fieldErrs
	PlanView
	// NotBeforeAt is the plan's not-before (RFC 3339), which Start carries.
	NotBeforeAt string
}

// newRunPage shows the New run form with an example document.
func (s *Server) newRunPage(w http.ResponseWriter, r *http.Request, v *visitor) {
	f := newRunForm{Document: newRunExample}
	if c, err := plainField(r.URL.Query(), "cluster", maxFilter); err == nil {
		f.Cluster = c
	}
	s.showNewRun(w, r, v, http.StatusOK, newRunData{Form: f, Errs: fieldErrs{}})
}

// showNewRun renders the New run form with the clusters the visitor may
// create on.
func (s *Server) showNewRun(w http.ResponseWriter, r *http.Request, v *visitor, status int, d newRunData) {
	ctx := r.Context()
	err := s.st.Read(ctx, func(rd store.Reader) error {
		var err error
		d.Clusters, err = creatableClusters(ctx, rd, v)
		return err
	})
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	if d.Form.Cluster == "" && len(d.Clusters) == 1 {
		d.Form.Cluster = d.Clusters[0].ID
	}
	vw := newView(v, "New run", "runs")
	vw.Data = d
	s.render(w, r, status, "newrun", vw)
}

// newRun plans (do=plan) or starts (do=start) the run of the New run form
// through the operations: the plan by the function a playbook's plan uses
// (ops.PlanDocument), the start only with the digest that plan showed
// (ops.StartDocument), so that what starts, and waits for approval, is
// exactly what was shown. A refused form is shown again with the error
// next to its field, and nothing is made.
func (s *Server) newRun(w http.ResponseWriter, r *http.Request, v *visitor) {
	f, req, errs := decodeNewRun(r.PostForm)
	d := newRunData{Form: f, Errs: errs}
	start := r.PostForm.Get("do") == "start"
	if start && f.Digest == "" {
		errs.set("", "plan the run first: Start carries the digest of the plan shown")
	}
	if len(errs) > 0 {
		s.showNewRun(w, r, v, http.StatusBadRequest, d)
		return
	}
	ctx := r.Context()
	if start {
		out, err := s.ops.StartDocument(ctx, v.caller(r), req)
		if err == nil {
			http.Redirect(w, r, "/ui/runs/"+out.Run.ID+"?done=started&run="+out.Run.ID, http.StatusSeeOther)
			return
		}
		msg, status := s.newRunError(err)
		d.Errs.set(newRunField(err, msg), "Nothing started: "+msg)
		s.showNewRun(w, r, v, status, d)
		return
	}
	req.Digest = ""
	plan, err := s.ops.PlanDocument(ctx, v.caller(r), req)
	if err != nil {
		msg, status := s.newRunError(err)
		d.Errs.set(newRunField(err, msg), msg)
		s.showNewRun(w, r, v, status, d)
		return
	}
	d.PlanView = newPlanView(&plan)
	if req.NotBefore != nil {
		d.NotBeforeAt = req.NotBefore.Format(time.RFC3339)
	}
	s.showNewRun(w, r, v, http.StatusOK, d)
}

// newRunError is what the New run form says for an error of a plan or a
// start, and the page's status.
func (s *Server) newRunError(err error) (string, int) {
	if errors.Is(err, store.ErrNotFound) {
		return "there is no such cluster", http.StatusNotFound
	}
	return s.planError(err)
}

// newRunField is the field of the New run form an error is about: most
// are the document's (its YAML, its stages, its targets).
func newRunField(err error, msg string) string {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "cluster"
	case errors.Is(err, playbook.ErrMoved):
		return ""
	case errors.Is(err, ops.ErrForbidden):
		return ""
	case strings.HasPrefix(msg, "limit"):
		return "limit"
	case strings.Contains(msg, "not_before"), strings.Contains(msg, "not before"):
		return "not_before"
	case strings.Contains(msg, "param"):
		return "params"
	}
	return "document"
}
