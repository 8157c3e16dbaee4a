package recur

// SetPlanned has w call fn once an occurrence's run is planned, before the
// write transaction.
func SetPlanned(w *Worker, fn func()) { w.planned = fn }
