package runs

// SetPlanned has e call fn once a run is planned, before it is stored.
func SetPlanned(e *Engine, fn func()) { e.Creator.planned = fn }

// SetAdvancePlanned has e call fn once a run's next step is decided,
// before it is stored.
func SetAdvancePlanned(e *Engine, fn func()) { e.Advancer.planned = fn }
