package pglocal

import "syscall"

// serverAttr runs the server as cred in its own process group, and has the
// kernel send it SIGQUIT (PostgreSQL's immediate shutdown) when its parent
// dies.
func serverAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
}
