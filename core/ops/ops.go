// Package ops is the core's operations layer (docs/architecture.md, "The
// operations layer"): one function for every user verb, whichever transport
// asks for it. Each one authorizes the caller against its roles as they are
// now, reads the reloadable policy once, makes the change through the
// domain package that owns it (core/actions, core/runs, core/schedule/recur,
// core/nodes, core/auth, core/enroll, core/runs/playbook) in one store
// transaction, and then nudges the narrowest scope that changed: the node
// when one node has something to push, the cluster when what waited for a
// node may go now. Its errors map to one Problem (Describe) that the API
// and the web UI show alike.
//
// core/api and core/ui decode, call and render: neither opens a write
// transaction (TestTransportsOpenNoWriteTransaction).
package ops

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/enroll"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/schedule/recur"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// Caller is who asks for an operation: a person's name (a token's, or the
// single sign-on claim's), a token's roles as stored now (a role change or
// a revocation applies at once), the address of the peer, the group claims
// of the identity provider, and the grants the person holds itself and
// through its teams (Identify resolves them on every request).
type Caller struct {
	Name   string
	Roles  []string // a token's global roles: grants on "*" (unchanged meaning)
	Addr   string
	Groups []string     // group claims from the identity provider (nil for tokens)
	Grants []auth.Grant // resolved at authentication: the person's and their teams' grants

	// labels are the labels of every cluster, by id, when a grant has a
	// label selector (Identify reads them).
	labels map[string]map[string]string
}

// actor is the caller as the actor of a change, with the reason it gave.
func (c Caller) actor(note string) actions.Actor {
	return actions.Actor{Name: c.Name, Addr: c.Addr, Note: strings.TrimSpace(note)}
}

// Can reports whether one of the caller's grants gives p on some cluster.
func (c Caller) Can(p auth.Permission) bool { return auth.Holds(c.grants(), p) }

// Nudger asks the orchestrator for a full sync of one cluster now, or for a
// sync of one node alone (which does not wait for a full sync under way).
// It must not block: operations call it after their transaction committed.
type Nudger interface {
	Nudge(clusterID string)
	NudgeNode(clusterID, nodeID string)
}

// Notifier is what the operations need of the notification worker
// (core/notify).
type Notifier interface {
	Destinations() []notify.Destination
	Test(ctx context.Context, name, actor string) (notify.Result, bool)
	Nudge()
}

var _ Notifier = (*notify.Worker)(nil)

// Config is what the operations act with. Store is required; every other
// field has a default.
type Config struct {
	Store store.Store
	// Policy decides which actions need approval and who may approve
	// them, as it is at each call (a reload replaces it).
	Policy *live.Value[approval.Policy]
	// Budget is the clusters' disruption budgets (a plan marks what they
	// hold back); nil: none.
	Budget *live.Value[budget.Policy]
	// Members is the clusters' declared membership (docs/architecture.md,
	// "Declared membership"); nil: none declared.
	Members *live.Value[nodes.Membership]
	// Rules makes every action change (the core shares one with the
	// orchestrator); nil builds one from Policy.
	Rules *actions.Rules
	// Runs makes every change to runs; nil builds one from Policy.
	Runs *runs.Engine
	// Schedules makes every change to schedules; nil builds one from Policy.
	Schedules *recur.Service
	// Enroll signs, renews and revokes agent certificates; nil: enrollment
	// is off (enroll.ErrDisabled).
	Enroll *enroll.Service
	// Notify sends test deliveries and lists the destinations; nil: none.
	Notify Notifier
	// Nudge is told what to sync after a change; nil: nothing is nudged.
	Nudge Nudger
	// MinWindow, when set, replaces the least duration of a maintenance
	// window (schedule.ParseCalendar; the end-to-end tests set it).
	MinWindow time.Duration
	// Now returns the time; nil is time.Now.
	Now func() time.Time
}

// Ops runs the user verbs. Build it with New; it is safe for concurrent use.
type Ops struct {
	st  store.Store
	cfg Config
}

// New builds the operations over cfg.Store.
func New(cfg Config) *Ops {
	if cfg.Policy == nil {
		cfg.Policy = live.New(approval.DefaultPolicy())
	}
	if cfg.Budget == nil {
		cfg.Budget = live.New(budget.Policy{})
	}
	if cfg.Members == nil {
		cfg.Members = live.New(nodes.Membership{})
	}
	if cfg.Rules == nil {
		cfg.Rules = &actions.Rules{Policy: cfg.Policy}
	}
	if cfg.Runs == nil {
		cfg.Runs = runs.NewEngine(cfg.Policy, cfg.Rules, nil)
		cfg.Runs.SetKindLocks(cfg.Budget)
	}
	if cfg.Schedules == nil {
		cfg.Schedules = &recur.Service{Policy: cfg.Policy, KindLocks: cfg.Runs.KindLocks}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Ops{st: cfg.Store, cfg: cfg}
}

// Policy is the approval policy the operations decide with: the one the
// pages show who may approve by.
func (o *Ops) Policy() *live.Value[approval.Policy] { return o.cfg.Policy }

// Budget is the clusters' disruption budgets the operations plan with: the
// one the pages show in use.
func (o *Ops) Budget() *live.Value[budget.Policy] { return o.cfg.Budget }

// Members is the clusters' declared membership as it is now.
func (o *Ops) Members() *live.Value[nodes.Membership] { return o.cfg.Members }

// Destinations are the notification destinations in use.
func (o *Ops) Destinations() []notify.Destination {
	if o.cfg.Notify == nil {
		return nil
	}
	return o.cfg.Notify.Destinations()
}

// Authorize refuses a caller none of whose grants gives p on any cluster,
// naming the roles that would: the route-level check of a permission. What
// acts on one cluster checks AuthorizeOn too. A permission over what is
// global (auth.Global) needs a grant of it on every cluster.
func Authorize(c Caller, p auth.Permission) error {
	if auth.Global(p) {
		return AuthorizeEverywhere(c, p)
	}
	if c.Can(p) {
		return nil
	}
	return &ForbiddenError{Caller: c.Name, Roles: c.held(), Perm: p, Allowed: auth.Granting(p)}
}

func (o *Ops) now() time.Time { return o.cfg.Now().UTC() }

// nudgeNode asks for a sync of one node: it has something to push or to
// cancel, and it goes at once, not after a full sync under way
// (docs/architecture.md, "Node syncs and reactive progress").
func (o *Ops) nudgeNode(clusterID, nodeID string) {
	if o.cfg.Nudge != nil {
		o.cfg.Nudge.NudgeNode(clusterID, nodeID)
	}
}

// nudgeCluster asks for a full sync of a cluster: more than one node may
// go now (a run's wave, what waited for an undrained node).
func (o *Ops) nudgeCluster(clusterID string) {
	if o.cfg.Nudge != nil {
		o.cfg.Nudge.Nudge(clusterID)
	}
}

// checkReasonAs is checkReason for a caller about to do a verb that needs
// p: who holds p on no cluster hears 403 first, whatever the reason.
func checkReasonAs(c Caller, p auth.Permission, reason string, required bool) error {
	if err := Authorize(c, p); err != nil {
		return err
	}
	return checkReason(reason, required)
}

// checkReason is the one rule of a reason a person gives (an approval, a
// rejection, a cancel, a drain, a revocation, an urgent mark): at most
// wire.MaxReason bytes of valid UTF-8 with no control character (a newline
// included), spaces around it aside; required refuses an empty one.
func checkReason(reason string, required bool) error {
	trimmed := strings.TrimSpace(reason)
	switch {
	case required && trimmed == "":
		return BadRequest("reason is required: say why it may not wait for the window")
	case len(trimmed) > wire.MaxReason:
		return BadRequest("reason is longer than %d bytes", wire.MaxReason)
	case strings.ContainsFunc(trimmed, unicode.IsControl) || !utf8.ValidString(reason):
		return BadRequest("reason contains control characters")
	}
	return nil
}

// ResolveAction finds the action named by an id or a unique prefix of at
// least action.MinPrefix characters.
func ResolveAction(ctx context.Context, r store.Reader, ref string) (*store.Record, error) {
	ids, err := resolvePrefix(ref, "action", func(p string) ([]string, error) { return r.ActionIDsWithPrefix(ctx, p, 10) })
	if err != nil {
		return nil, err
	}
	return r.Action(ctx, ids)
}

// ResolveActionFor is ResolveAction for a caller: an action of a cluster
// it may not read does not exist for it, as an id or as a prefix's match
// (so an ambiguous prefix never names it).
func ResolveActionFor(ctx context.Context, r store.Reader, c Caller, ref string) (*store.Record, error) {
	if err := c.loadLabels(ctx, r); err != nil {
		return nil, err
	}
	readable := func(id string) (bool, error) {
		rec, err := r.Action(ctx, id)
		if err != nil {
			return false, err
		}
		return AuthorizeOn(c, auth.Read, rec.ClusterID) == nil, nil
	}
	id, err := resolvePrefix(ref, "action", func(p string) ([]string, error) {
		return keepIDs(r.ActionIDsWithPrefix(ctx, p, 10))(readable)
	})
	if err != nil {
		return nil, err
	}
	rec, err := r.Action(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := AuthorizeOn(c, auth.Read, rec.ClusterID); err != nil {
		return nil, fmt.Errorf("action %q: %w", ref, store.ErrNotFound)
	}
	return rec, nil
}

// ResolveRunFor is ResolveActionFor of runs.
func ResolveRunFor(ctx context.Context, r store.Reader, c Caller, ref string) (*store.Run, error) {
	if err := c.loadLabels(ctx, r); err != nil {
		return nil, err
	}
	readable := func(id string) (bool, error) {
		run, err := r.Run(ctx, id)
		if err != nil {
			return false, err
		}
		return AuthorizeOn(c, auth.Read, run.ClusterID) == nil, nil
	}
	id, err := resolvePrefix(ref, "run", func(p string) ([]string, error) {
		return keepIDs(r.RunIDsWithPrefix(ctx, p, 10))(readable)
	})
	if err != nil {
		return nil, err
	}
	run, err := r.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := AuthorizeOn(c, auth.Read, run.ClusterID); err != nil {
		return nil, fmt.Errorf("run %q: %w", ref, store.ErrNotFound)
	}
	return run, nil
}

// keepIDs keeps the ids a prefix matched that keep accepts.
func keepIDs(ids []string, err error) func(keep func(id string) (bool, error)) ([]string, error) {
	return func(keep func(id string) (bool, error)) ([]string, error) {
		if err != nil {
			return nil, err
		}
		out := ids[:0]
		for _, id := range ids {
			ok, err := keep(id)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, id)
			}
		}
		return out, nil
	}
}

// ResolveRun finds the run named by an id or a unique prefix.
func ResolveRun(ctx context.Context, r store.Reader, ref string) (*store.Run, error) {
	id, err := resolvePrefix(ref, "run", func(p string) ([]string, error) { return r.RunIDsWithPrefix(ctx, p, 10) })
	if err != nil {
		return nil, err
	}
	return r.Run(ctx, id)
}

// resolvePrefix turns ref (an id, or a prefix of one) into the one id it
// names, with find listing the ids of a prefix.
func resolvePrefix(ref, what string, find func(prefix string) ([]string, error)) (string, error) {
	if action.ValidID(ref) {
		return ref, nil
	}
	if len(ref) < action.MinPrefix {
		return "", BadRequest("id prefix %q is shorter than %d characters", ref, action.MinPrefix)
	}
	if strings.Trim(strings.ToLower(ref), "0123456789abcdef-") != "" || len(ref) > 36 {
		return "", fmt.Errorf("%s %q: %w", what, ref, store.ErrNotFound)
	}
	ids, err := find(strings.ToLower(ref))
	if err != nil {
		return "", err
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("%s %q: %w", what, ref, store.ErrNotFound)
	case 1:
		return ids[0], nil
	}
	return "", &ambiguousError{Prefix: ref, What: what + "s", Matches: ids}
}
