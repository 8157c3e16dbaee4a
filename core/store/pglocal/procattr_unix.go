//go:build unix && !linux

package pglocal

import "syscall"

// serverAttr runs the server as cred in its own process group. Outside Linux
// there is no Pdeathsig: a server whose parent crashed keeps running until
// someone stops it.
func serverAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}
