//go:build unix && !linux

package handlers

import "syscall"

// procAttr puts an external command in its own process group, so that cancel
// and timeout reach the whole tree. Outside Linux there is no Pdeathsig: a
// command started by an agent that is then SIGKILLed keeps running, which is
// why production agents run on Linux (docs/operations.md, "Platforms").
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to every process of the group pgid (negative).
func signalGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(pgid, sig)
}
