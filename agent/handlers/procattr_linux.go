package handlers

import "syscall"

// procAttr puts an external command in its own process group, so that cancel
// and timeout reach the whole tree, and has the kernel kill it when the agent
// dies (Pdeathsig), so a restarted agent never finds it running beside a
// second copy (docs/guarantees.md, guarantee 5).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to every process of the group pgid (negative).
func signalGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(pgid, sig)
}
