package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/onalert"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// ApproveOnAlert approves the on_alert playbook of a cluster as it is now
// (approvers): from then on the core starts it when missing nodes make
// the cluster ALERT, until the playbook or its params change. digest,
// when given, must be the one the approver was shown (409 otherwise). It
// returns the view of the cluster's on_alert playbook.
func (o *Ops) ApproveOnAlert(ctx context.Context, c Caller, clusterID, digest string) (*wire.OnAlert, error) {
	if err := Authorize(c, auth.Approve); err != nil {
		return nil, err
	}
	if err := o.authorizeCluster(ctx, c, auth.Approve, clusterID); err != nil {
		return nil, err
	}
	e, ok := o.cfg.Members.Load()[clusterID]
	if !ok || e.OnAlert == nil {
		return nil, fmt.Errorf("cluster %s: %w: %w", clusterID, onalert.ErrNone, store.ErrNotFound)
	}
	var out *wire.OnAlert
	err := o.st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Cluster(ctx, clusterID); err != nil {
			return err
		}
		satisfied, err := o.onAlertApproval(ctx, tx, c, clusterID, e.OnAlert, digest)
		if err != nil {
			return err
		}
		if !satisfied {
			out, err = o.OnAlertView(ctx, tx, clusterID)
			return err
		}
		_, err = onalert.Approve(ctx, tx, clusterID, e.OnAlert, digest, c.actor(""), o.now())
		if errors.Is(err, onalert.ErrMoved) {
			return fmt.Errorf("%w: %w", ErrConflict, err)
		}
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("the on_alert playbook of cluster %s: %w", clusterID, err)
		}
		if err != nil {
			return err
		}
		out, err = o.OnAlertView(ctx, tx, clusterID)
		return err
	})
	return out, err
}

// onAlertApproval checks and records c's approval of the on_alert
// playbook a of cluster clusterID as schedules' are (ApproveSchedule): not
// by the person who applied its playbook version (approval.Policy.
// MayApprove, four eyes over the content), at the first approval level not
// met c is eligible for (recordApproval). It reports whether every level
// is met.
func (o *Ops) onAlertApproval(ctx context.Context, tx store.Tx, c Caller, clusterID string, a *nodes.OnAlert, digest string) (bool, error) {
	pb, cur, err := onalert.Current(ctx, tx, clusterID, a)
	if errors.Is(err, store.ErrNotFound) {
		return false, fmt.Errorf("the on_alert playbook of cluster %s: %w", clusterID, err)
	}
	if err != nil {
		return false, err
	}
	if digest != "" && digest != cur {
		return false, fmt.Errorf("%w: %w: digest %.12s is not the on_alert playbook's now (%.12s): look at it again",
			ErrConflict, onalert.ErrMoved, digest, cur)
	}
	pol := o.cfg.Policy.Load()
	if pol.MayApprove("", pb.CreatedBy, c.Name, true) == approval.AppliedPlaybook {
		return false, fmt.Errorf("%w: %s applied playbook %s version %d and may not approve it as cluster %s's on_alert playbook",
			ErrForbidden, c.Name, pb.Name, pb.Version, clusterID)
	}
	s := subject{kind: store.SubjectOnAlert, id: clusterID, cluster: clusterID,
		name: "the on_alert playbook of cluster " + clusterID, event: store.EventOnAlertApprovalRecorded,
		work: approval.Work{Levels: levelsOf(pol, nil, clusterID), Digest: cur, Applier: pb.CreatedBy,
			SelfApproval: pol.SelfApproval, MayApproveOn: o.mayApproveOn(tx, clusterID)}}
	t, err := o.recordApproval(ctx, tx, c, &s)
	return t.Satisfied, err
}

// OnAlertView is the on_alert playbook of a cluster as it stands (nil
// when the cluster names none): what it is, the digest an approval of it
// signs now, whether the approval holds, and the last alert it handled.
func (o *Ops) OnAlertView(ctx context.Context, r store.Reader, clusterID string) (*wire.OnAlert, error) {
	e, ok := o.cfg.Members.Load()[clusterID]
	if !ok || e.OnAlert == nil {
		return nil, nil
	}
	a := e.OnAlert
	out := &wire.OnAlert{Playbook: a.Playbook, Version: a.Version, Params: a.Params}
	pb, cur, err := onalert.Current(ctx, r, clusterID, a)
	switch {
	case errors.Is(err, store.ErrNotFound):
		out.Problem = fmt.Sprintf("playbook %s version %s is not stored", a.Playbook, wire.VersionRef(a.Version))
	case err != nil:
		return nil, err
	default:
		out.PlaybookVersion, out.Digest = pb.Version, cur
	}
	st, err := onalert.State(ctx, r, clusterID)
	if err != nil {
		return nil, err
	}
	out.ApprovedBy, out.ApprovedTS = st.ApprovedBy, st.ApprovedTS
	out.Approved = st.Digest != "" && st.Digest == cur
	switch {
	case out.Problem != "":
	case st.Digest == "":
		out.Problem = "not approved: it will not start (muster cluster approve-on-alert " + clusterID + ")"
	case !out.Approved:
		out.Problem = "the approval by " + st.ApprovedBy + " is void: the playbook or its params changed since"
	}
	out.Alerts, out.AlertSince, out.Missing, out.RunID, out.Outcome = st.Alerts, st.AlertSince, st.Missing, st.RunID, st.Outcome
	if out.Missing == nil {
		out.Missing = []string{}
	}
	out.Outcome = strings.TrimSpace(out.Outcome)
	return out, nil
}
