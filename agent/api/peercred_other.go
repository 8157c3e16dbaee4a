//go:build !linux

package api

import (
	"fmt"
	"net"
	"runtime"
)

// peerUID cannot tell who is on the other end of c outside Linux (this
// build has no SO_PEERCRED), so every socket request is refused as coming
// from an unknown caller: the socket API is for Linux agents (docs/operations.md,
// "Platforms").
func peerUID(*net.UnixConn) (int, error) {
	return 0, fmt.Errorf("%w: no SO_PEERCRED on %s", errNoPeer, runtime.GOOS)
}
