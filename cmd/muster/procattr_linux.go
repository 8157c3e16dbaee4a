package main

import "syscall"

// replicaAttr has the kernel send a `muster dev --ha` replica SIGTERM when
// the dev process dies, even by SIGKILL.
func replicaAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
