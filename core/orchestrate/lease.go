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

// passContext returns the context of one pass of the cluster, or ok false
// when another replica holds its lease.
func (o *Orchestrator) passContext(ctx context.Context, id string) (context.Context, context.CancelFunc, bool) {
	if o.cfg.Leases == nil {
		return ctx, func() {}, true
	}
	return o.cfg.Leases.PassContext(ctx, id)
}
