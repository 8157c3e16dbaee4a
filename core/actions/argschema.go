package actions

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/argschema"
)

// schemas compiles each distinct args_schema the nodes announce once. It
// only memoizes a pure function of the schema's bytes, and holds at most
// maxSchemas of them (docs/architecture.md, "Runs and playbooks").
var schemas = argschema.NewCache(maxSchemas)

const maxSchemas = 256

// CheckArgs checks args of kind against the args_schema node announced for
// that kind, if any: nil, or ErrUnprocessable naming the node and the
// fields. ignore, when not nil, leaves out fields whose values are known
// only when the action is made (argschema.Schema.Validate).
func CheckArgs(node *store.Node, kind string, args json.RawMessage, ignore func(field string) bool) error {
	if err := ValidateArgs(node, kind, args, ignore); err != nil {
		return fmt.Errorf("%w: node %s: %v", ErrUnprocessable, node.ID, err)
	}
	return nil
}

// SchemaDigest fingerprints the args_schema node announced for kind (none
// has its own digest): args checked against a schema with the same digest
// need no check again.
func SchemaDigest(node *store.Node, kind string) string {
	raw, ok := node.ArgsSchemas[kind]
	if !ok {
		return "none"
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// RefusedSchemas returns, by kind, why the core refuses the args_schema a
// node announced (argschema.Compile: not a schema, or past its bounds of
// cost): nil when it takes them all. A kind whose schema is refused is
// unusable on that node (CheckArgs refuses every action of it) until the
// node announces one the core takes; other nodes and kinds are unaffected.
func RefusedSchemas(announced map[string]json.RawMessage) map[string]string {
	var out map[string]string
	for kind, raw := range announced {
		if _, err := schemas.Get(raw); err != nil {
			if out == nil {
				out = map[string]string{}
			}
			out[kind] = err.Error()
		}
	}
	return out
}

// ValidateArgs is CheckArgs's check: the schema's refusal as it is (it
// names the fields, not the node).
func ValidateArgs(node *store.Node, kind string, args json.RawMessage, ignore func(field string) bool) error {
	raw, ok := node.ArgsSchemas[kind]
	if !ok {
		return nil
	}
	s, err := schemas.Get(raw)
	if err != nil {
		return fmt.Errorf("%s is unusable on this node until it announces an args_schema the core takes: %v", kind, err)
	}
	return s.Validate(args, ignore)
}
