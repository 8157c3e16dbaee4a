package runs

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/musterhq/muster/core/store"
)

// Advances read what changed (docs/architecture.md, "Runs and playbooks"):
// every write of a run's child takes the next number of its run's change
// sequence (store.Reader.RunChildrenSince). The advancer keeps, for each
// run it moves on, the children it read and the highest number among
// them, and reads only the children numbered after it: an advance of a
// run of 1,000 nodes reads the few children that moved, not its 3,000.
// It reads them all again when it keeps nothing for the run (at start,
// after an error, once the run left the active runs, after ForgetChildren
// when the cluster's lease was taken) or when the run's approver changed.
// Only a read of committed data (a Read) updates what is kept; a write
// transaction reads what changed on top of it for its own decision, and
// keeps nothing of it, since it may roll back.

// childView is what the advancer keeps of one run's children.
type childView struct {
	mu      sync.Mutex
	cluster string
	// approvedBy is the run's approver the children were read under
	// (ChildOf's Replaced depends on it).
	approvedBy string
	// seq is the highest number read.
	seq  int64
	kids []keptChild
	at   map[string]int // child id → its index in kids
}

// keptChild is a child as the planner reads it, with when it was created
// (the order of a full read).
type keptChild struct {
	Child
	created time.Time
}

// childViews are the views of the runs an advancer moves on.
type childViews struct {
	mu   sync.Mutex
	runs map[string]*childView
	// check compares every incremental read with a full read, and fails
	// the advance when they differ (tests).
	check bool
	// rows counts the children read (full reads and changes).
	rows int64
}

// view is run id's view, made empty (for cluster) when there is none.
func (v *childViews) view(id, cluster string) *childView {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.runs == nil {
		v.runs = map[string]*childView{}
	}
	cv, ok := v.runs[id]
	if !ok {
		cv = &childView{cluster: cluster}
		v.runs[id] = cv
	}
	return cv
}

// forget drops what is kept of run id.
func (v *childViews) forget(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.runs, id)
}

// keep drops the views of cluster's runs other than active.
func (v *childViews) keep(cluster string, active []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id, cv := range v.runs {
		if cv.cluster == cluster && !slices.Contains(active, id) {
			delete(v.runs, id)
		}
	}
}

// forgetCluster drops the views of every run of cluster ("" every run).
func (v *childViews) forgetCluster(cluster string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id, cv := range v.runs {
		if cluster == "" || cv.cluster == cluster {
			delete(v.runs, id)
		}
	}
}

func (v *childViews) count(n int) {
	v.mu.Lock()
	v.rows += int64(n)
	v.mu.Unlock()
}

// ForgetChildren drops what the advancer keeps of the children of
// cluster's runs ("" every cluster's): their next advance reads them all.
// The orchestrator calls it when it takes a cluster's lease.
func (a *Advancer) ForgetChildren(cluster string) { a.views.forgetCluster(cluster) }

// CheckChildReads, on, makes every read of a run's children from what
// changed also read them all and compare: an advance whose two views
// differ fails. An engine made in a test binary checks (NewEngine);
// benchmarks turn it off.
func (a *Advancer) CheckChildReads(on bool) {
	a.views.mu.Lock()
	a.views.check = on
	a.views.mu.Unlock()
}

// ChildRowsRead counts the children the advancer read since it was made.
func (a *Advancer) ChildRowsRead() int64 {
	a.views.mu.Lock()
	defer a.views.mu.Unlock()
	return a.views.rows
}

// runChildren is run r's children as the planner reads them, read in rd
// from what changed since the run's view. committed says rd reads
// committed data (a Read, not a write transaction): then the view takes
// what was read.
func (a *Advancer) runChildren(ctx context.Context, rd store.Reader, r *store.Run, committed bool) ([]Child, error) {
	v := &a.views
	cv := v.view(r.ID, r.ClusterID)
	v.mu.Lock()
	check := v.check
	v.mu.Unlock()
	cv.mu.Lock()
	defer cv.mu.Unlock()
	out, err := cv.read(ctx, rd, r, committed, v)
	if err == nil && check {
		var full []Child
		if full, err = children(ctx, rd, r.ID, r.ApprovedBy); err == nil && !sameView(out, full) {
			err = fmt.Errorf("run %s: the children read from what changed differ from a full read:\n%+v\nfull:\n%+v",
				r.ID, out, full)
		}
	}
	if err != nil {
		cv.kids, cv.at, cv.seq = nil, nil, 0
		v.forget(r.ID)
		return nil, err
	}
	return out, nil
}

// sameView reports whether two lists of children are the same (an empty
// list and none are).
func sameView(a, b []Child) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// read reads run r's children into a list, from the view and what
// changed since, and keeps them in the view when committed; cv.mu is held.
func (cv *childView) read(ctx context.Context, rd store.Reader, r *store.Run, committed bool, v *childViews) ([]Child, error) {
	if cv.at == nil || cv.approvedBy != r.ApprovedBy || cv.cluster != r.ClusterID {
		recs, err := rd.RunChildrenBrief(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		v.count(len(recs))
		fresh := childView{cluster: r.ClusterID, approvedBy: r.ApprovedBy, at: make(map[string]int, len(recs)),
			kids: make([]keptChild, 0, len(recs))}
		fresh.take(recs)
		if committed {
			cv.cluster, cv.approvedBy, cv.seq, cv.kids, cv.at = fresh.cluster, fresh.approvedBy, fresh.seq, fresh.kids, fresh.at
		}
		return fresh.list(), nil
	}
	recs, err := rd.RunChildrenSince(ctx, r.ID, cv.seq)
	if err != nil {
		return nil, err
	}
	v.count(len(recs))
	if len(recs) == 0 {
		return cv.list(), nil
	}
	if committed {
		cv.take(recs)
		return cv.list(), nil
	}
	// A write transaction's own view: the kept one with the changes on
	// top, the kept one left as it is.
	own := childView{approvedBy: cv.approvedBy, seq: cv.seq, kids: slices.Clone(cv.kids), at: make(map[string]int, len(cv.at))}
	for id, i := range cv.at {
		own.at[id] = i
	}
	own.take(recs)
	return own.list(), nil
}

// take adds or replaces the children recs, read in the order of their
// numbers, and keeps the order of a full read (by created_ts, then as
// written: a run's children are written one after another).
func (cv *childView) take(recs []store.Record) {
	sorted := true
	for i := range recs {
		rec := &recs[i]
		cv.seq = max(cv.seq, rec.RunSeq)
		k := keptChild{Child: ChildOf(rec, cv.approvedBy), created: rec.CreatedTS}
		if j, ok := cv.at[rec.ID]; ok {
			cv.kids[j] = k
			continue
		}
		if n := len(cv.kids); n > 0 && k.created.Before(cv.kids[n-1].created) {
			sorted = false
		}
		cv.at[rec.ID] = len(cv.kids)
		cv.kids = append(cv.kids, k)
	}
	if !sorted {
		slices.SortStableFunc(cv.kids, func(a, b keptChild) int { return a.created.Compare(b.created) })
		for i := range cv.kids {
			cv.at[cv.kids[i].ID] = i
		}
	}
}

// list is the view's children, a copy.
func (cv *childView) list() []Child {
	out := make([]Child, len(cv.kids))
	for i := range cv.kids {
		out[i] = cv.kids[i].Child
	}
	return out
}
