package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/musterhq/muster/core/auth"
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
		_, err := onalert.Approve(ctx, tx, clusterID, e.OnAlert, digest, c.actor(""), o.now())
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
