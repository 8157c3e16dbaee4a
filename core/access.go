package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/names"
)

// TeamSpec is a team of the configuration (docs/configuration.md,
// "Access"): its members (person names) and the group claims of the
// identity provider that mean membership.
type TeamSpec struct {
	Name    string   `mapstructure:"name" yaml:"name"`
	Members []string `mapstructure:"members" yaml:"members"`
	Groups  []string `mapstructure:"groups" yaml:"groups"`
}

// GrantSpec is a grant of the configuration: a team or a person, one role,
// and clusters (a glob) or labels.
type GrantSpec struct {
	Team     string            `mapstructure:"team" yaml:"team"`
	Person   string            `mapstructure:"person" yaml:"person"`
	Role     string            `mapstructure:"role" yaml:"role"`
	Clusters string            `mapstructure:"clusters" yaml:"clusters"`
	Labels   map[string]string `mapstructure:"labels" yaml:"labels"`
}

// id is the grant's id in the store: the same grant in the configuration
// keeps it from one start to the next.
func (g GrantSpec) id() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\x00%s\x00%s\x00%s", g.Team, store.PersonKey(g.Person), g.Role, g.Clusters)
	for _, k := range slices.Sorted(maps.Keys(g.Labels)) {
		fmt.Fprintf(&b, "\x00%s=%s", k, g.Labels[k])
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "config-" + hex.EncodeToString(sum[:8])
}

// validateAccess checks the teams and grants of the configuration.
func (c *Config) validateAccess(add func(field, format string, args ...any)) {
	teams := map[string]bool{}
	for i, t := range c.Teams {
		key := fmt.Sprintf("teams[%d]", i)
		if err := names.CheckID(t.Name); err != nil {
			add(key+".name", "%v", err)
		} else if teams[t.Name] {
			add(key+".name", "team %q is listed twice", t.Name)
		}
		teams[t.Name] = true
		for j, m := range t.Members {
			if err := names.CheckToken(m); err != nil {
				add(fmt.Sprintf("%s.members[%d]", key, j), "%v", err)
			}
		}
		for j, g := range t.Groups {
			if strings.TrimSpace(g) == "" {
				add(fmt.Sprintf("%s.groups[%d]", key, j), "a group claim is not empty")
			}
		}
	}
	for i, g := range c.Grants {
		key := fmt.Sprintf("grants[%d]", i)
		switch {
		case (g.Team == "") == (g.Person == ""):
			add(key, "names a team or a person (one of them)")
		case g.Person != "" && names.CheckToken(g.Person) != nil:
			add(key+".person", "%v", names.CheckToken(g.Person))
		case g.Team != "" && !teams[g.Team]:
			add(key+".team", "team %q is not in teams", g.Team)
		}
		if err := auth.CheckGrant(g.Role, auth.Scope{Clusters: g.Clusters, Labels: g.Labels}); err != nil {
			add(key, "%v", err)
		}
	}
}

// seedAccess writes the clusters' labels and the configuration's teams and
// grants to the store (ops.Seed: source "config").
func seedAccess(ctx context.Context, st store.Store, op *ops.Ops, cfg Config) error {
	err := st.Update(ctx, func(tx store.Tx) error {
		for _, cl := range cfg.Clusters {
			if err := tx.PutClusterLabels(ctx, cl.ID, cl.Labels); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cluster labels: %w", err)
	}
	teams := make([]store.Team, len(cfg.Teams))
	for i, t := range cfg.Teams {
		teams[i] = store.Team{Name: t.Name, Members: t.Members, Groups: t.Groups}
	}
	grants := make([]store.Grant, len(cfg.Grants))
	for i, g := range cfg.Grants {
		grants[i] = store.Grant{ID: g.id(), Team: g.Team, Person: store.PersonKey(g.Person), Role: g.Role, Clusters: g.Clusters,
			Labels: g.Labels}
	}
	if err := op.Seed(ctx, teams, grants); err != nil {
		return fmt.Errorf("teams and grants of the configuration: %w", err)
	}
	return nil
}
