package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

// esc escapes each value for the terminal.
func esc(vs []string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = textsafe.Escape(v)
	}
	return strings.Join(out, ",")
}

func newTeamCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "team",
		Short: "Create, list, show and delete teams; add and remove members; map group claims",
	}
	f := bindClientFlags(cmd)
	var members, groups []string
	printTeam := func(cmd *cobra.Command, t *wire.Team, verb string) error {
		if f.json() {
			return f.write(cmd.OutOrStdout(), t)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s team %s (members %s; groups %s).\n", verb, textsafe.Escape(t.Name), esc(t.Members),
			esc(t.Groups))
		return nil
	}
	create := &cobra.Command{
		Use:     "create NAME [--member P]... [--group G]...",
		Short:   "Create a team (admin)",
		Example: "  muster team create db --member dana --group db-oncall",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			t, err := c.CreateTeam(cmd.Context(), wire.CreateTeamRequest{Name: args[0], Members: members, Groups: groups})
			if err != nil {
				return apiError(c, err)
			}
			return printTeam(cmd, t, "Created")
		},
	}
	create.Flags().StringSliceVar(&members, "member", nil, "a member (a person's name; repeatable or a comma list)")
	create.Flags().StringSliceVar(&groups, "group", nil, "a group claim of the identity provider that means membership")
	list := &cobra.Command{
		Use:   "list",
		Short: "List teams",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			ts, err := c.Teams(cmd.Context())
			if err != nil {
				return apiError(c, err)
			}
			l := newListing(wire.TeamList{Teams: ts}, "NAME", "MEMBERS", "GROUPS", "SOURCE")
			for _, tm := range ts {
				l.add(tm.Name, tm, textsafe.Escape(tm.Name), esc(tm.Members), esc(tm.Groups), textsafe.Escape(tm.Source))
			}
			return f.printList(cmd.OutOrStdout(), l)
		},
	}
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a team",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			t, err := c.Team(cmd.Context(), args[0])
			if err != nil {
				return apiError(c, err)
			}
			return printTeam(cmd, t, "The")
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a team and its grants (admin on a scope containing each of them)",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			if err := c.DeleteTeam(cmd.Context(), args[0]); err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), wire.Accepted{Status: "deleted", Message: "team " + args[0] + " deleted"})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deleted team %s.\n", textsafe.Escape(args[0]))
			return nil
		},
	}
	change := func(use, short string, remove, group bool) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  exactArgs("TEAM", "VALUE"),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := f.core()
				if err != nil {
					return err
				}
				var t *wire.Team
				if group {
					t, err = c.MapTeamGroup(cmd.Context(), args[0], args[1], remove)
				} else {
					t, err = c.AddTeamMember(cmd.Context(), args[0], args[1], remove)
				}
				if err != nil {
					return apiError(c, err)
				}
				return printTeam(cmd, t, "Changed")
			},
		}
	}
	cmd.AddCommand(create, list, show, del,
		change("add-member TEAM PERSON", "Add a member to a team", false, false),
		change("remove-member TEAM PERSON", "Remove a member from a team", true, false),
		change("map-group TEAM GROUP", "Map a group claim of the identity provider to a team", false, true),
		change("unmap-group TEAM GROUP", "Unmap a group claim from a team", true, true))
	return cmd
}

func newGrantCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "grant",
		Short: "Grant a team or a person a role on clusters; list and revoke grants",
	}
	f := bindClientFlags(cmd)
	var req wire.CreateGrantRequest
	var lbls []string
	create := &cobra.Command{
		Use:   "create (--team T | --person P) --role ROLE (--clusters GLOB | --labels k=v,...)",
		Short: "Grant one role on clusters (a glob) or on clusters with labels (admin on a scope that contains it)",
		Example: `  muster grant create --team db --role approver --clusters 'prod-db-*'
  muster grant create --person dana --role viewer --labels tier=prod`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (req.Team == "") == (req.Person == "") {
				return cli.UsageError("give --team or --person (one of them)")
			}
			if req.Role == "" {
				return cli.UsageError("--role is required (viewer, operator, approver or admin)")
			}
			if (req.Clusters == "") == (len(lbls) == 0) {
				return cli.UsageError("give --clusters or --labels (one of them)")
			}
			if len(lbls) > 0 {
				req.Labels = map[string]string{}
				for _, l := range lbls {
					k, v, ok := strings.Cut(l, "=")
					if !ok {
						return cli.UsageError("--labels %q: want key=value", l)
					}
					req.Labels[k] = v
				}
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			g, err := c.CreateGrant(cmd.Context(), req)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), g)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Granted %s %s on %s (grant %s).\n", grantee(g), textsafe.Escape(g.Role),
				scopeText(g), g.ID)
			return nil
		},
	}
	create.Flags().StringVar(&req.Team, "team", "", "the team granted")
	create.Flags().StringVar(&req.Person, "person", "", "the person granted")
	create.Flags().StringVar(&req.Role, "role", "", "viewer, operator, approver or admin")
	create.Flags().StringVar(&req.Clusters, "clusters", "", `a cluster glob ("*" is every cluster)`)
	create.Flags().StringSliceVar(&lbls, "labels", nil, "a cluster label selector, key=value (all must match)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the grants within your admin scopes",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			gs, err := c.Grants(cmd.Context())
			if err != nil {
				return apiError(c, err)
			}
			l := newListing(wire.GrantList{Grants: gs}, "ID", "WHO", "ROLE", "SCOPE", "SOURCE", "BY")
			for _, g := range gs {
				l.add(g.ID, g, g.ID, grantee(&g), textsafe.Escape(g.Role), scopeText(&g), textsafe.Escape(g.Source), textsafe.Escape(g.CreatedBy))
			}
			return f.printList(cmd.OutOrStdout(), l)
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a grant (admin on a scope that contains it)",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			if err := c.RevokeGrant(cmd.Context(), args[0]); err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), wire.Accepted{Status: "revoked", Message: "grant " + args[0] + " revoked"})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Revoked grant %s.\n", textsafe.Escape(args[0]))
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func grantee(g *wire.Grant) string {
	if g.Team != "" {
		return "team " + textsafe.Escape(g.Team)
	}
	return "person " + textsafe.Escape(g.Person)
}

func scopeText(g *wire.Grant) string {
	if len(g.Labels) == 0 {
		return textsafe.Escape(g.Clusters)
	}
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(g.Labels)) {
		pairs = append(pairs, k+"="+g.Labels[k])
	}
	return textsafe.Escape(strings.Join(pairs, ","))
}
