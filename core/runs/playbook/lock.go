package playbook

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/musterhq/muster/shared/wire"
)

// Lock is a lock as written (docs/runs-and-playbooks.md, "Locks across
// runs"): a name ("lock: db", per cluster) or a mapping of name and scope
// ("lock: {name: db, scope: global}").
type Lock struct {
	Name  string
	Scope string
}

// UnmarshalYAML reads a name or a mapping with name and scope, refusing any
// other key.
func (l *Lock) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = Lock{}
		return n.Decode(&l.Name)
	case yaml.MappingNode:
		*l = Lock{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			switch k.Value {
			case "name":
				if err := v.Decode(&l.Name); err != nil {
					return err
				}
			case "scope":
				if err := v.Decode(&l.Scope); err != nil {
					return err
				}
			default:
				return fmt.Errorf("line %d: lock: field %q is not name or scope", k.Line, k.Value)
			}
		}
		return nil
	}
	return fmt.Errorf("line %d: a lock is a name (lock: db) or {name: db, scope: cluster or global}", n.Line)
}

// wire is the lock of a run request (nil for none).
func (l *Lock) wire() *wire.Lock {
	if l == nil {
		return nil
	}
	return &wire.Lock{Name: l.Name, Scope: l.Scope}
}
