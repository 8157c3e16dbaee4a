package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/policy"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// Policy records (docs/policy-as-data.md): windows, budgets and approval
// rules, made, changed and deleted here, by hand (PutPolicy, DeletePolicy)
// or declaratively (ApplyPolicy). Who may: a change that only holds work
// (a cluster's first window, a narrower budget) takes auth.Freeze on the
// cluster, as freezing does; one that may let held work go (another
// window, a window changed or deleted, a wider or removed budget) takes
// auth.Unfreeze, as lifting a freeze does. An approval rule governs work on
// clusters its glob matches: any change of one takes auth.Grants on every
// cluster (admin). Every change is an event naming who and why; every
// replica follows the store (policy.Watch).

// PolicyView is a stored record as the API shows it.
func PolicyView(r store.PolicyRecord) wire.PolicyRecord {
	return wire.PolicyRecord{Kind: r.Kind, ID: r.ID, ClusterID: r.ClusterID, Spec: json.RawMessage(r.Spec), Source: r.Source,
		Reason: r.Reason, Version: r.Version, CreatedBy: r.CreatedBy, CreatedTS: r.CreatedTS, UpdatedBy: r.UpdatedBy,
		UpdatedTS: r.UpdatedTS, DeletedTS: r.DeletedTS, DeletedBy: r.DeletedBy, DeleteReason: r.DeleteReason}
}

func checkKind(kind string) error {
	if !policy.KnownKind(kind) {
		return fmt.Errorf("policy kind %q: %w", kind, store.ErrNotFound)
	}
	return nil
}

// checkRecord checks a spec of kind for id: a 400 naming what is wrong.
func (o *Ops) checkRecord(kind, id string, spec []byte) (policy.Record, error) {
	r, err := policy.Check(kind, id, spec, o.cfg.MinWindow)
	if err != nil {
		return r, BadRequest("%s %s: %s", policy.Name(kind), id, strings.TrimPrefix(err.Error(), policy.ErrInvalid.Error()+": "))
	}
	return r, nil
}

// authorizeRecord checks that c may replace cur (nil: none) with next
// (nil: delete) in tx, and that a window's or budget's cluster exists.
func authorizeRecord(ctx context.Context, tx store.Reader, c Caller, kind, id string, cur, next *policy.Record) error {
	if kind == store.PolicyApprovalRule {
		return AuthorizeEverywhere(c, auth.Grants)
	}
	cluster := ""
	if next != nil {
		cluster = next.ClusterID
	} else if cur != nil {
		cluster = cur.ClusterID
	}
	others := 0
	if kind == store.PolicyWindow {
		ws, err := tx.Policies(ctx, store.PolicyQuery{Kind: kind, ClusterID: cluster, Live: true})
		if err != nil {
			return err
		}
		for _, w := range ws {
			if w.ID != id {
				others++
			}
		}
		if next != nil && cur == nil && others >= schedule.MaxWindows {
			return fmt.Errorf("%w: cluster %s has %d windows, at most %d", ErrConflict, cluster, others, schedule.MaxWindows)
		}
	}
	perm := auth.Freeze
	if policy.Loosens(kind, cur, next, others) {
		perm = auth.Unfreeze
	}
	if err := authorizeIn(ctx, tx, c, perm, cluster); err != nil {
		return err
	}
	if cur != nil && next != nil && cur.ClusterID != next.ClusterID {
		if err := authorizeIn(ctx, tx, c, auth.Unfreeze, cur.ClusterID); err != nil {
			return err
		}
	}
	if next != nil {
		if _, err := tx.Cluster(ctx, cluster); err != nil {
			return err
		}
	}
	return nil
}

// liveRecord is the live record kind/id of r as checked, or nil.
func liveRecord(ctx context.Context, r store.Reader, kind, id string) (*store.PolicyRecord, *policy.Record, error) {
	cur, err := r.Policy(ctx, kind, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil || cur.DeletedTS != nil {
		return nil, nil, err
	}
	return cur, &policy.Record{ClusterID: cur.ClusterID, Spec: cur.Spec}, nil
}

// mayReuse checks that c may make kind/id, which has no live record,
// again: a deleted one keeps its history under the name, so bringing it
// back in another cluster takes auth.Unfreeze on the cluster it was last
// in, as moving a live one does; a cluster c cannot read refuses it
// without naming the cluster or what the record held.
func mayReuse(ctx context.Context, r store.Reader, c Caller, kind, id, cluster string) error {
	old, err := r.Policy(ctx, kind, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if old.ClusterID == "" || old.ClusterID == cluster {
		return nil
	}
	if err := authorizeIn(ctx, r, c, auth.Unfreeze, old.ClusterID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: %s %s: the name is taken; name it otherwise", ErrConflict, policy.Name(kind), id)
		}
		return err
	}
	return nil
}

// countRules refuses an approval rule beyond policy.MaxRules.
func countRules(ctx context.Context, tx store.Reader, adding int) error {
	rs, err := tx.Policies(ctx, store.PolicyQuery{Kind: store.PolicyApprovalRule, Live: true})
	if err != nil {
		return err
	}
	if len(rs)+adding > policy.MaxRules {
		return fmt.Errorf("%w: %d approval rules, at most %d", ErrConflict, len(rs)+adding, policy.MaxRules)
	}
	return nil
}

// PutPolicy makes or changes the record kind/id (an empty id makes a new
// one) with req's spec, for req's reason.
func (o *Ops) PutPolicy(ctx context.Context, c Caller, kind, id string, req *wire.PutPolicyRequest) (wire.PolicyRecord, error) {
	if err := Authorize(c, auth.Freeze); err != nil {
		return wire.PolicyRecord{}, err
	}
	if err := checkKind(kind); err != nil {
		return wire.PolicyRecord{}, err
	}
	if id == "" {
		id = action.NewID()
	}
	next, err := o.checkRecord(kind, id, req.Spec)
	if err != nil {
		return wire.PolicyRecord{}, err
	}
	if err := checkFreezeReason(req.Reason, "the policy changes"); err != nil {
		return wire.PolicyRecord{}, err
	}
	rec := &store.PolicyRecord{Kind: kind, ID: id, ClusterID: next.ClusterID, Spec: next.Spec, Reason: strings.TrimSpace(req.Reason),
		UpdatedTS: o.now()}
	err = o.st.Update(ctx, func(tx store.Tx) error {
		_, cur, err := liveRecord(ctx, tx, kind, id)
		if err != nil {
			return err
		}
		if err := authorizeRecord(ctx, tx, c, kind, id, cur, &next); err != nil {
			return err
		}
		if cur == nil {
			if err := mayReuse(ctx, tx, c, kind, id, next.ClusterID); err != nil {
				return err
			}
		}
		if kind == store.PolicyApprovalRule && cur == nil {
			if err := countRules(ctx, tx, 1); err != nil {
				return err
			}
		}
		_, err = policy.Put(ctx, tx, rec, c.Name, c.Addr)
		return err
	})
	if err != nil {
		return wire.PolicyRecord{}, err
	}
	if rec.ClusterID != "" {
		o.nudgeCluster(rec.ClusterID)
	}
	return PolicyView(*rec), nil
}

// DeletePolicy deletes the live record kind/id for reason.
func (o *Ops) DeletePolicy(ctx context.Context, c Caller, kind, id, reason string) (wire.PolicyRecord, error) {
	if err := Authorize(c, auth.Freeze); err != nil {
		return wire.PolicyRecord{}, err
	}
	if err := checkKind(kind); err != nil {
		return wire.PolicyRecord{}, err
	}
	if err := checkFreezeReason(reason, "the policy changes"); err != nil {
		return wire.PolicyRecord{}, err
	}
	reason = strings.TrimSpace(reason)
	var out *store.PolicyRecord
	err := o.st.Update(ctx, func(tx store.Tx) error {
		_, cur, err := liveRecord(ctx, tx, kind, id)
		if err != nil {
			return err
		}
		if cur == nil {
			return fmt.Errorf("%s %q: %w", policy.Name(kind), id, store.ErrNotFound)
		}
		if err := authorizeRecord(ctx, tx, c, kind, id, cur, nil); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%s %q: %w", policy.Name(kind), id, store.ErrNotFound)
			}
			return err
		}
		out, err = policy.Delete(ctx, tx, kind, id, o.now(), c.Name, c.Addr, reason)
		return err
	})
	if err != nil {
		return wire.PolicyRecord{}, err
	}
	if out.ClusterID != "" {
		o.nudgeCluster(out.ClusterID)
	}
	return PolicyView(*out), nil
}

// Policies lists the records of kind ("" every kind) of the clusters the
// caller may read (of one when clusterID is set; approval rules are read
// by all): the live ones, or with all, the deleted ones too.
func (o *Ops) Policies(ctx context.Context, c Caller, kind, clusterID string, all bool) ([]wire.PolicyRecord, error) {
	if err := Authorize(c, auth.Read); err != nil {
		return nil, err
	}
	if kind != "" && !policy.KnownKind(kind) {
		return nil, BadRequest("kind %q: want one of %s", kind, strings.Join(policy.Kinds, ", "))
	}
	out := []wire.PolicyRecord{}
	err := o.st.Read(ctx, func(r store.Reader) error {
		v, err := Visibility(ctx, r, c)
		if err != nil {
			return err
		}
		if clusterID != "" {
			if err := v.Check("cluster", clusterID); err != nil {
				return err
			}
		}
		rs, err := r.Policies(ctx, store.PolicyQuery{Kind: kind, ClusterID: clusterID, Live: !all})
		for _, p := range rs {
			if p.ClusterID == "" || v.Has(p.ClusterID) {
				out = append(out, PolicyView(p))
			}
		}
		return err
	})
	return out, err
}

// PolicyHistory lists every change of the record kind/id, oldest first.
func (o *Ops) PolicyHistory(ctx context.Context, c Caller, kind, id string) ([]wire.PolicyChange, error) {
	if err := Authorize(c, auth.Read); err != nil {
		return nil, err
	}
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	out := []wire.PolicyChange{}
	err := o.st.Read(ctx, func(r store.Reader) error {
		p, err := r.Policy(ctx, kind, id)
		if err != nil {
			return err
		}
		v, err := Visibility(ctx, r, c)
		if err != nil {
			return err
		}
		if p.ClusterID != "" && !v.Has(p.ClusterID) {
			return fmt.Errorf("%s %q: %w", policy.Name(kind), id, store.ErrNotFound)
		}
		// A name deleted and made again elsewhere keeps the rows of the
		// cluster it was in: each row is shown only to who reads its.
		hs, err := r.PolicyHistory(ctx, kind, id)
		for _, h := range hs {
			if cl := policy.ClusterOf(kind, id, h.Spec); cl != "" && !v.Has(cl) {
				continue
			}
			out = append(out, wire.PolicyChange{Version: h.Version, Op: h.Op, Spec: json.RawMessage(h.Spec), Source: h.Source,
				Actor: h.Actor, Reason: h.Reason, TS: h.TS})
		}
		return err
	})
	return out, err
}
