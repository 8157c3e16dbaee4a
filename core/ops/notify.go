package ops

import (
	"context"
	"fmt"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/core/store"
)

// Destination is the notification destination in use of that name.
func (o *Ops) Destination(name string) (notify.Destination, error) {
	for _, d := range o.Destinations() {
		if d.Name == name {
			return d, nil
		}
	}
	return notify.Destination{}, fmt.Errorf("notification destination %q: %w", name, store.ErrNotFound)
}

// TestNotify sends a test delivery to a destination now, outside the
// outbox, and answers how it went.
func (o *Ops) TestNotify(ctx context.Context, c Caller, name string) (notify.Result, error) {
	if err := AuthorizeEverywhere(c, auth.Notify); err != nil {
		return notify.Result{}, err
	}
	if _, err := o.Destination(name); err != nil {
		return notify.Result{}, err
	}
	res, _ := o.cfg.Notify.Test(ctx, name, c.Name)
	return res, nil
}

// Redeliver makes a delivery pending again, due now, with its tries
// counted from zero (it goes before the newer deliveries of its
// destination), and wakes the worker.
func (o *Ops) Redeliver(ctx context.Context, c Caller, id int64) (*store.Delivery, error) {
	if err := AuthorizeEverywhere(c, auth.Notify); err != nil {
		return nil, err
	}
	var d *store.Delivery
	err := o.st.Update(ctx, func(tx store.Tx) error {
		var err error
		if d, err = tx.Delivery(ctx, id); err != nil {
			return err
		}
		if _, err := o.Destination(d.Destination); err != nil {
			return err
		}
		t := o.now()
		d.NextTS, d.UpdatedTS, d.LastError, d.LastStatus = t, t, "", 0
		d.State, d.Attempts = store.DeliveryPending, 0
		return tx.UpdateDelivery(ctx, d)
	})
	if err != nil {
		return nil, err
	}
	o.cfg.Notify.Nudge()
	return d, nil
}
