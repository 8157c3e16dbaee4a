package handlers

import (
	"fmt"
	"os/user"
	"strconv"
	"syscall"
)

// credential resolves User and Group (names or numeric ids) into the
// credential the commands start with.
func (e External) credential() (*syscall.Credential, error) {
	u, err := lookupUser(e.User)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q is not a number", e.User, u.Uid)
	}
	cred := &syscall.Credential{Uid: uint32(uid)}
	if e.Group != "" {
		g, err := lookupGroup(e.Group)
		if err != nil {
			return nil, err
		}
		gid, err := strconv.ParseUint(g.Gid, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("group %s: gid %q is not a number", e.Group, g.Gid)
		}
		cred.Gid = uint32(gid)
		cred.Groups = []uint32{} // that group only: none of the agent's
		return cred, nil
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: gid %q is not a number", e.User, u.Gid)
	}
	cred.Gid = uint32(gid)
	cred.Groups = []uint32{}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if n, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(n) != cred.Gid {
				cred.Groups = append(cred.Groups, uint32(n))
			}
		}
	}
	return cred, nil
}

func lookupUser(name string) (*user.User, error) {
	if _, err := strconv.ParseUint(name, 10, 32); err == nil {
		if u, err := user.LookupId(name); err == nil {
			return u, nil
		}
		// A numeric id with no passwd entry runs as that uid, in group 0's
		// stead its own number: refuse it, a group cannot be guessed.
		return nil, fmt.Errorf("no user with uid %s", name)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("no user %q", name)
	}
	return u, nil
}

func lookupGroup(name string) (*user.Group, error) {
	if _, err := strconv.ParseUint(name, 10, 32); err == nil {
		if g, err := user.LookupGroupId(name); err == nil {
			return g, nil
		}
		return &user.Group{Gid: name, Name: name}, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return nil, fmt.Errorf("no group %q", name)
	}
	return g, nil
}
