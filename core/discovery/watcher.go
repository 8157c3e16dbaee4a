package discovery

import (
	"context"
	"log/slog"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/startstop"
)

// NewWatcher returns Watch as a shared/startstop part: it starts nothing;
// Start runs Watch until Stop or the end of its context.
func NewWatcher(st store.Store, log *slog.Logger, nudge func(clusterID string), extra []string, sources ...Source) *startstop.Func {
	return startstop.NewFunc(func(ctx context.Context) {
		_ = Watch(ctx, st, log, nudge, extra, sources...)
	})
}
