package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// scheduleNext is how many next occurrences a schedule's page shows.
const scheduleNext = 5

// schedulesPerPage is how many schedules a page of the list shows.
const schedulesPerPage = 50

// scheduleStates are the states the Schedules page filters by.
var scheduleStates = []string{store.SchedulePendingApprove, store.ScheduleActive, store.SchedulePaused, store.ScheduleRejected}

type schedulesData struct {
	Filter    scheduleFilter
	States    []string
	Clusters  []store.Cluster
	Schedules []wire.Schedule
	// CanCreate: the visitor may create a schedule (the New schedule link).
	CanCreate bool
	// NextURL is the next page ("": this is the last).
	NextURL   string
	FilterErr string
}

// scheduleFilter is the filter of the Schedules page.
type scheduleFilter struct{ listFilter }

func decodeScheduleFilter(v url.Values) (scheduleFilter, error) {
	f, err := decodeListFilter(v, scheduleStates, func(m string) bool { return names.CheckID(m) == nil }, "a schedule name")
	return scheduleFilter{f}, err
}

// query returns the store query of the filter, for one page of n.
func (f scheduleFilter) query(n int) store.ScheduleQuery {
	q := store.ScheduleQuery{ClusterID: f.Cluster, Marker: f.Marker, Limit: n}
	if f.State != "" {
		q.States = []string{f.State}
	}
	return q
}

// schedulePath is the page of a schedule.
func schedulePath(name string) string { return "/ui/schedules/" + url.PathEscape(name) }

func (s *Server) schedules(w http.ResponseWriter, r *http.Request, v *visitor) {
	ctx := r.Context()
	d := schedulesData{States: scheduleStates}
	f, ferr := decodeScheduleFilter(r.URL.Query())
	status, why := filterStatus(ferr)
	if ferr != nil {
		d.FilterErr, f = why, scheduleFilter{}
	}
	d.Filter = f
	page := listPage{path: "/ui/schedules", filter: f.values()}
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
		q := f.query(schedulesPerPage)
		q.ClusterIn = vis.In()
		list, next, err := store.SchedulePage(ctx, rd, q)
		if err != nil {
			return err
		}
		d.NextURL = page.url(next)
		for i := range list {
			sc, err := s.ops.ScheduleView(ctx, rd, &list[i], 1, false)
			if err != nil {
				return err
			}
			d.Schedules = append(d.Schedules, sc)
		}
		return nil
	})
	if errors.Is(err, store.ErrUnknownMarker) {
		s.renderError(w, r, v, http.StatusBadRequest, "The page marker names no schedule.")
		return
	}
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	vw := newView(v, "Schedules", "schedules")
	vw.Data = d
	if q := r.URL.Query(); q.Get("done") == "deleted" && names.CheckID(q.Get("schedule")) == nil {
		vw.Flash = fmt.Sprintf("Schedule %s deleted.", q.Get("schedule"))
	}
	s.render(w, r, status, "schedules", vw)
}

type scheduleData struct {
	Schedule wire.Schedule
	Params   []paramValue
	// Local are the next occurrences in the schedule's time zone.
	Local []string
	// CanDecide: the visitor may approve or reject it now.
	CanDecide bool
	// Why says why a schedule waiting for approval shows no buttons.
	Why string
	// CanPause, CanResume, CanDelete: the visitor may make that change
	// now (the API's permissions: cancel, continue, cancel).
	CanPause, CanResume, CanDelete bool
}

// pendingSchedule is a schedule waiting for approval, as the Approvals page
// shows it.
type pendingSchedule struct {
	Schedule wire.Schedule
	// Mine: the visitor created or last changed it. CanDecide: the visitor
	// may approve or reject it (the rule of recur.Service.Approve); Why
	// says why not otherwise.
	Mine, CanDecide bool
	Why             string
}

// pendingSchedules lists the schedules waiting for approval, oldest change
// first, at most approvalsShown.
func (s *Server) pendingSchedules(ctx context.Context, rd store.Reader, v *visitor) ([]pendingSchedule, error) {
	vis, err := v.visible(ctx, rd)
	if err != nil {
		return nil, err
	}
	list, err := rd.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	list = slices.DeleteFunc(list, func(sc store.Schedule) bool { return !vis.Has(sc.ClusterID) })
	sort.SliceStable(list, func(i, j int) bool { return list[i].UpdatedTS.Before(list[j].UpdatedTS) })
	out := []pendingSchedule{}
	pol := s.ops.Policy().Load() // once, for every schedule shown
	for i := range list {
		sc := &list[i]
		if sc.State != store.SchedulePendingApprove {
			continue
		}
		if len(out) == approvalsShown {
			break
		}
		applier, err := ops.ScheduleApplier(ctx, rd, sc)
		if err != nil {
			return nil, err
		}
		view, err := s.ops.ScheduleView(ctx, rd, sc, 0, false)
		if err != nil {
			return nil, err
		}
		p := pendingSchedule{Schedule: view, Mine: approval.SamePerson(sc.Requester, v.tok.Name)}
		p.Why = whyNot(pol, v, "this schedule", sc.Requester, applier, sc.ClusterID)
		if p.Why == "" {
			p.Why = ops.ApprovalWhyNot(view.Approval, v.tok.Name)
		}
		p.CanDecide = p.Why == ""
		out = append(out, p)
	}
	return out, nil
}

func (s *Server) schedulePage(w http.ResponseWriter, r *http.Request, v *visitor) {
	ctx := r.Context()
	name := r.PathValue("name")
	if names.CheckID(name) != nil {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such schedule.")
		return
	}
	var d scheduleData
	var applier string
	err := s.st.Read(ctx, func(rd store.Reader) error {
		sc, err := rd.Schedule(ctx, name)
		if err != nil {
			return err
		}
		vis, err := v.visible(ctx, rd)
		if err != nil {
			return err
		}
		if err := vis.Check("schedule "+name, sc.ClusterID); err != nil {
			return err
		}
		if applier, err = ops.ScheduleApplier(ctx, rd, sc); err != nil {
			return err
		}
		d.Schedule, err = s.ops.ScheduleView(ctx, rd, sc, scheduleNext, true)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such schedule.")
		return
	}
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	sc := &d.Schedule
	for k, val := range sc.Params {
		d.Params = append(d.Params, paramValue{Field: k, Value: val})
	}
	sort.Slice(d.Params, func(i, j int) bool { return d.Params[i].Field < d.Params[j].Field })
	loc, err := time.LoadLocation(sc.Timezone)
	if err != nil {
		loc = time.UTC
	}
	for _, n := range sc.Next {
		d.Local = append(d.Local, n.In(loc).Format("Mon 2006-01-02 15:04 MST"))
	}
	if sc.State == store.SchedulePendingApprove {
		d.Why = whyNot(s.ops.Policy().Load(), v, "this schedule", sc.Requester, applier, sc.Cluster)
		d.CanDecide = d.Why == ""
	}
	d.CanPause = sc.State == store.ScheduleActive && v.canOn(auth.Cancel, sc.Cluster)
	d.CanResume = sc.State == store.SchedulePaused && v.canOn(auth.Continue, sc.Cluster)
	d.CanDelete = v.canOn(auth.Cancel, sc.Cluster)
	vw := newView(v, "Schedule "+sc.Name, "schedules")
	vw.Data = d
	if done := r.URL.Query().Get("done"); done == "approved" || done == "rejected" || done == "paused" || done == "resumed" ||
		done == approvalRecorded {
		vw.Flash = fmt.Sprintf("Schedule %s %s.", sc.Name, done)
	} else if msg := scheduleDone(sc.Name, done); msg != "" {
		vw.Flash = msg
	}
	s.render(w, r, http.StatusOK, "schedule", vw)
}

// decideSchedule approves (with the digest shown) or rejects (with a
// reason) a schedule waiting for approval.
func (s *Server) decideSchedule(approve bool) handlerFunc {
	verb, done := "reject", "rejected"
	if approve {
		verb, done = "approve", "approved"
	}
	return func(w http.ResponseWriter, r *http.Request, v *visitor) {
		name := r.PathValue("name")
		if names.CheckID(name) != nil {
			s.renderError(w, r, v, http.StatusNotFound, "There is no such schedule.")
			return
		}
		var digest, reason string
		if approve {
			digest = r.PostForm.Get("digest")
			if !validDigest(digest) {
				s.renderError(w, r, v, http.StatusBadRequest, "The form lacks the digest of the schedule you were shown; reload it and approve again.")
				return
			}
		} else {
			var err error
			if reason, err = plainField(r.PostForm, "reason", maxReason); err != nil || reason == "" {
				s.renderError(w, r, v, http.StatusBadRequest, "A rejection needs a reason, for the requester and the audit trail.")
				return
			}
		}
		var err error
		if approve {
			var out wire.Schedule
			out, err = s.ops.ApproveSchedule(r.Context(), v.caller(r), name, digest)
			if err == nil && out.Approval != nil && !out.Approval.Satisfied {
				done = approvalRecorded // one level of several
			}
		} else {
			_, err = s.ops.RejectSchedule(r.Context(), v.caller(r), name, reason)
		}
		if err != nil {
			s.refusedChange(w, r, v, "schedule", verb, name, err)
			return
		}
		if r.PostForm.Get("next") == "/ui/approvals" {
			http.Redirect(w, r, "/ui/approvals?done="+url.QueryEscape(done)+"&schedule="+url.QueryEscape(name), http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, schedulePath(name)+"?done="+url.QueryEscape(done), http.StatusSeeOther)
	}
}

// approvalRecorded is the flash of a schedule's approval that leaves
// levels unmet.
const approvalRecorded = "approval recorded: it waits for its other levels"

// A change of an approved schedule that the schedule's page offers.
type scheduleOp string

const (
	schedulePause  scheduleOp = "pause"
	scheduleResume scheduleOp = "resume"
	scheduleDelete scheduleOp = "delete"
)

// operateSchedule pauses, resumes or deletes a schedule through the schedule
// service, as the API's routes do. Deleting needs the confirm box ticked: it
// ends every later occurrence (the runs it made stay). Each takes an
// optional reason, recorded with the change.
func (s *Server) operateSchedule(op scheduleOp) handlerFunc {
	done := map[scheduleOp]string{schedulePause: "paused", scheduleResume: "resumed", scheduleDelete: "deleted"}[op]
	return func(w http.ResponseWriter, r *http.Request, v *visitor) {
		name := r.PathValue("name")
		if names.CheckID(name) != nil {
			s.renderError(w, r, v, http.StatusNotFound, "There is no such schedule.")
			return
		}
		if op == scheduleDelete && r.PostForm.Get("confirm") != "yes" {
			s.renderError(w, r, v, http.StatusBadRequest, "Nothing was deleted: tick the box to confirm. Deleting a schedule ends its later occurrences; the runs it made stay.")
			return
		}
		reason, err := plainField(r.PostForm, "reason", maxReason)
		if err != nil {
			s.renderError(w, r, v, http.StatusBadRequest, "Nothing changed: the "+formMessage(err)+".")
			return
		}
		switch op {
		case schedulePause:
			_, err = s.ops.PauseSchedule(r.Context(), v.caller(r), name, reason)
		case scheduleResume:
			_, err = s.ops.ResumeSchedule(r.Context(), v.caller(r), name, reason)
		case scheduleDelete:
			err = s.ops.DeleteSchedule(r.Context(), v.caller(r), name, reason)
		}
		if err != nil {
			s.refusedChange(w, r, v, "schedule", string(op), name, err)
			return
		}
		if op == scheduleDelete {
			http.Redirect(w, r, "/ui/schedules?done=deleted&schedule="+url.QueryEscape(name), http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, schedulePath(name)+"?done="+done, http.StatusSeeOther)
	}
}
