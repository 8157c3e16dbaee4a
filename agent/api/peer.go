package api

import (
	"context"
	"errors"
	"net"
	"os/user"
	"strconv"
)

// Peer is the local user on the other end of the API's Unix socket, as the
// kernel reports it (SO_PEERCRED): nothing the client says is trusted.
type Peer struct {
	UID int
	// User is the login name of UID, or UID in decimal when it has none.
	User string
}

type peerKey struct{}

// peerInfo is what ConnContext learnt of a socket connection.
type peerInfo struct {
	peer Peer
	err  error
}

// ConnContext is the http.Server hook of the agent's listeners: for a Unix
// socket connection it records the caller's uid and user in the context,
// where the API finds them (see peerOf); other connections are left as
// they are. Wrapping connections (a connection cap, TLS) are looked
// through with their NetConn method.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	for {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	var p Peer
	uid, err := peerUID(uc)
	if err == nil {
		p = PeerOfUID(uid)
	}
	return context.WithValue(ctx, peerKey{}, peerInfo{peer: p, err: err})
}

// SocketClient names the caller of a socket connection by its uid ("uid
// 1000"), for the socket's connection guard: a cap per user, not per
// address (every caller has the same). "" when the kernel does not say.
func SocketClient(c net.Conn) string {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ""
	}
	uid, err := peerUID(uc)
	if err != nil {
		return ""
	}
	return "uid " + strconv.Itoa(uid)
}

// peerOf returns what ConnContext recorded: ok is false for a request that
// did not come over the socket.
func peerOf(ctx context.Context) (Peer, bool, error) {
	pi, ok := ctx.Value(peerKey{}).(peerInfo)
	if !ok {
		return Peer{}, false, nil
	}
	return pi.peer, true, pi.err
}

// errNoPeer: the kernel did not say who is on the other end.
var errNoPeer = errors.New("cannot identify the caller on the socket")

// PeerOfUID names a uid: its login name, or the uid in decimal.
func PeerOfUID(uid int) Peer {
	p := Peer{UID: uid, User: strconv.Itoa(uid)}
	if u, err := user.LookupId(p.User); err == nil && u.Username != "" {
		p.User = u.Username
	}
	return p
}
