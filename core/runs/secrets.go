package runs

import (
	"fmt"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/secret"
)

// Secrets (docs/architecture.md, "Secrets"): a step's args may reference
// {{ secret "NAME" }}; the run keeps the reference, the node's agent
// resolves it. A node that does not announce a secret a step of its stage
// references would fail that step: the run is refused before any step runs
// (as for a kind the node lacks), naming the node and the secret.

// checkSecrets refuses step of stage when a node of ids (that announced
// its kinds) lacks a secret its args reference. A core-side step's secrets
// are the core's (core_steps.secrets), checked where it sends them.
func checkSecrets(stage string, step *store.RunStep, ids []string, byID map[string]*store.Node) error {
	if IsCoreKind(step.Kind) {
		return nil
	}
	names, err := secret.FindArgs(step.Args)
	if err != nil {
		return invalid("stage %s: step %s: args: %v", stage, step.Name, err) // the template check names it first
	}
	if len(names) == 0 {
		return nil
	}
	var missing []string
	for _, id := range ids {
		n := byID[id]
		if len(n.Kinds) == 0 {
			continue // never heard from: its agent fails the step if it lacks the secret
		}
		for _, name := range names {
			if !slices.Contains(n.Secrets, name) {
				missing = append(missing, fmt.Sprintf("node %s has no secret %s", id, name))
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	more := ""
	if len(missing) > 5 {
		more = fmt.Sprintf(" (and %d more)", len(missing)-5)
		missing = missing[:5]
	}
	where := "stage " + stage
	if step.Name != "" {
		where += ": step " + step.Name
	}
	return fmt.Errorf("%w: %s: %s%s", ErrUnresolvable, where, strings.Join(missing, "; "), more)
}
