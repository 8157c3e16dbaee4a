package ops

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// RunResult is a run as a change left it, with the children it has (what
// its answer shows).
type RunResult struct {
	Run    *store.Run
	Counts []store.ChildCount
	// Approval is where the approval the run waits for stands (nil: none).
	Approval *wire.Approval
}

// View is the run as the API shows it.
func (r RunResult) View() wire.Run {
	v := runs.View(r.Run, r.Counts)
	v.Approval = r.Approval
	return v
}

// CreateRun creates a run. It is planned outside the write transaction
// (runs.Engine.CreateIn); one that starts at once syncs its cluster, to push
// its first wave.
func (o *Ops) CreateRun(ctx context.Context, c Caller, req *wire.CreateRunRequest) (RunResult, error) {
	if err := Authorize(c, auth.Create); err != nil {
		return RunResult{}, err
	}
	if err := checkNotBefore(req.NotBefore, o.now()); err != nil {
		return RunResult{}, err
	}
	if err := o.authorizeCluster(ctx, c, auth.Create, req.ClusterID); err != nil {
		return RunResult{}, err
	}
	var out RunResult
	run, err := o.cfg.Runs.CreateIn(ctx, o.st, req, c.actor(""), out.countChildren(ctx))
	if err != nil {
		return RunResult{}, err
	}
	out.Run = run
	o.nudgeNewRun(out)
	return out, nil
}

// RetryRun makes a new run over the failed and skipped nodes of a finished
// run, waiting for approval as any run: from "failed"
// (wire.RetryFromFailed), each failed node from its failed step; from "",
// from its first step.
func (o *Ops) RetryRun(ctx context.Context, c Caller, ref, from string) (RunResult, error) {
	if err := Authorize(c, auth.Create); err != nil {
		return RunResult{}, err
	}
	out, err := o.inRun(ctx, c, auth.Create, ref, func(tx store.Tx, id string) (*store.Run, error) {
		return o.cfg.Runs.RetryFrom(ctx, tx, id, c.actor(""), from)
	})
	if err != nil {
		return RunResult{}, err
	}
	o.nudgeNewRun(out)
	return out, nil
}

// StartPlaybook creates a run from a stored playbook's plan, planned
// outside the write transaction (playbook.StartIn).
func (o *Ops) StartPlaybook(ctx context.Context, c Caller, name string, req *wire.PlanRequest) (RunResult, error) {
	if err := Authorize(c, auth.Create); err != nil {
		return RunResult{}, err
	}
	if req.Document != "" {
		// A document not stored starts as an ad-hoc run, exactly as its
		// plan showed (StartDocument).
		pb, err := ParseDocument(c, req)
		if err != nil {
			return RunResult{}, err
		}
		if pb.Name != name {
			return RunResult{}, BadRequest("the document names playbook %q, not %q", pb.Name, name)
		}
		return o.startDocument(ctx, c, pb, req)
	}
	pb, version, err := playbook.Load(ctx, o.st, name, req)
	if err != nil {
		return RunResult{}, err
	}
	return o.StartLoaded(ctx, c, pb, version, req)
}

// StartLoaded is StartPlaybook of a playbook version already loaded
// (LoadPlaybook), whose plan the request's digest must still be.
func (o *Ops) StartLoaded(ctx context.Context, c Caller, pb *playbook.Playbook, version int, req *wire.PlanRequest) (RunResult, error) {
	if err := Authorize(c, auth.Create); err != nil {
		return RunResult{}, err
	}
	if err := checkNotBefore(req.NotBefore, o.now()); err != nil {
		return RunResult{}, err
	}
	if err := o.authorizeCluster(ctx, c, auth.Create, req.ClusterID); err != nil {
		return RunResult{}, err
	}
	var out RunResult
	run, err := playbook.StartIn(ctx, o.st, o.cfg.Runs, pb, version, req, c.actor(""), out.countChildren(ctx))
	if err != nil {
		return RunResult{}, err
	}
	out.Run = run
	o.nudgeNewRun(out)
	return out, nil
}

// ParseDocument reads the playbook document of an ad-hoc run (its stages,
// params and lock as a playbook's), which only a caller that may create
// may plan or start.
func ParseDocument(c Caller, req *wire.PlanRequest) (*playbook.Playbook, error) {
	if err := Authorize(c, auth.Create); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Document) == "" {
		return nil, BadRequest("document: write the run's stages, as a playbook's")
	}
	if req.Version != 0 {
		return nil, BadRequest("give a document or a version, not both")
	}
	return playbook.Parse([]byte(req.Document))
}

// PlanDocument is the plan of an ad-hoc run written as a playbook
// document (ParseDocument), by the plan function a stored playbook's plan
// uses (Plan): its digest is the one StartDocument needs.
func (o *Ops) PlanDocument(ctx context.Context, c Caller, req *wire.PlanRequest) (wire.Plan, error) {
	pb, err := ParseDocument(c, req)
	if err != nil {
		return wire.Plan{}, err
	}
	return o.Plan(ctx, c, pb, 0, req)
}

// StartDocument starts an ad-hoc run from a playbook document that is not
// stored (ParseDocument), exactly as its plan showed: req.Digest must
// still be the plan's (playbook.StartDocumentIn). It waits for approval as
// any run.
func (o *Ops) StartDocument(ctx context.Context, c Caller, req *wire.PlanRequest) (RunResult, error) {
	pb, err := ParseDocument(c, req)
	if err != nil {
		return RunResult{}, err
	}
	return o.startDocument(ctx, c, pb, req)
}

func (o *Ops) startDocument(ctx context.Context, c Caller, pb *playbook.Playbook, req *wire.PlanRequest) (RunResult, error) {
	if err := checkNotBefore(req.NotBefore, o.now()); err != nil {
		return RunResult{}, err
	}
	if err := o.authorizeCluster(ctx, c, auth.Create, req.ClusterID); err != nil {
		return RunResult{}, err
	}
	var out RunResult
	run, err := playbook.StartDocumentIn(ctx, o.st, o.cfg.Runs, pb, req, c.actor(""), out.countChildren(ctx))
	if err != nil {
		return RunResult{}, err
	}
	out.Run = run
	o.nudgeNewRun(out)
	return out, nil
}

// LoadPlaybook reads the playbook a plan or a start names: the stored
// version asked for, or the document of the request (which only a caller
// that may apply playbooks may plan).
func (o *Ops) LoadPlaybook(ctx context.Context, c Caller, name string, req *wire.PlanRequest) (*playbook.Playbook, int, error) {
	if err := Authorize(c, auth.Read); err != nil {
		return nil, 0, err
	}
	if req.Document != "" && !c.Can(auth.Create) {
		return nil, 0, &ForbiddenError{Caller: c.Name, Roles: c.Roles, Perm: auth.Create, Allowed: auth.Granting(auth.Create),
			Doing: "plan a document that is not stored (apply it first, or ask an operator)"}
	}
	return playbook.Load(ctx, o.st, name, req)
}

// PlanPlaybook answers what starting the playbook would create, with the
// nodes the cluster's disruption budget holds back marked; it writes
// nothing.
func (o *Ops) PlanPlaybook(ctx context.Context, c Caller, name string, req *wire.PlanRequest) (wire.Plan, error) {
	pb, version, err := o.LoadPlaybook(ctx, c, name, req)
	if err != nil {
		return wire.Plan{}, err
	}
	return o.Plan(ctx, c, pb, version, req)
}

// Plan is the plan of a loaded playbook (LoadPlaybook), with the nodes the
// cluster's disruption budget, as it is now, holds back marked. Its digest
// is the one a start of the same request (parameters, version, not-before
// and limit) is approved under.
func (o *Ops) Plan(ctx context.Context, c Caller, pb *playbook.Playbook, version int, req *wire.PlanRequest) (wire.Plan, error) {
	if err := Authorize(c, auth.Read); err != nil {
		return wire.Plan{}, err
	}
	if err := checkNotBefore(req.NotBefore, o.now()); err != nil {
		return wire.Plan{}, err
	}
	var out wire.Plan
	pol := o.cfg.Budget.Load()
	err := o.st.Read(ctx, func(r store.Reader) error {
		if err := authorizeIn(ctx, r, c, auth.Read, req.ClusterID); err != nil {
			return err
		}
		p, err := pb.Plan(ctx, r, version, req, o.cfg.Runs.KindLocks())
		if err != nil {
			return err
		}
		out = p.Wire()
		nodes, err := r.Nodes(ctx, p.Cluster)
		if err != nil {
			return err
		}
		open, err := r.OpenActions(ctx, p.Cluster, "")
		if err != nil {
			return err
		}
		procs, err := runs.InFlight(ctx, r, p.Cluster, o.now(), pol.Procedure)
		if err != nil {
			return err
		}
		playbook.MarkHeld(&out, pol, nodes, open, procs.InFlight)
		return nil
	})
	return out, err
}

// ApplyPlaybook stores a new version of a playbook; changed is false when
// the document is the newest version already.
func (o *Ops) ApplyPlaybook(ctx context.Context, c Caller, doc string) (p *store.Playbook, changed bool, err error) {
	// A playbook is no cluster's: a version applied runs wherever a run
	// of the playbook starts, so applying one takes create on every
	// cluster, not on some.
	if err := AuthorizeEverywhere(c, auth.Create); err != nil {
		return nil, false, err
	}
	parsed, err := playbook.Parse([]byte(doc))
	if err != nil {
		return nil, false, err
	}
	err = o.st.Update(ctx, func(tx store.Tx) error {
		var err error
		p, changed, err = playbook.Apply(ctx, tx, doc, parsed, c.Name)
		return err
	})
	return p, changed, err
}

// nudgeNewRun syncs the cluster of a new run that starts at once, to push
// its first wave.
func (o *Ops) nudgeNewRun(r RunResult) {
	if len(r.Counts) > 0 {
		o.nudgeCluster(r.Run.ClusterID)
	}
}

// countChildren counts into r, in the write transaction that stored or
// changed run, the children the run has.
func (r *RunResult) countChildren(ctx context.Context) func(tx store.Tx, run *store.Run) error {
	return func(tx store.Tx, run *store.Run) error {
		var err error
		r.Counts, err = tx.RunChildCounts(ctx, []string{run.ID})
		return err
	}
}

// checkNotBefore refuses a not_before the schedule rules refuse at now
// (past, or too far ahead).
func checkNotBefore(t *time.Time, now time.Time) error {
	if t == nil {
		return nil
	}
	if err := schedule.CheckNotBefore(*t, now); err != nil {
		return BadRequest("%v", err)
	}
	return nil
}

// ApproveRun records an approval of a run (an approver on its cluster
// other than its requester and its playbook version's applier) at the
// first level not met the caller is eligible for; once every level is met
// it is approved and starts, in the same transaction. With a digest, only
// if it is the run's digest now (what the approver was shown), else a
// conflict.
func (o *Ops) ApproveRun(ctx context.Context, c Caller, ref, digest string) (RunResult, error) {
	return o.changeRun(ctx, c, auth.Approve, ref, func(tx store.Tx, id string) (*store.Run, error) {
		r, err := o.runOn(ctx, tx, c, auth.Approve, id)
		if err != nil {
			return nil, err
		}
		if err := o.cfg.Runs.MayApprove(ctx, tx, r, digest, c.Name); err != nil {
			return nil, err
		}
		return o.inLevels(ctx, tx, c, r, store.SubjectRun, func() (*store.Run, error) {
			return o.cfg.Runs.Approve(ctx, tx, id, digest, c.actor(""))
		})
	})
}

// runOn reads run id and checks that c holds p on its cluster.
func (o *Ops) runOn(ctx context.Context, tx store.Tx, c Caller, p auth.Permission, id string) (*store.Run, error) {
	r, err := tx.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	return r, AuthorizeOn(c, p, r.ClusterID)
}

// inLevels records c's approval of run r's subject kind and, once every
// level is met, makes the change (done); until then r stays as it is.
func (o *Ops) inLevels(ctx context.Context, tx store.Tx, c Caller, r *store.Run, kind string,
	done func() (*store.Run, error)) (*store.Run, error) {
	s, err := o.runSubject(ctx, tx, r, kind)
	if err != nil {
		return nil, err
	}
	t, err := o.recordApproval(ctx, tx, c, &s)
	if err != nil || !t.Satisfied {
		return r, err
	}
	return done()
}

// RejectRun rejects a run waiting for approval (a caller eligible at one of
// its levels).
func (o *Ops) RejectRun(ctx context.Context, c Caller, ref, reason string) (RunResult, error) {
	if err := checkReasonAs(c, auth.Reject, reason, false); err != nil {
		return RunResult{}, err
	}
	return o.changeRun(ctx, c, auth.Reject, ref, func(tx store.Tx, id string) (*store.Run, error) {
		r, err := o.runOn(ctx, tx, c, auth.Reject, id)
		if err != nil {
			return nil, err
		}
		if r.State == store.RunPendingApprove {
			s, err := o.runSubject(ctx, tx, r, store.SubjectRun)
			if err != nil {
				return nil, err
			}
			if err := o.checkReject(ctx, tx, c, s); err != nil {
				return nil, err
			}
		}
		return o.cfg.Runs.Reject(ctx, tx, id, c.actor(""), reason)
	})
}

// PauseRun pauses a run: no new node starts.
func (o *Ops) PauseRun(ctx context.Context, c Caller, ref string) (RunResult, error) {
	return o.changeRun(ctx, c, auth.Cancel, ref, func(tx store.Tx, id string) (*store.Run, error) {
		return o.cfg.Runs.Pause(ctx, tx, id, c.actor(""))
	})
}

// ResumeRun resumes a paused run: a resume that forgives nothing is an
// operator's (runs.Engine.MayResume); one that forgives errors past a
// stage's max_errors (runs.Engine.Forgives, whatever paused the run: a
// run paused by hand whose nodes then failed forgives them too) takes a
// reason the run records and is made in levels, as an approval of the
// resume (SubjectResume): the run goes on once every level is met.
func (o *Ops) ResumeRun(ctx context.Context, c Caller, ref, reason string) (RunResult, error) {
	if err := checkReasonAs(c, auth.Continue, reason, false); err != nil {
		return RunResult{}, err
	}
	return o.changeRun(ctx, c, auth.Continue, ref, func(tx store.Tx, id string) (*store.Run, error) {
		r, err := o.runOn(ctx, tx, c, auth.Read, id)
		if err != nil {
			return nil, err
		}
		mayApprove := AuthorizeOn(c, auth.Approve, r.ClusterID) == nil
		mayOperate := AuthorizeOn(c, auth.Cancel, r.ClusterID) == nil
		forgives, err := o.cfg.Runs.Forgives(ctx, tx, r)
		if err != nil {
			return nil, err
		}
		if len(forgives) == 0 {
			return o.cfg.Runs.ResumeAs(ctx, tx, id, c.actor(reason), mayApprove, mayOperate)
		}
		if err := o.cfg.Runs.MayResume(ctx, tx, r, c.Name, mayApprove, mayOperate); err != nil {
			return nil, err
		}
		if err := AuthorizeOn(c, auth.Approve, r.ClusterID); err != nil {
			return nil, err
		}
		// Every approval of a forgiveness gives its reason, not only the
		// one that meets the last level.
		if strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%w: resuming run %s forgives its errors: a reason is required, recorded with the run",
				actions.ErrUnprocessable, r.ID)
		}
		return o.inLevels(ctx, tx, c, r, store.SubjectResume, func() (*store.Run, error) {
			return o.cfg.Runs.ResumeAs(ctx, tx, id, c.actor(reason), mayApprove, mayOperate)
		})
	})
}

// PromoteRun lets a run paused after its canary go on once every level of
// its approval is met by approvals of the promote (an approver other than
// the requester and the applier, each, with a reason the run records).
func (o *Ops) PromoteRun(ctx context.Context, c Caller, ref, reason string) (RunResult, error) {
	if err := checkReasonAs(c, auth.Approve, reason, false); err != nil {
		return RunResult{}, err
	}
	return o.changeRun(ctx, c, auth.Approve, ref, func(tx store.Tx, id string) (*store.Run, error) {
		r, err := o.runOn(ctx, tx, c, auth.Approve, id)
		if err != nil {
			return nil, err
		}
		if err := o.cfg.Runs.MayPromote(ctx, tx, r, c.Name, true); err != nil {
			return nil, err
		}
		if strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%w: promoting the canary of run %s takes a reason, recorded with the run",
				actions.ErrUnprocessable, r.ID)
		}
		return o.inLevels(ctx, tx, c, r, store.SubjectPromote, func() (*store.Run, error) {
			return o.cfg.Runs.Promote(ctx, tx, id, c.actor(reason), true)
		})
	})
}

// CancelRun cancels a run and its open children.
func (o *Ops) CancelRun(ctx context.Context, c Caller, ref, reason string) (RunResult, error) {
	if err := checkReasonAs(c, auth.Cancel, reason, false); err != nil {
		return RunResult{}, err
	}
	return o.changeRun(ctx, c, auth.Cancel, ref, func(tx store.Tx, id string) (*store.Run, error) {
		return o.cfg.Runs.Cancel(ctx, tx, id, c.actor(""), reason)
	})
}

// MarkRunUrgent lets a run's children pass the cluster's closed maintenance
// window, never a freeze; the reason is required.
func (o *Ops) MarkRunUrgent(ctx context.Context, c Caller, ref, reason string) (RunResult, error) {
	if err := checkReasonAs(c, auth.Approve, reason, true); err != nil {
		return RunResult{}, err
	}
	return o.changeRun(ctx, c, auth.Approve, ref, func(tx store.Tx, id string) (*store.Run, error) {
		return o.cfg.Runs.MarkUrgent(ctx, tx, id, c.actor(reason))
	})
}

// MayResume and MayPromote say, for a page that offers the buttons, whether
// the caller may resume or promote run now (nil) or why not.
func (o *Ops) MayResume(ctx context.Context, rd store.Reader, c Caller, run *store.Run) error {
	return o.cfg.Runs.MayResume(ctx, rd, run, c.Name, AuthorizeOn(c, auth.Approve, run.ClusterID) == nil,
		AuthorizeOn(c, auth.Cancel, run.ClusterID) == nil)
}

// MayPromote: see MayResume.
func (o *Ops) MayPromote(ctx context.Context, rd store.Reader, c Caller, run *store.Run) error {
	return o.cfg.Runs.MayPromote(ctx, rd, run, c.Name, AuthorizeOn(c, auth.Approve, run.ClusterID) == nil)
}

// changeRun authorizes p, then makes one engine change on the run named by
// ref in one transaction, and syncs the run's cluster: a run's change moves
// a wave, not one node.
func (o *Ops) changeRun(ctx context.Context, c Caller, p auth.Permission, ref string,
	fn func(tx store.Tx, id string) (*store.Run, error)) (RunResult, error) {
	if err := Authorize(c, p); err != nil {
		return RunResult{}, err
	}
	out, err := o.inRun(ctx, c, p, ref, fn)
	if err != nil {
		return RunResult{}, err
	}
	o.nudgeCluster(out.Run.ClusterID)
	return out, nil
}

// inRun runs fn on the run named by ref in one transaction, when the
// caller holds p on the run's cluster, and counts the children of the run
// fn returns there.
func (o *Ops) inRun(ctx context.Context, c Caller, p auth.Permission, ref string,
	fn func(tx store.Tx, id string) (*store.Run, error)) (RunResult, error) {
	var out RunResult
	err := o.st.Update(ctx, func(tx store.Tx) error {
		found, err := ResolveRunFor(ctx, tx, c, ref)
		if err != nil {
			return err
		}
		if err := authorizeIn(ctx, tx, c, p, found.ClusterID); err != nil {
			return err
		}
		if out.Run, err = fn(tx, found.ID); err != nil {
			return err
		}
		if out.Approval, err = o.RunApproval(ctx, tx, out.Run); err != nil {
			return err
		}
		return out.countChildren(ctx)(tx, out.Run)
	})
	return out, err
}

// The bounds of a run's shape (core/runs), for the transports' forms.
const (
	MaxStages = runs.MaxStages
	MaxSteps  = runs.MaxSteps
)

// CheckNodeArgs checks args of kind against node's args_schema for it (no
// schema: nil), as creating the action will (core/actions): for a form
// that shows the refusal beside its field before anything is planned.
func CheckNodeArgs(node *store.Node, kind string, args []byte) error {
	return actions.ValidateArgs(node, kind, args, nil)
}
