package orchestrate

import "context"

// runCtx is the context of the loops: Start's, or one Stop ends before it.
func (o *Orchestrator) runCtx() context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.runCtxV != nil {
		return o.runCtxV
	}
	return o.stopCtx
}

// leaseContext returns the context of one sync of the cluster (or of one
// advance of its runs, or one run watch) under its lease, or ok false when
// another replica holds the lease.
func (o *Orchestrator) leaseContext(ctx context.Context, id string) (context.Context, context.CancelFunc, bool) {
	if o.cfg.Leases == nil {
		return ctx, func() {}, true
	}
	return o.cfg.Leases.PassContext(ctx, id)
}

// Leases tells whether this replica holds a cluster's lease (core/lease).
type Leases interface {
	// PassContext returns the context of one sync of the cluster (the
	// method keeps core/lease's name), which carries the lease's
	// store.Fence and ends when the lease is lost, or ok false when this
	// replica does not hold the lease.
	PassContext(ctx context.Context, clusterID string) (pctx context.Context, done context.CancelFunc, ok bool)
}
