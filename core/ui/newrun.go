package ui

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
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
	// Tab is the page's tab: "yaml" (the document) or "form" (the
	// builder, with the kinds the chosen cluster's nodes offer).
	Tab     string
	Builder runBuilder
	Kinds   []kindChoice
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
	d := newRunData{Form: f, Errs: fieldErrs{}, Tab: "yaml"}
	if r.URL.Query().Get("tab") == "form" {
		d.Tab, d.Builder = "form", emptyBuilder()
	}
	s.showNewRun(w, r, v, http.StatusOK, d)
}

// newRunClusters are the clusters the visitor may create on, and the
// nodes of cluster when it is one of them.
func (s *Server) newRunClusters(ctx context.Context, v *visitor, cluster string) ([]store.Cluster, []store.Node, error) {
	var clusters []store.Cluster
	var nodes []store.Node
	err := s.st.Read(ctx, func(rd store.Reader) error {
		var err error
		if clusters, err = creatableClusters(ctx, rd, v); err != nil {
			return err
		}
		if cluster == "" && len(clusters) == 1 {
			cluster = clusters[0].ID
		}
		if !slices.ContainsFunc(clusters, func(c store.Cluster) bool { return c.ID == cluster }) {
			return nil
		}
		nodes, err = rd.Nodes(ctx, cluster)
		return err
	})
	return clusters, nodes, err
}

// showNewRun renders the New run form with the clusters the visitor may
// create on.
func (s *Server) showNewRun(w http.ResponseWriter, r *http.Request, v *visitor, status int, d newRunData) {
	clusters, nodes, err := s.newRunClusters(r.Context(), v, d.Form.Cluster)
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	d.Clusters = clusters
	if d.Form.Cluster == "" && len(d.Clusters) == 1 {
		d.Form.Cluster = d.Clusters[0].ID
	}
	if d.Tab == "form" {
		d.Kinds = advertisedKinds(nodes)
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
	if r.PostForm.Get("builder") != "" {
		s.newRunFromBuilder(w, r, v)
		return
	}
	f, req, errs := decodeNewRun(r.PostForm)
	d := newRunData{Form: f, Errs: errs, Tab: "yaml"}
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
	s.showNewRun(w, r, v, s.planNewRun(r, v, req, &d), d)
}

// planNewRun plans req (ops.PlanDocument) into d: the plan, or the error
// next to its field; it returns the page's status.
func (s *Server) planNewRun(r *http.Request, v *visitor, req *wire.PlanRequest, d *newRunData) int {
	req.Digest = ""
	plan, err := s.ops.PlanDocument(r.Context(), v.caller(r), req)
	if err != nil {
		msg, status := s.newRunError(err)
		d.Errs.set(newRunField(err, msg), msg)
		return status
	}
	d.PlanView = newPlanView(&plan)
	if req.NotBefore != nil {
		d.NotBeforeAt = req.NotBefore.Format(time.RFC3339)
	}
	return http.StatusOK
}

// newRunFromBuilder answers the form builder: "Add stage" and "Add step"
// show it again with one more row; "Show as YAML" shows the document it
// builds (buildRunDocument) in the YAML tab; Plan plans that document as
// the YAML tab does (decodeNewRun, planNewRun), and the plan's Start is
// the YAML tab's, with the document. A refused form is shown again with
// the error next to its field, and nothing is made.
func (s *Server) newRunFromBuilder(w http.ResponseWriter, r *http.Request, v *visitor) {
	b, errs := decodeRunBuilder(r.PostForm)
	do := r.PostForm.Get("do")
	vals := url.Values{}
	for _, k := range []string{"cluster", "limit", "not_before"} {
		vals[k] = r.PostForm[k]
	}
	f, req, planErrs := decodeNewRun(vals)
	f.Document = ""
	d := newRunData{Form: f, Errs: errs, Tab: "form", Builder: b}
	if do != "plan" && do != "yaml" {
		// Add stage, Add step, or the kinds of another cluster.
		s.showNewRun(w, r, v, http.StatusOK, d)
		return
	}
	clusters, nodes, err := s.newRunClusters(r.Context(), v, f.Cluster)
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	if f.Cluster != "" && !slices.ContainsFunc(clusters, func(c store.Cluster) bool { return c.ID == f.Cluster }) {
		// As the YAML path answers (newRunError): a cluster the visitor
		// may not create on is none.
		d.Errs.set("cluster", "there is no such cluster")
		s.showNewRun(w, r, v, http.StatusNotFound, d)
		return
	}
	doc, docErrs := buildRunDocument(b, nodes)
	for k, msg := range docErrs {
		d.Errs.set(k, msg)
	}
	for k, msg := range planErrs {
		if k != "document" && k != "params" {
			d.Errs.set(k, msg)
		}
	}
	if len(d.Errs) > 0 {
		s.showNewRun(w, r, v, http.StatusBadRequest, d)
		return
	}
	d.Form.Document, req.Document = doc, doc
	if do == "yaml" {
		d.Tab = "yaml"
		s.showNewRun(w, r, v, http.StatusOK, d)
		return
	}
	status := s.planNewRun(r, v, req, &d)
	if msg, ok := d.Errs["document"]; ok {
		// The plan's refusal of the document is the stages'.
		delete(d.Errs, "document")
		d.Errs.set("stages", msg)
	}
	s.showNewRun(w, r, v, status, d)
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
