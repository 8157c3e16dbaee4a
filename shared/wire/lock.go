package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Lock scopes (Lock.Scope).
const (
	// LockCluster: the lock is the run's cluster's (the default).
	LockCluster = "cluster"
	// LockGlobal: one lock across every cluster.
	LockGlobal = "global"
)

// Lock is a lock a run or a stage takes (docs/runs-and-playbooks.md,
// "Locks across runs"): another run taking the same lock waits until the
// holder ends. It is written as a name ("db": per cluster) or as an
// object ({"name": "db", "scope": "global"}); it is shown as the object.
type Lock struct {
	Name string `json:"name"`
	// Scope is "cluster" (the default, "" too) or "global".
	Scope string `json:"scope,omitempty"`
}

// UnmarshalJSON reads a lock as a name or as an object with name and
// scope, refusing any other field.
func (l *Lock) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*l = Lock{}
		return json.Unmarshal(b, &l.Name)
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New(`a lock is a name ("db") or {"name": "db", "scope": "cluster" or "global"}`)
	}
	type plain Lock
	var v plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	*l = Lock(v)
	return nil
}

// KindLock is a lock a stage takes because kinds its steps run declare it
// (the core's kinds: configuration): the lock, and those kinds.
type KindLock struct {
	Name  string   `json:"name"`
	Scope string   `json:"scope,omitempty"`
	Kinds []string `json:"kinds"`
}
