package runs

// SetPlanned has e call fn once a run is planned, before it is stored.
func SetPlanned(e *Engine, fn func()) { e.planned = fn }
