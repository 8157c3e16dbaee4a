package api

import (
	"fmt"
	"net"
	"syscall"
)

// peerCred asks the kernel who is on the other end of c (SO_PEERCRED).
func peerCred(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, fmt.Errorf("%w: %v", errNoPeer, err)
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return Peer{}, fmt.Errorf("%w: %v", errNoPeer, err)
	}
	if credErr != nil {
		return Peer{}, fmt.Errorf("%w: %v", errNoPeer, credErr)
	}
	return PeerOfUID(int(cred.Uid)), nil
}
