package api

import (
	"fmt"
	"net"
	"syscall"
)

// peerUID asks the kernel for the uid on the other end of c (SO_PEERCRED).
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errNoPeer, err)
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("%w: %v", errNoPeer, err)
	}
	if credErr != nil {
		return 0, fmt.Errorf("%w: %v", errNoPeer, credErr)
	}
	return int(cred.Uid), nil
}
