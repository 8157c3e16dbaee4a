package ui

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/enroll"
	corenodes "github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// Sizes of the lists shown.
const (
	approvalsShown = 200
	actionsPerPage = 50
	eventsShown    = 100
	// eventsScanned bounds how far back the Events page looks for matches.
	eventsScanned = 5000
)

type loginData struct {
	Next    string
	Expired bool
	// Provider names the OpenID provider ("" when single sign-on is off).
	Provider string
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if c, err := readCookie(r, sessionCookie); err == nil {
		if sess, _, _, err := s.sessions.Get(r.Context(), c.Value); err == nil && sess != nil {
			// Signed in already: on to the page asked for.
			next := safeNext(q.Get("next"))
			if next == "" {
				next = "/ui/dashboard"
			}
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
	}
	s.showLogin(w, r, http.StatusOK, loginData{Next: safeNext(q.Get("next")), Expired: q.Get("expired") == "1"}, "")
}

// showLogin renders the sign-in form with a fresh CSRF token in its cookie.
func (s *Server) showLogin(w http.ResponseWriter, r *http.Request, status int, d loginData, errMsg string) {
	csrf := ops.RandomToken()
	setCookie(w, r, loginCookie, csrf, 3600)
	vw := newView(nil, "Sign in", "")
	vw.CSRF = csrf
	vw.Error = errMsg
	if d.Expired && errMsg == "" {
		vw.Flash = "Your session has ended. Sign in again to go back where you were."
	}
	if r.URL.Query().Get("signed_out") == "1" {
		vw.Flash = "You are signed out."
	}
	if s.cfg.SSO != nil {
		d.Provider = s.cfg.SSO.Name()
	}
	vw.Data = d
	s.render(w, r, status, "login", vw)
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		s.showLogin(w, r, http.StatusBadRequest, loginData{}, "The form could not be read.")
		return
	}
	c, err := readCookie(r, loginCookie)
	if !sameOrigin(r) || err != nil || c.Value == "" ||
		subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostForm.Get("csrf"))) != 1 {
		s.showLogin(w, r, http.StatusForbidden, loginData{Next: safeNext(r.PostForm.Get("next"))},
			"This sign-in form is stale or did not come from this site. Try again.")
		return
	}
	f, err := decodeLogin(r.PostForm)
	if err != nil {
		s.showLogin(w, r, http.StatusBadRequest, loginData{Next: f.Next}, formMessage(err))
		return
	}
	var tok *store.Token
	err = s.st.Read(r.Context(), func(rd store.Reader) error {
		var err error
		tok, err = auth.Authenticate(r.Context(), rd, f.Token)
		return err
	})
	if err != nil && !errors.Is(err, auth.ErrUnauthenticated) {
		s.log.Error("sign in", "err", err)
	}
	// Every attempt from an address counts, but an admin's: an admin signs
	// in whatever others do from the same address.
	now := s.now()
	if !isAdmin(tok) && !s.signIns.allowClient(clientAddr(r), now) {
		s.log.Warn("sign-in refused: too many from this address", "client", clientAddr(r))
		w.Header().Set("Retry-After", strconv.Itoa(int(s.cfg.SignInEvery/time.Second)+1))
		s.showLogin(w, r, http.StatusTooManyRequests, loginData{Next: f.Next},
			"Too many sign-in attempts from this address. Wait a minute and try again.")
		return
	}
	if err != nil {
		s.log.Info("sign-in refused", "client", clientAddr(r))
		s.showLogin(w, r, http.StatusUnauthorized, loginData{Next: f.Next},
			"That token was not accepted: it is unknown, revoked or mistyped. Ask an admin for a token (muster token create).")
		return
	}
	if !s.signIns.allowToken(tok.Hash, now) {
		s.log.Warn("sign-in refused: too many with this token", "actor", tok.Name, "client", clientAddr(r))
		w.Header().Set("Retry-After", strconv.Itoa(int(s.cfg.SignInEvery/time.Second)+1))
		s.showLogin(w, r, http.StatusTooManyRequests, loginData{Next: f.Next},
			"This token has signed in too often. Wait a minute and try again.")
		return
	}
	if err := s.startSession(w, r, tok); err != nil {
		s.showLogin(w, r, http.StatusServiceUnavailable, loginData{Next: f.Next}, s.sessionError(err))
		return
	}
	next := f.Next
	if next == "" {
		next = "/ui/dashboard"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// devLogin signs in with a one-time link printed by `muster dev`: only from
// a loopback address, only once per link.
func (s *Server) devLogin(w http.ResponseWriter, r *http.Request) {
	ip := net.ParseIP(clientAddr(r))
	if ip == nil || !ip.IsLoopback() {
		s.renderError(w, r, nil, http.StatusForbidden, "Sign-in links work only from the machine running muster dev.")
		return
	}
	nonce := r.URL.Query().Get("nonce")
	name := ""
	for n, tokName := range s.cfg.DevLogins {
		if subtle.ConstantTimeCompare([]byte(n), []byte(nonce)) == 1 {
			name = tokName
		}
	}
	s.mu.Lock()
	used := s.devUsed[nonce]
	if name != "" && !used {
		s.devUsed[nonce] = true
	}
	s.mu.Unlock()
	if name == "" || used {
		s.renderError(w, r, nil, http.StatusForbidden,
			"This sign-in link is unknown or was used already. Sign in with the token muster dev printed.")
		return
	}
	if !s.now().Before(s.cfg.DevLoginsExpire) {
		s.renderError(w, r, nil, http.StatusForbidden,
			"This sign-in link has expired (they work for ten minutes). Sign in with the token muster dev printed.")
		return
	}
	var tok *store.Token
	err := s.st.Read(r.Context(), func(rd store.Reader) error {
		toks, err := rd.Tokens(r.Context())
		for i := range toks {
			if toks[i].Name == name {
				tok = &toks[i]
			}
		}
		return err
	})
	if err != nil || tok == nil {
		s.renderError(w, r, nil, http.StatusForbidden, "The token of this sign-in link no longer exists.")
		return
	}
	if err := s.startSession(w, r, tok); err != nil {
		s.renderError(w, r, nil, http.StatusServiceUnavailable, s.sessionError(err))
		return
	}
	http.Redirect(w, r, "/ui/dashboard", http.StatusSeeOther)
}

// sessionError is what a person is told when no session could be started.
func (s *Server) sessionError(err error) string {
	if errors.Is(err, ops.ErrTooManySessions) {
		return "There are " + err.Error() + "."
	}
	s.log.Error("start session", "err", err)
	return "The session could not be stored; try again."
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, v *visitor) {
	if err := s.sessions.End(r.Context(), v.sess.Hash); err != nil {
		s.storeError(w, r, v, err)
		return
	}
	setCookie(w, r, sessionCookie, "", -1)
	s.log.Info("signed out", "actor", v.tok.Name, "client", clientAddr(r))
	http.Redirect(w, r, "/ui/login?signed_out=1", http.StatusSeeOther)
}

// pending is one action waiting for approval, as the Approvals page shows it.
type pending struct {
	action.Action
	// Approval is where its approval stands, level by level.
	Approval *wire.Approval
	Expires  time.Time
	// Mine: the visitor asked for it. CanDecide: the visitor may approve
	// or reject it here.
	Mine, CanDecide bool
	// Why explains why there are no buttons.
	Why string
}

type approvalsData struct {
	Items []pending
	// Runs are the runs waiting for approval, oldest first.
	Runs []pendingRun
	// Paused are the runs paused for an approver (errors, canary), oldest
	// first; MorePaused: there are more than the page shows.
	Paused     []pausedRun
	MorePaused bool
	// Schedules are the schedules waiting for approval, oldest change
	// first.
	Schedules []pendingSchedule
	Mine      int
	ForMe     int
	// More: there are more actions waiting than the page shows.
	More bool
	// RunsNextURL is the next page of runs ("": this is the last one);
	// RunsFirstURL the first, when this is not it.
	RunsNextURL, RunsFirstURL string
}

func (s *Server) approvals(w http.ResponseWriter, r *http.Request, v *visitor) {
	ctx := r.Context()
	marker := r.URL.Query().Get("marker")
	if marker != "" && !action.ValidID(marker) {
		s.renderError(w, r, v, http.StatusBadRequest, "The page marker is not a run id.")
		return
	}
	var recs []store.Record
	var runs []pendingRun
	var next string
	var d approvalsData
	var levels map[string]*wire.Approval
	err := s.st.Read(ctx, func(rd store.Reader) error {
		vis, err := v.visible(ctx, rd)
		if err != nil {
			return err
		}
		var more string
		recs, more, err = store.ActionPage(ctx, rd, store.ListQuery{States: []action.State{action.PendingApprove},
			ClusterIn: vis.In(), Sort: []store.SortKey{{Field: "created_ts"}}, Limit: approvalsShown})
		if err != nil {
			return err
		}
		d.More = more != ""
		levels = make(map[string]*wire.Approval, len(recs))
		for i := range recs {
			if levels[recs[i].ID], err = s.ops.ActionApproval(ctx, rd, &recs[i]); err != nil {
				return err
			}
		}
		if runs, next, err = s.pendingRuns(ctx, rd, v, marker); err != nil {
			return err
		}
		if marker == "" {
			if d.Paused, d.MorePaused, err = s.pausedRuns(ctx, rd, v); err != nil {
				return err
			}
			d.Schedules, err = s.pendingSchedules(ctx, rd, v)
		}
		return err
	})
	if errors.Is(err, store.ErrUnknownMarker) {
		s.renderError(w, r, v, http.StatusBadRequest, "The page marker names no run.")
		return
	}
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	d.Items, d.Runs = []pending{}, runs
	page := listPage{path: "/ui/approvals"}
	d.RunsNextURL = page.url(next)
	if marker != "" {
		d.RunsFirstURL = "/ui/approvals"
	}
	for _, p := range runs {
		if p.Mine {
			d.Mine++
		} else if p.CanDecide {
			d.ForMe++
		}
	}
	for _, p := range d.Paused {
		if p.Mine {
			d.Mine++
		} else if p.CanResume || p.CanPromote {
			d.ForMe++
		}
	}
	for _, p := range d.Schedules {
		if p.Mine {
			d.Mine++
		} else if p.CanDecide {
			d.ForMe++
		}
	}
	pol := s.ops.Policy().Load() // once, for every row shown
	for _, rec := range recs {
		p := pending{Action: rec.Action, Approval: levels[rec.ID], Mine: approval.SamePerson(rec.Requester, v.tok.Name)}
		if pol.TTL > 0 {
			p.Expires = ops.ApprovalEnds(pol.TTL, rec.CreatedTS, rec.NotBefore)
		}
		p.Why = whyNot(pol, v, "this", rec.Requester, "", rec.ClusterID)
		if p.Why == "" {
			p.Why = ops.ApprovalWhyNot(p.Approval, v.tok.Name)
		}
		p.CanDecide = p.Why == ""
		if p.Mine {
			d.Mine++
		} else if p.CanDecide {
			d.ForMe++
		}
		d.Items = append(d.Items, p)
	}
	vw := newView(v, "Approvals", "approvals")
	if vw.Flash = flash(r); vw.Flash != "" {
		vw.FlashLink = "/ui/actions/" + r.URL.Query().Get("id")
	} else if vw.Flash = runFlash(r); vw.Flash != "" {
		vw.FlashLink = "/ui/runs/" + r.URL.Query().Get("run")
	} else if name, done := r.URL.Query().Get("schedule"), r.URL.Query().Get("done"); names.CheckID(name) == nil &&
		(done == "approved" || done == "rejected" || done == approvalRecorded) {
		vw.Flash, vw.FlashLink = fmt.Sprintf("Schedule %s %s.", name, done), schedulePath(name)
	}
	vw.Live = page.live(marker, url.Values{"type": {"action.*,run.*,schedule.*"}}, "")
	vw.Data = d
	s.render(w, r, http.StatusOK, "approvals", vw)
}

// flash is the message a form's redirect asked for (?done=approved&id=...).
func flash(r *http.Request) string {
	q := r.URL.Query()
	id := q.Get("id")
	if !action.ValidID(id) {
		return ""
	}
	switch q.Get("done") {
	case "approved":
		return "Approved action " + id + "."
	case "recorded":
		return "Recorded your approval of action " + id + ": it waits for the approvals of its other levels."
	case "rejected":
		return "Rejected action " + id + "."
	case "urgent":
		return "Marked action " + id + " urgent: it passes a closed window, never a freeze."
	case "created":
		return "Created action " + id + "."
	case "cancelled":
		return "Cancelled action " + id + "."
	case "cancel-requested":
		return "Asked to cancel action " + id + ": its agent settles it at the next sync."
	case "retried":
		return "Created action " + id + " to retry the one it names."
	}
	return ""
}

func (s *Server) decide(d decision) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, v *visitor) {
		id := r.PathValue("id")
		if !action.ValidID(id) {
			s.renderError(w, r, v, http.StatusNotFound, "There is no such action.")
			return
		}
		f, err := decodeDecision(d, r.PostForm)
		if err != nil {
			s.renderError(w, r, v, http.StatusBadRequest, formMessage(err))
			return
		}
		op, done := s.ops.ApproveAction, "approved"
		switch d {
		case decisionReject:
			op, done = s.ops.RejectAction, "rejected"
		case decisionUrgent:
			op, done = s.ops.MarkActionUrgent, "urgent"
		}
		rec, err := op(r.Context(), v.caller(r), id, f.Reason)
		if err != nil {
			s.refusedChange(w, r, v, "action", string(d), id, err)
			return
		}
		if d == decisionApprove && rec.State == action.PendingApprove {
			// One level of several: it waits for the others.
			done = "recorded"
		}
		next := f.Next
		if next == "" && d == decisionUrgent {
			next = "/ui/actions/" + id
		} else if next == "" {
			next = "/ui/approvals"
		}
		u, _ := url.Parse(next) // safeNext made it parseable
		q := u.Query()
		q.Set("done", done)
		q.Set("id", id)
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
	}
}

type actionsData struct {
	// CanCreate: the visitor may create an action (the New action link).
	CanCreate   bool
	Filter      actionFilter
	States      []action.State
	Clusters    []store.Cluster
	Actions     []action.Action
	NextURL     string
	FilterErr   string
	FilterQuery string
}

func (s *Server) actions(w http.ResponseWriter, r *http.Request, v *visitor) {
	ctx := r.Context()
	d := actionsData{States: action.States}
	f, ferr := decodeActionFilter(r.URL.Query())
	status, why := filterStatus(ferr)
	if ferr != nil {
		d.FilterErr, f = why, actionFilter{}
	}
	d.Filter = f
	page := listPage{path: "/ui/actions", filter: f.values()}
	var recs []store.Record
	err := s.st.Read(ctx, func(rd store.Reader) error {
		vis, err := v.visible(ctx, rd)
		if err != nil {
			return err
		}
		if d.Clusters, err = rd.Clusters(ctx); err != nil {
			return err
		}
		d.Clusters = visibleClusters(vis, d.Clusters)
		if d.CanCreate, err = canCreateSomewhere(ctx, rd, v); err != nil {
			return err
		}
		var next string
		q := f.query(actionsPerPage)
		q.ClusterIn = vis.In()
		recs, next, err = store.ActionPage(ctx, rd, q)
		d.NextURL = page.url(next)
		return err
	})
	if errors.Is(err, store.ErrUnknownMarker) {
		s.renderError(w, r, v, http.StatusBadRequest, "The page marker names no action.")
		return
	}
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	for i := range recs {
		d.Actions = append(d.Actions, recs[i].Action)
	}
	vw := newView(v, "Actions", "actions")
	vw.Live = page.live(f.Marker, url.Values{"type": {"action.*"}}, f.Cluster)
	vw.Data = d
	s.render(w, r, status, "actions", vw)
}

type actionData struct {
	Action action.Action
	// Approval is where its approval stands, level by level.
	Approval  *wire.Approval
	Expires   time.Time
	Mine      bool
	CanDecide bool
	Why       string
	Self      string // this page's path, where the forms come back to
	// CanUrgent: the visitor may mark it urgent (an approver other than
	// its requester, while it has not left the core); UrgentWhy says
	// why not to an approver when it is not yet pushed.
	CanUrgent bool
	UrgentWhy string
	// CanCancel, CanRetry: the visitor may cancel it (it is not finished)
	// or retry it (it is).
	CanCancel, CanRetry bool
}

func (s *Server) actionDetail(w http.ResponseWriter, r *http.Request, v *visitor) {
	ctx := r.Context()
	id := r.PathValue("id")
	if !action.ValidID(id) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such action.")
		return
	}
	if r.URL.Query().Get("part") == "output" {
		s.actionOutput(w, r, v, id)
		return
	}
	var a action.Action
	var pushed, cancelAsked, procedure bool
	var waits *wire.Approval
	err := s.st.Read(ctx, func(rd store.Reader) error {
		rec, err := rd.Action(ctx, id)
		if err != nil {
			return err
		}
		vis, err := v.visible(ctx, rd)
		if err != nil {
			return err
		}
		if err := vis.Check("action "+id, rec.ClusterID); err != nil {
			return err
		}
		a, pushed, cancelAsked = rec.Action, rec.PushedStoreID != "", rec.CancelRequested
		if a.History, err = rd.History(ctx, id); err != nil {
			return err
		}
		if rec.RunID != "" {
			// A run's child is held with its whole stage when the stage's
			// kinds make a procedure, whatever its own kind.
			run, err := rd.Run(ctx, rec.RunID)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if err == nil {
				if i := slices.IndexFunc(run.Stages, func(st store.RunStage) bool { return st.Name == rec.Stage }); i >= 0 {
					procedure = s.ops.Budget().Load().Procedure(run.Stages[i].Kinds())
				}
			}
		}
		waits, err = s.ops.ActionApproval(ctx, rd, rec)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such action.")
		return
	}
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	d := actionData{Action: a, Approval: waits, Mine: approval.SamePerson(a.Requester, v.tok.Name), Self: "/ui/actions/" + id}
	pol := s.ops.Policy().Load()
	if pol.TTL > 0 {
		d.Expires = ops.ApprovalEnds(pol.TTL, a.CreatedTS, a.NotBefore)
	}
	if a.State == action.PendingApprove {
		d.Why = whyNot(pol, v, "this", a.Requester, "", a.ClusterID)
		if d.Why == "" {
			d.Why = ops.ApprovalWhyNot(waits, v.tok.Name)
		}
		d.CanDecide = d.Why == ""
	}
	// Urgent is offered where a window could hold the action, by the push
	// gate's rule (budget.Policy.WindowHolds).
	if (a.State == action.PendingApprove || a.State == action.PendingSchedule) && !pushed && v.canOn(auth.Approve, a.ClusterID) &&
		s.mayHoldForWindow(a.ClusterID) && s.ops.Budget().Load().WindowHolds(a.Kind, procedure) {
		d.UrgentWhy = urgentWhyNot(pol, v, a.Requester, a.ClusterID)
		d.CanUrgent = d.UrgentWhy == ""
	}
	d.CanCancel = cancellable(&a, cancelAsked) && v.canOn(auth.Cancel, a.ClusterID)
	d.CanRetry = retryable(&a) && v.canOn(auth.Retry, a.ClusterID)
	vw := newView(v, "Action "+id[:8], "actions")
	vw.Flash = flash(r)
	vw.Live = &liveRegion{URL: "/ui/actions/" + id + "?part=live", Stream: "action=" + id}
	vw.Data = d
	s.render(w, r, http.StatusOK, "action", vw)
}

// outputPart is what ?part=output of an action's page answers: its
// output (the last 64 KiB, control characters made visible), which a page
// shows as text, and its state; Final says it grows no more.
type outputPart struct {
	State  string `json:"state"`
	Final  bool   `json:"final"`
	Output string `json:"output"`
}

// actionOutput answers ?part=output: the action's output as it is now, for
// a page that follows it (a run's node cell, the action's page) while the
// action runs.
func (s *Server) actionOutput(w http.ResponseWriter, r *http.Request, v *visitor, id string) {
	ctx := r.Context()
	var a action.Action
	err := s.st.Read(ctx, func(rd store.Reader) error {
		rec, err := rd.Action(ctx, id)
		if err != nil {
			return err
		}
		vis, err := v.visible(ctx, rd)
		if err != nil {
			return err
		}
		if err := vis.Check("action "+id, rec.ClusterID); err != nil {
			return err
		}
		a = rec.Action
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such action.")
		return
	}
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(outputPart{State: string(a.State), Final: a.State.Final(), Output: printable(a.Output)})
}

type clusterView struct {
	store.Cluster
	Nodes        []nodeRow
	DrainedNodes []store.Node
	Counts       wire.NodeCounts
	Budget       *budgetView
	// Calendar is the cluster's windows and freezes now; nil: none.
	Calendar *wire.Calendar
	// Members is what the cluster's declared membership says now
	// (ops.MembersOf); nil: it declares none.
	Members *wire.Members
	// OnAlert is the cluster's on_alert playbook and where it stands
	// (ops.OnAlertView); nil: it names none.
	OnAlert *wire.OnAlert
	// CanFreeze and CanLift: the visitor may freeze the cluster, or lift
	// its freezes early (the Freeze and Lift buttons).
	CanFreeze, CanLift bool
	// CSRF is the session's, for the buttons' forms.
	CSRF string
	// Windows and BudgetRecord are the cluster's window and budget
	// records: what each says, who made or changed it, from where, and why
	// (docs/policy-as-data.md); BudgetRecord nil: none stored.
	Windows      []windowRow
	BudgetRecord *budgetRow
	// CanAddWindow, CanRemoveWindow and CanSetBudget: the visitor may make
	// the change as the operations decide who may (ops.PutPolicy): a first
	// window takes freeze, another or a removal unfreeze, a budget freeze
	// (one wider than the budget takes unfreeze: the operations refuse it
	// with a 403 naming what is missing).
	CanAddWindow, CanRemoveWindow, CanSetBudget bool
	// CanApproveOnAlert: the visitor may approve the on_alert playbook on
	// this cluster, and it has a digest to approve.
	CanApproveOnAlert bool
}

// windowRow is a window record as the clusters page lists it.
type windowRow struct {
	store.PolicyRecord
	wire.WindowSpec
}

// budgetRow is a budget record as the clusters page shows it.
type budgetRow struct {
	store.PolicyRecord
	wire.BudgetSpec
}

// sourceName is where a record came from, as the CLI says it: "api" for
// a change by hand.
func sourceName(src string) string {
	if src == "" {
		return "api"
	}
	return src
}

// nodeRow is a node as the clusters page shows it: Status is the status it
// is shown with (nodes.Status: DRAINED over UP), as in the API and the CLI,
// and its revocation (core/enroll), if any.
type nodeRow struct {
	store.Node
	Status       string
	Revoked      bool
	RevokeReason string
}

func (s *Server) clusters(w http.ResponseWriter, r *http.Request, v *visitor) {
	// The budget as it is now, loaded once for the whole page.
	budgets := s.ops.Budget().Load()
	members := s.ops.Members().Load()
	ctx := r.Context()
	var out []clusterView
	err := s.st.Read(ctx, func(rd store.Reader) error {
		vis, err := v.visible(ctx, rd)
		if err != nil {
			return err
		}
		cs, err := rd.Clusters(ctx)
		if err != nil {
			return err
		}
		cs = visibleClusters(vis, cs)
		all, err := rd.Nodes(ctx, "")
		if err != nil {
			return err
		}
		all = slices.DeleteFunc(all, func(n store.Node) bool { return !vis.Has(n.ClusterID) })
		revoked, err := enroll.RevokedNodes(ctx, rd, "")
		if err != nil {
			return err
		}
		for _, c := range cs {
			cv := clusterView{Cluster: c, Counts: corenodes.Counts(all, c.ID), CanFreeze: v.canOn(auth.Freeze, c.ID),
				CanLift: v.canOn(auth.Unfreeze, c.ID), CSRF: v.sess.CSRF, Members: ops.MembersOf(members, c.ID, all, time.Now())}
			if cv.OnAlert, err = s.ops.OnAlertView(ctx, rd, c.ID); err != nil {
				return err
			}
			for i := range all {
				if n := &all[i]; n.ClusterID == c.ID {
					rc, isRevoked := revoked[n.ClusterID+"/"+n.ID]
					cv.Nodes = append(cv.Nodes, nodeRow{Node: *n, Status: corenodes.Status(n), Revoked: isRevoked,
						RevokeReason: rc.RevokeReason})
					if n.Drained {
						cv.DrainedNodes = append(cv.DrainedNodes, *n)
					}
				}
			}
			recs, err := rd.Policies(ctx, store.PolicyQuery{ClusterID: c.ID, Live: true})
			if err != nil {
				return err
			}
			for _, p := range recs {
				switch p.Kind {
				case store.PolicyWindow:
					row := windowRow{PolicyRecord: p}
					_ = json.Unmarshal([]byte(p.Spec), &row.WindowSpec)
					if row.Timezone == "" {
						row.Timezone = "UTC"
					}
					cv.Windows = append(cv.Windows, row)
				case store.PolicyBudget:
					row := budgetRow{PolicyRecord: p}
					_ = json.Unmarshal([]byte(p.Spec), &row.BudgetSpec)
					cv.BudgetRecord = &row
				}
			}
			cv.CanRemoveWindow = v.canOn(auth.Unfreeze, c.ID)
			cv.CanAddWindow = v.canOn(auth.Freeze, c.ID) && (len(cv.Windows) == 0 || cv.CanRemoveWindow)
			cv.CanSetBudget = v.canOn(auth.Freeze, c.ID)
			cv.CanApproveOnAlert = cv.OnAlert != nil && cv.OnAlert.Digest != "" && !cv.OnAlert.Approved && v.canOn(auth.Approve, c.ID)
			if _, ok := budgets.Limit(c.ID); ok {
				open, err := rd.OpenActions(ctx, c.ID, "")
				if err != nil {
					return err
				}
				var mine []store.Node
				for _, n := range cv.Nodes {
					mine = append(mine, n.Node)
				}
				if cv.Budget, err = budgetOf(ctx, rd, budgets, c.ID, mine, open); err != nil {
					return err
				}
			}
			if cal := s.cfg.Calendars.Load().Of(c.ID); cal != nil {
				open, err := rd.OpenActions(ctx, c.ID, "")
				if err != nil {
					return err
				}
				cv.Calendar = schedule.CalendarView(cal, time.Now(), schedule.WaitingForTime(open))
			}
			out = append(out, cv)
		}
		return nil
	})
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	vw := newView(v, "Clusters", "clusters")
	vw.Flash = clusterFlash(r.URL.Query().Get("done"))
	vw.Live = &liveRegion{URL: "/ui/clusters?part=live", Stream: ""}
	vw.Data = out
	s.render(w, r, http.StatusOK, "clusters", vw)
}

type eventsData struct {
	Filter    eventFilter
	Types     []string
	Events    []store.Event
	FilterErr string
	// Marks are the deliveries of each event shown, by event number.
	Marks map[int64][]deliveryMark
}

// deliveryMark is what every reader of the Events page sees of a delivery:
// its destination's name and state, never its URL or errors.
type deliveryMark struct {
	Destination string
	State       string
	Attempts    int
}

// marksShown bounds the deliveries the Events page reads.
const marksShown = 20 * eventsShown

// eventMarks reads the deliveries of evs (newest first) in one query
// bounded by their numbers, their times and marksShown.
func eventMarks(ctx context.Context, rd store.Reader, evs []store.Event) (map[int64][]deliveryMark, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	q := store.EventDeliveryQuery{FromSeq: evs[len(evs)-1].Seq, ToSeq: evs[0].Seq,
		FromTS: evs[0].TS, ToTS: evs[0].TS, Limit: marksShown}
	for _, e := range evs {
		if e.TS.Before(q.FromTS) {
			q.FromTS = e.TS
		}
		if e.TS.After(q.ToTS) {
			q.ToTS = e.TS
		}
	}
	ds, err := rd.EventDeliveries(ctx, q)
	if err != nil {
		return nil, err
	}
	marks := make(map[int64][]deliveryMark)
	for _, d := range ds {
		marks[d.EventSeq] = append(marks[d.EventSeq], deliveryMark{Destination: d.Destination, State: d.State, Attempts: d.Attempts})
	}
	return marks, nil
}

func (s *Server) events(w http.ResponseWriter, r *http.Request, v *visitor) {
	ctx := r.Context()
	d := eventsData{Types: eventTypes}
	f, ferr := decodeEventFilter(r.URL.Query())
	status := http.StatusOK
	if ferr != nil {
		status = http.StatusBadRequest
		d.FilterErr = formMessage(ferr)
		f = eventFilter{}
	}
	d.Filter = f
	err := s.st.Read(ctx, func(rd store.Reader) error {
		vis, err := v.visible(ctx, rd)
		if err != nil {
			return err
		}
		if d.Events, err = newestEvents(r, rd, f, vis); err != nil {
			return err
		}
		d.Marks, err = eventMarks(ctx, rd, d.Events)
		return err
	})
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	live := f.values()
	live.Set("part", "live")
	vw := newView(v, "Events", "events")
	vw.Live = &liveRegion{URL: "/ui/events?" + live.Encode(), Stream: f.values().Encode()}
	vw.Data = d
	s.render(w, r, status, "events", vw)
}

// newestEvents returns up to eventsShown events matching f that vis keeps,
// newest first, looking back over at most eventsScanned events.
func newestEvents(r *http.Request, rd store.Reader, f eventFilter, vis ops.Visible) ([]store.Event, error) {
	ctx := r.Context()
	hi, err := rd.LatestSeq(ctx)
	if err != nil {
		return nil, err
	}
	const window = 500
	var out []store.Event
	for scanned := int64(0); hi > 0 && scanned < eventsScanned && len(out) < eventsShown; scanned += window {
		lo := max(0, hi-window)
		evs, err := rd.Events(ctx, lo, window)
		if err != nil {
			return nil, err
		}
		for i := len(evs) - 1; i >= 0 && len(out) < eventsShown; i-- {
			if evs[i].Seq <= hi && f.keep(&evs[i]) && vis.Event(&evs[i]) {
				out = append(out, evs[i])
			}
		}
		hi = lo
	}
	return out, nil
}

// storeError answers a failed store call: 503 when the API would say the
// database is unavailable, else 500; the cause goes to the log.
func (s *Server) storeError(w http.ResponseWriter, r *http.Request, v *visitor, err error) {
	s.log.Error("store", "path", r.URL.Path, "err", err)
	status := http.StatusInternalServerError
	if ops.Describe(err).Status == http.StatusServiceUnavailable {
		status = http.StatusServiceUnavailable
	}
	s.renderError(w, r, v, status, "The store could not be reached; try again shortly.")
}
