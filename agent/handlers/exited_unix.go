//go:build unix && !linux

package handlers

// hasExited reports whether the process has exited. Outside Linux it is
// known once the goroutine that waits for the process has run.
func (p *process) hasExited() bool { return p.exited() }
