package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/store"
)

// ActorConfig is the actor of what the configuration seeds.
const ActorConfig = "config"

// Name is how a kind is written in messages ("approval rule").
func Name(kind string) string { return strings.ReplaceAll(kind, "_", " ") }

// Put stores rec (checked: Check) as its record's next version, by actor
// from addr, with its policy.created or policy.changed event: the one
// write of a record, whoever makes it (the API, muster apply, the
// configuration). It returns the op (store.PolicyOpCreated or Changed).
func Put(ctx context.Context, tx store.Tx, rec *store.PolicyRecord, actor, addr string) (string, error) {
	rec.UpdatedBy = actor
	op, err := tx.PutPolicy(ctx, rec)
	if err != nil {
		return "", err
	}
	typ, verb := store.EventPolicyCreated, "made"
	if op == store.PolicyOpChanged {
		typ, verb = store.EventPolicyChanged, "changed"
	}
	msg := fmt.Sprintf("%s %s %s by %s: %s", Name(rec.Kind), rec.ID, verb, actor, Describe(rec.Kind, rec.Spec))
	if rec.Reason != "" {
		msg += "; why: " + rec.Reason
	}
	return op, tx.AppendEvent(ctx, &store.Event{Type: typ, Actor: actor, ClientAddr: addr, ClusterID: rec.ClusterID, Message: msg,
		Data: map[string]any{"kind": rec.Kind, "id": rec.ID, "spec": rec.Spec, "source": rec.Source, "reason": rec.Reason,
			"version": rec.Version}})
}

// Delete deletes the live record kind/id at at, by actor from addr, for
// reason, with its policy.deleted event. Deleting one deleted already is
// store.ErrNotFound.
func Delete(ctx context.Context, tx store.Tx, kind, id string, at time.Time, actor, addr, reason string) (*store.PolicyRecord, error) {
	cur, err := tx.Policy(ctx, kind, id)
	if err != nil {
		return nil, err
	}
	if cur.DeletedTS != nil {
		return nil, fmt.Errorf("%s %q was deleted by %s: %w", Name(kind), id, cur.DeletedBy, store.ErrNotFound)
	}
	if _, err := tx.DeletePolicy(ctx, kind, id, at, actor, reason); err != nil {
		return nil, err
	}
	cur.DeletedTS, cur.DeletedBy, cur.DeleteReason = &at, actor, reason
	cur.Version++
	return cur, tx.AppendEvent(ctx, &store.Event{Type: store.EventPolicyDeleted, Actor: actor, ClientAddr: addr, ClusterID: cur.ClusterID,
		Message: fmt.Sprintf("%s %s deleted by %s: %s; why: %s", Name(kind), id, actor, Describe(kind, cur.Spec), reason),
		Data:    map[string]any{"kind": kind, "id": id, "spec": cur.Spec, "source": cur.Source, "reason": reason}})
}

// Seed makes the store hold what the configuration declares: next are the
// records of this replica's file (Source "config", ids derived from what
// they say, Check'ed). A record the store lacks is made. At a reload (old:
// the records of the file before), a record the file changed or removed
// that the store still holds as the file had it is changed or deleted:
// editing the file and sending SIGHUP is a change someone made. A record
// of the file that a reload deleted (DeletedBy ActorConfig) is made again
// (a reverted file brings it back); one a person deleted stays deleted,
// as drift. Anything
// else the file and the store disagree on is drift, returned one line
// each: the store is followed, whatever the file says.
func Seed(ctx context.Context, tx store.Tx, old, next []store.PolicyRecord, now time.Time) ([]string, error) {
	type key struct{ kind, id string }
	was := map[key]store.PolicyRecord{}
	for _, r := range old {
		was[key{r.Kind, r.ID}] = r
	}
	want := map[key]bool{}
	var drift []string
	for _, r := range next {
		k := key{r.Kind, r.ID}
		want[k] = true
		cur, err := tx.Policy(ctx, r.Kind, r.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			rec := r
			rec.Source, rec.UpdatedTS, rec.Reason = store.SourceConfig, now, "declared in the configuration"
			if _, err := Put(ctx, tx, &rec, ActorConfig, ""); err != nil {
				return nil, err
			}
			continue
		case err != nil:
			return nil, err
		}
		if cur.DeletedTS != nil && cur.DeletedBy == ActorConfig {
			// Deleted by a reload that removed it from the file, not by
			// a person: the file declares it again, so it is made again
			// (a revert A -> B -> A leaves what A declares live).
			rec := r
			rec.Source, rec.UpdatedTS, rec.Reason = store.SourceConfig, now, "declared in the configuration again"
			if _, err := Put(ctx, tx, &rec, ActorConfig, ""); err != nil {
				return nil, err
			}
			continue
		}
		o, inOld := was[k]
		if inOld && o.Spec != r.Spec && cur.DeletedTS == nil && cur.Spec == o.Spec && cur.Source == store.SourceConfig {
			rec := r
			rec.Source, rec.UpdatedTS, rec.Reason = store.SourceConfig, now, "changed in the configuration file at a reload"
			if _, err := Put(ctx, tx, &rec, ActorConfig, ""); err != nil {
				return nil, err
			}
			continue
		}
		switch {
		case cur.DeletedTS != nil:
			drift = append(drift, fmt.Sprintf("%s %s (%s) is in the file but was deleted by %s: %s", Name(r.Kind), r.ID,
				Describe(r.Kind, r.Spec), cur.DeletedBy, cur.DeleteReason))
		case cur.Spec != r.Spec:
			drift = append(drift, fmt.Sprintf("%s %s is %s in the file but %s in the store (by %s)", Name(r.Kind), r.ID,
				Describe(r.Kind, r.Spec), Describe(r.Kind, cur.Spec), cur.UpdatedBy))
		}
	}
	for k, o := range was {
		if want[k] {
			continue
		}
		cur, err := tx.Policy(ctx, k.kind, k.id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if cur.DeletedTS == nil && cur.Source == store.SourceConfig && cur.Spec == o.Spec {
			if _, err := Delete(ctx, tx, k.kind, k.id, now, ActorConfig, "", "removed from the configuration file at a reload"); err != nil {
				return nil, err
			}
		}
	}
	stored, err := tx.Policies(ctx, store.PolicyQuery{Live: true})
	if err != nil {
		return nil, err
	}
	for _, r := range stored {
		if r.Source == store.SourceConfig && !want[key{r.Kind, r.ID}] {
			drift = append(drift, fmt.Sprintf("%s %s (%s) is in the store from a configuration but not in this file", Name(r.Kind),
				r.ID, Describe(r.Kind, r.Spec)))
		}
	}
	slices.Sort(drift)
	return drift, nil
}
