package handlers

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// hasExited reports whether the process has exited, as the kernel says
// now: it looks (WNOWAIT) without collecting the exit status, which stays
// for the goroutine that waits for the process.
func (p *process) hasExited() bool {
	if p.exited() {
		return true
	}
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, p.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if errors.Is(err, unix.ECHILD) {
		return true // its waiter has just collected it
	}
	return err == nil && info.Signo == int32(syscall.SIGCHLD)
}
