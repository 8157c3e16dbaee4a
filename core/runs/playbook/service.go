package playbook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// Digest fingerprints a document as applied.
func Digest(doc string) string {
	sum := sha256.Sum256([]byte(doc))
	return hex.EncodeToString(sum[:])
}

// Apply stores doc, parsed as p (Parse it before the transaction: parsing
// is the costly part), as a new version of its playbook, unless it is the
// newest version already (changed is false then, and nothing is written).
func Apply(ctx context.Context, tx store.Tx, doc string, p *Playbook, who string) (*store.Playbook, bool, error) {
	return ApplyFrom(ctx, tx, doc, p, who, "")
}

// ApplyFrom is Apply marking the new version with source ("file:NAME" when
// muster apply -f NAME publishes it, "" by hand).
func ApplyFrom(ctx context.Context, tx store.Tx, doc string, p *Playbook, who, source string) (*store.Playbook, bool, error) {
	latest, err := tx.Playbook(ctx, p.Name, 0)
	switch {
	case errors.Is(err, store.ErrNotFound):
		latest = nil
	case err != nil:
		return nil, false, err
	}
	digest := Digest(doc)
	if latest != nil && latest.Digest == digest {
		return latest, false, nil
	}
	v := &store.Playbook{Name: p.Name, Version: 1, Description: p.Description, Document: doc, Digest: digest, CreatedBy: who,
		Source: source}
	if latest != nil {
		v.Version = latest.Version + 1
	}
	if err := tx.InsertPlaybook(ctx, v); err != nil {
		return nil, false, err
	}
	err = tx.AppendEvent(ctx, &store.Event{TS: v.CreatedTS, Type: store.EventPlaybookApplied, Actor: who,
		Message: fmt.Sprintf("%s applied playbook %s version %d", who, v.Name, v.Version),
		Data:    map[string]any{"playbook": v.Name, "version": v.Version, "digest": digest, "source": source}})
	return v, true, err
}

// Planned is a plan and what starting it stores.
type Planned struct {
	Name    string
	Version int
	Cluster string
	Values  map[string]any
	Stages  []store.RunStage
	// Nodes is the runs.NodesDigest of the nodes it was planned on.
	Nodes string
	// Lock is the lock the run takes from its start to its end (nil: none).
	Lock *store.Lock
	// NotBefore is when the run would start (nil: at once), Limit the node
	// subset it was planned on (nil: every node the targets pick).
	NotBefore *time.Time
	Limit     []string
}

// Digest is what approving the planned run approves (runs.DigestRunLocked):
// its not-before, and the nodes its limit kept, are in it, as they are in
// the digest of the run a start stores.
func (p *Planned) Digest() string {
	return runs.DigestRunLocked(p.Cluster, p.Stages, 0, p.NotBefore, p.Lock)
}

// Load reads the playbook a plan or a start names: the document in req when
// it has one (version 0), else the stored version asked for (the newest
// when 0). The store is read in a short transaction of its own and the
// document parsed after it.
func Load(ctx context.Context, st store.Store, name string, req *wire.PlanRequest) (*Playbook, int, error) {
	if req.Version < 0 {
		return nil, 0, fmt.Errorf("%w: version must be positive, not %d", ErrInvalid, req.Version)
	}
	doc, version := req.Document, 0
	if doc == "" {
		err := st.Read(ctx, func(r store.Reader) error {
			stored, err := r.Playbook(ctx, name, req.Version)
			if err == nil {
				doc, version = stored.Document, stored.Version
			}
			return err
		})
		if err != nil {
			return nil, 0, err
		}
	} else if req.Version != 0 {
		return nil, 0, fmt.Errorf("%w: give a document or a version, not both", ErrInvalid)
	}
	p, err := Parse([]byte(doc))
	if err != nil {
		return nil, 0, err
	}
	if p.Name != name {
		return nil, 0, fmt.Errorf("%w: the document names playbook %q, not %q", ErrInvalid, p.Name, name)
	}
	return p, version, nil
}

// Plan renders the playbook (version, as Load gave it) with req's
// parameters and resolves it against the cluster's nodes, read in r, as a
// run would be, its stages taking the locks their kinds declare (locks;
// nil: none).
func (p *Playbook) Plan(ctx context.Context, r store.Reader, version int, req *wire.PlanRequest, locks runs.KindLocks) (*Planned, error) {
	run, values, err := p.request(req)
	if err != nil {
		return nil, err
	}
	nodes, err := runs.ReadNodes(ctx, r, req.ClusterID)
	if err != nil {
		return nil, err
	}
	return p.planOn(version, req, run, values, nodes, locks)
}

// PlanIn is Plan with the nodes read in a short read of st, and the
// rendering and resolving done outside any transaction.
func (p *Playbook) PlanIn(ctx context.Context, st store.Store, version int, req *wire.PlanRequest, locks runs.KindLocks) (*Planned, error) {
	run, values, err := p.request(req)
	if err != nil {
		return nil, err
	}
	var nodes []store.Node
	err = st.Read(ctx, func(r store.Reader) error {
		var err error
		nodes, err = runs.ReadNodes(ctx, r, req.ClusterID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return p.planOn(version, req, run, values, nodes, locks)
}

// PlanOn is Plan on nodes, the cluster's nodes read by the caller (who
// keeps their runs.NodesDigest to re-check, whether the plan succeeds or
// not).
func (p *Playbook) PlanOn(version int, req *wire.PlanRequest, nodes []store.Node, locks runs.KindLocks) (*Planned, error) {
	run, values, err := p.request(req)
	if err != nil {
		return nil, err
	}
	return p.planOn(version, req, run, values, nodes, locks)
}

// request renders the playbook with req's parameters into a checked run
// request.
func (p *Playbook) request(req *wire.PlanRequest) (*wire.CreateRunRequest, map[string]any, error) {
	values, err := p.Values(req.Params)
	if err != nil {
		return nil, nil, err
	}
	specs, err := p.Render(values)
	if err != nil {
		return nil, nil, err
	}
	run := &wire.CreateRunRequest{ClusterID: req.ClusterID, Stages: specs, Lock: p.Lock.wire()}
	if err := runs.Check(run); err != nil {
		return nil, nil, err
	}
	return run, values, nil
}

func (p *Playbook) planOn(version int, req *wire.PlanRequest, run *wire.CreateRunRequest, values map[string]any,
	nodes []store.Node, locks runs.KindLocks) (*Planned, error) {
	stages, err := runs.Resolve(run, nodes, req.Limit, locks)
	if err != nil {
		return nil, err
	}
	d, err := runs.NodesDigest(nodes)
	if err != nil {
		return nil, err
	}
	var lock *store.Lock
	if run.Lock != nil {
		lock = &store.Lock{Name: run.Lock.Name, Scope: run.Lock.Scope}
	}
	out := &Planned{Name: p.Name, Version: version, Cluster: run.ClusterID, Values: values, Stages: stages,
		Nodes: d, Lock: lock, Limit: slices.Clone(req.Limit)}
	if req.NotBefore != nil {
		out.NotBefore = action.TimePtr(*req.NotBefore)
	}
	return out, nil
}

// Wire shows a plan: every child by stage and wave, in the order the run
// would create them within each stage; for a stage with steps, each node's
// steps, then its rollback steps (made only if the node fails), the canary
// nodes and where the canary pause falls.
func (p *Planned) Wire() wire.Plan {
	out := wire.Plan{Playbook: p.Name, Version: p.Version, ClusterID: p.Cluster, Params: p.Values,
		Digest: p.Digest(), NotBefore: p.NotBefore, Limit: p.Limit, Stages: []wire.Stage{}, Children: []wire.PlanChild{}}
	if p.Lock != nil {
		out.Lock = &wire.Lock{Name: p.Lock.Name, Scope: p.Lock.Scope}
	}
	for _, st := range p.Stages {
		out.Stages = append(out.Stages, wire.Stage{Name: st.Name, Kind: st.Kind, Args: st.Args, Target: wire.Target(st.Target),
			Nodes: st.Nodes, MaxConcurrency: st.MaxConcurrency, MaxErrors: st.MaxErrors, OnFailure: st.OnFailure,
			DependsOn: st.DependsOn, TimeoutS: st.TimeoutS, State: st.State,
			Steps: runs.StepSpecs(st.Steps), Rollback: runs.StepSpecs(st.Rollback), Canary: st.Canary, SoakS: st.SoakS,
			Unavailable: st.Unavailable, UnavailableTimeoutS: st.UnavailableTimeoutS, Lock: runs.WireLock(st.Lock),
			KindLocks: runs.WireKindLocks(&st), IncludeFailed: st.IncludeFailed, AutoPromoteAfterS: st.AutoPromoteAfterS,
			AbortOn: st.AbortOn, Follow: st.Follow})
		conc := st.MaxConcurrency.Ceil(len(st.Nodes))
		for j, n := range st.Nodes {
			if len(st.Steps) == 0 {
				out.Children = append(out.Children, wire.PlanChild{Stage: st.Name, Wave: runs.Wave(j, conc), NodeID: n,
					Kind: st.Kind, Args: st.Args})
				continue
			}
			// A procedure: each node's steps in order, then the rollback
			// steps it would run if it failed, their args as written (the
			// run's own templates render as it goes).
			canary := j < st.Canary
			for _, sp := range st.Steps {
				out.Children = append(out.Children, wire.PlanChild{Stage: st.Name, Wave: runs.Wave(j, conc), NodeID: n,
					Step: sp.Name, Kind: sp.Kind, Args: sp.Args, When: sp.When, Canary: canary})
			}
			for _, sp := range st.Rollback {
				out.Children = append(out.Children, wire.PlanChild{Stage: st.Name, Wave: runs.Wave(j, conc), NodeID: n,
					Step: sp.Name, Kind: sp.Kind, Args: sp.Args, When: sp.When, Rollback: true, Canary: canary})
			}
			if canary && j == st.Canary-1 {
				out.Children[len(out.Children)-1].CanaryPause = true
			}
		}
	}
	return out
}

// ErrMoved is a start whose plan is no longer the one its caller saw: the
// playbook has a newer version, or the plan's digest changed.
var ErrMoved = errors.New("not the plan that was shown")

// Start creates a run from exactly the plan of the stored playbook p (as
// Load gave it, with its version). req names what the caller's plan showed
// (wire.PlanRequest): a version that must still be the newest, or the plan's
// digest; ErrMoved otherwise. It plans in tx: StartIn plans outside the
// write transaction.
func Start(ctx context.Context, tx store.Tx, e *runs.Engine, p *Playbook, version int, req *wire.PlanRequest, who actions.Actor) (*store.Run, error) {
	if err := checkStart(version, req); err != nil {
		return nil, err
	}
	plan, err := p.Plan(ctx, tx, version, req, e.KindLocks())
	if err != nil {
		return nil, err
	}
	return startPlanned(ctx, tx, e, plan, req, who)
}

// StartIn is Start with the plan made outside the write transaction, as
// runs.Engine.CreateIn does; after (if not nil) runs in the transaction
// that stores the run.
func StartIn(ctx context.Context, st store.Store, e *runs.Engine, p *Playbook, version int, req *wire.PlanRequest,
	who actions.Actor, after func(tx store.Tx, r *store.Run) error) (*store.Run, error) {
	if err := checkStart(version, req); err != nil {
		return nil, err
	}
	plan := func() (*Planned, error) { return p.PlanIn(ctx, st, version, req, e.KindLocks()) }
	return runs.Replanning(ctx, st, plan, func(tx store.Tx, plan *Planned) (*store.Run, error) {
		r, err := startPlanned(ctx, tx, e, plan, req, who)
		if err != nil || after == nil {
			return r, err
		}
		return r, after(tx, r)
	})
}

// StartDocumentIn starts the run of a playbook document that is not
// stored (p, parsed from req.Document) as an ad-hoc run: no playbook is
// recorded on it. req.Digest, the digest its plan showed, is required and
// must still be the plan's, on the cluster's nodes as they are in the
// write transaction (else ErrMoved and nothing starts).
func StartDocumentIn(ctx context.Context, st store.Store, e *runs.Engine, p *Playbook, req *wire.PlanRequest,
	who actions.Actor, after func(tx store.Tx, r *store.Run) error) (*store.Run, error) {
	if req.Version != 0 {
		return nil, fmt.Errorf("%w: give a document or a version, not both", ErrInvalid)
	}
	if req.Digest == "" {
		return nil, fmt.Errorf("%w: give the digest that the plan showed: a run of a document starts only as planned", ErrInvalid)
	}
	plan := func() (*Planned, error) { return p.PlanIn(ctx, st, 0, req, e.KindLocks()) }
	return runs.Replanning(ctx, st, plan, func(tx store.Tx, plan *Planned) (*store.Run, error) {
		if err := (&runs.Planned{Cluster: plan.Cluster, Nodes: plan.Nodes}).Recheck(ctx, tx); err != nil {
			return nil, err
		}
		if d := plan.Digest(); d != req.Digest {
			return nil, fmt.Errorf("%w: the plan changed: this document, with these parameters on the cluster's nodes now, "+
				"plans to digest %s, not %.64q: plan it again", ErrMoved, d, req.Digest)
		}
		r, err := e.InsertAt(ctx, tx, plan.Cluster, plan.Stages, "", 0, plan.NotBefore, plan.Lock, who)
		if err != nil || after == nil {
			return r, err
		}
		return r, after(tx, r)
	})
}

func checkStart(version int, req *wire.PlanRequest) error {
	if strings.TrimSpace(req.Document) != "" || version == 0 {
		return fmt.Errorf("%w: a run starts from a stored playbook: apply the document first", ErrInvalid)
	}
	if req.Version == 0 && req.Digest == "" {
		return fmt.Errorf("%w: give the version or the digest that the plan showed (muster playbook plan prints both)", ErrInvalid)
	}
	return nil
}

// startPlanned stores the run of plan, in the write transaction: the
// playbook's newest version and the cluster's nodes must still be those
// the plan was made with.
func startPlanned(ctx context.Context, tx store.Tx, e *runs.Engine, plan *Planned, req *wire.PlanRequest, who actions.Actor) (*store.Run, error) {
	if req.Digest == "" {
		latest, err := tx.Playbook(ctx, plan.Name, 0)
		if err != nil {
			return nil, err
		}
		if latest.Version != plan.Version {
			return nil, fmt.Errorf("%w: playbook %s is at version %d now, not %d (applied by %s): plan it again",
				ErrMoved, plan.Name, latest.Version, plan.Version, latest.CreatedBy)
		}
	}
	if err := (&runs.Planned{Cluster: plan.Cluster, Nodes: plan.Nodes}).Recheck(ctx, tx); err != nil {
		return nil, err
	}
	if req.Digest != "" {
		if d := plan.Digest(); d != req.Digest {
			return nil, fmt.Errorf("%w: the plan changed: version %d of playbook %s, with these parameters on the cluster's nodes now, "+
				"plans to digest %s, not %.64q: plan it again, and start it with the same parameters as the plan",
				ErrMoved, plan.Version, plan.Name, d, req.Digest)
		}
	}
	return e.InsertAt(ctx, tx, plan.Cluster, plan.Stages, plan.Name, plan.Version, plan.NotBefore, plan.Lock, who)
}

// MarkHeld fills, in a plan, the children the disruption budget would hold
// back if the run started now: each wave of a disruptive stage is played
// against the cluster's budget in use (its unavailable nodes), the children
// admitted one by one; a child over the room left is marked with why. The
// waves of a stage are taken as ending before the next starts, and other
// stages as not running at the same time: the plan shows the budget's room
// now, not a schedule. inFlight are the nodes in flight now in procedures
// the budget holds whole (runs.InFlight); every step of such a stage
// counts, whatever its kind (budget.Policy.Procedure).
func MarkHeld(p *wire.Plan, pol budget.Policy, nodes []store.Node, open []store.Record, inFlight map[string]bool) {
	u := pol.UsageWith(p.ClusterID, nodes, open, inFlight)
	if u == nil {
		return
	}
	whole := map[string]bool{} // stages whose every step counts
	for _, st := range p.Stages {
		var kinds []string
		for _, sp := range append(slices.Clone(st.Steps), st.Rollback...) {
			kinds = append(kinds, sp.Kind)
		}
		whole[st.Name] = len(st.Steps) > 0 && pol.Procedure(kinds)
	}
	byStageWave := map[string][]int{}
	for i, ch := range p.Children {
		if pol.Disruptive(ch.Kind) || whole[ch.Stage] {
			key := fmt.Sprintf("%s\x00%d", ch.Stage, ch.Wave)
			byStageWave[key] = append(byStageWave[key], i)
		}
	}
	for _, idx := range byStageWave {
		taken := map[string]bool{}
		var earlier []string // taken, in wave order
		for _, i := range idx {
			ch := &p.Children[i]
			if taken[ch.NodeID] {
				continue // another step of a node this wave already holds
			}
			if _, down := u.Unavailable[ch.NodeID]; down {
				ch.Held = fmt.Sprintf("%s: the node is %s", budget.HeldPrefix, u.Unavailable[ch.NodeID])
				continue
			}
			if len(u.Unavailable)+len(taken) >= u.Max {
				ch.Held = u.HeldReasonWith(earlier)
				continue
			}
			taken[ch.NodeID] = true
			earlier = append(earlier, ch.NodeID)
		}
	}
}
