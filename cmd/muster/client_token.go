package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke API tokens (admin role)",
	}
	f := bindClientFlags(cmd)
	var (
		roles      []string
		secretFile string
		ttl        time.Duration
		cluster    string
		uses       int
		grantsOnly bool
		tokLabels  []string
	)
	create := &cobra.Command{
		Use:   "create [NAME] --role ROLE... [--ttl D] [--cluster C --uses N --labels K=V,...]",
		Short: "Create a token and print its secret, once",
		Long: `Create a token. Its secret is shown once and stored nowhere: the core keeps
only a hash. Roles: viewer (read), operator (read, create, cancel, retry,
orchestrate), approver (read, approve, reject), admin (all, and tokens),
enroll (a join token: agents enroll with it, nothing else).

A join token (--role enroll) is for one cluster (--cluster), lasts --ttl
(24h by default) and may allow a number of enrollments (--uses); its name
is made up when none is given. Any token may take --ttl.

--labels gives a join token labels that the core holds for every node it
enrolls, over those its agent announces: a stage with follow: true takes a
node that joins while it runs by these (and the configuration's), never by
an agent's own. Only the core sets them; the node keeps them through its
certificate's renewals, and enrolling it again with another join token
gives it that token's labels instead.

With --secret-file the secret is written to that file (mode 0600) instead of
the terminal. -o json never prints a secret, so it needs --secret-file.`,
		Example: `  muster token create bob --role approver
  muster token create ci --role operator --secret-file ci.token -o json
  muster token create --roles enroll --ttl 24h --cluster prod --uses 50 --secret-file join.token
  muster token create --roles enroll --cluster prod --labels role=web,zone=a --secret-file web.token`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cli.UsageError("%s takes at most one argument, NAME (see '%s --help')", cmd.CommandPath(), cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(roles) == 0 && !grantsOnly {
				return cli.UsageError("--role is required (viewer, operator, approver, admin or enroll), or --grants-only")
			}
			if len(roles) > 0 && grantsOnly {
				return cli.UsageError("--grants-only takes no --role")
			}
			if roles == nil {
				roles = []string{}
			}
			if f.json() && secretFile == "" {
				return cli.UsageError("-o %s never prints a secret: add --secret-file FILE", f.output)
			}
			req := wire.CreateTokenRequest{Roles: roles, ClusterID: cluster}
			if len(args) == 1 {
				req.Name = args[0]
			} else if len(roles) == 1 && roles[0] == "enroll" && cluster != "" {
				req.Name = "join-" + cluster + "-" + uuid.NewString()[:8]
			} else {
				return cli.UsageError("NAME is required, except for a join token (--role enroll --cluster C)")
			}
			if ttl < 0 {
				return cli.UsageError("--ttl must be positive, got %s", ttl)
			} else if ttl > 0 {
				req.TTL = ttl.String()
			}
			if cmd.Flags().Changed("uses") {
				req.Uses = &uses
			}
			if len(tokLabels) > 0 {
				set, err := labels.ParseSelector(tokLabels)
				if err != nil {
					return cli.UsageError("--labels: %s", textsafe.Escape(err.Error()))
				}
				req.Labels = set
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			tok, err := c.CreateTokenWith(cmd.Context(), req)
			if err != nil {
				return apiError(c, err)
			}
			w := cmd.OutOrStdout()
			if secretFile != "" {
				if err := writeSecret(secretFile, tok.Token); err != nil {
					return fmt.Errorf("token %s was created, but its secret could not be saved: %w", textsafe.Escape(tok.Name), err)
				}
			}
			if f.json() {
				return f.write(w, wire.Token{Name: tok.Name, Roles: tok.Roles, ExpiresTS: tok.ExpiresTS, ClusterID: tok.ClusterID,
					UsesLeft: tok.UsesLeft, Labels: tok.Labels})
			}
			scope := tokenScope(tok.ClusterID, tok.UsesLeft, tok.ExpiresTS)
			if len(tok.Labels) > 0 {
				scope += ", labels " + textsafe.Escape(labels.Set(tok.Labels).String())
			}
			fmt.Fprintf(w, "Created token %s (roles %s%s).\n", textsafe.Escape(tok.Name), textsafe.Escape(strings.Join(tok.Roles, ", ")), scope)
			if secretFile != "" {
				fmt.Fprintf(w, "Its secret is in %s.\n", secretFile)
				return nil
			}
			fmt.Fprintf(w, "Its secret, shown only this once:\n\n  %s\n\n", textsafe.Escape(tok.Token))
			return nil
		},
	}
	create.Flags().StringSliceVar(&roles, "role", nil, "role(s) of the token (repeatable or a comma list)")
	create.Flags().StringSliceVar(&roles, "roles", nil, "the same as --role")
	create.Flags().DurationVar(&ttl, "ttl", 0, "the token expires after this long (join tokens: 24h by default)")
	create.Flags().StringVar(&cluster, "cluster", "", "the one cluster a join token may enroll into")
	create.Flags().IntVar(&uses, "uses", 0, "how many agents a join token may enroll (default: no count)")
	create.Flags().StringSliceVar(&tokLabels, "labels", nil, "labels the core holds for each node a join token enrolls (k=v, repeatable or a comma list)")
	create.Flags().BoolVar(&grantsOnly, "grants-only", false, "a token without roles: it holds the grants of its person and teams alone")
	create.Flags().StringVar(&secretFile, "secret-file", "", "write the secret to this file (mode 0600) instead of printing it")

	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			toks, err := c.Tokens(cmd.Context())
			if err != nil {
				return apiError(c, err)
			}
			l := newListing(wire.TokenList{Tokens: toks}, "NAME", "ROLES", "CREATED", "EXPIRES", "CLUSTER", "USES LEFT", "LABELS")
			for _, tok := range toks {
				left := ""
				if tok.UsesLeft != nil {
					left = strconv.Itoa(*tok.UsesLeft)
				}
				l.add(tok.Name, tok, tok.Name, strings.Join(tok.Roles, ","), ts(tok.CreatedTS), tsPtr(tok.ExpiresTS), tok.ClusterID, left, labels.Set(tok.Labels).String())
			}
			return f.printList(cmd.OutOrStdout(), l)
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a token: it stops working at once",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			if err := c.RevokeToken(cmd.Context(), args[0]); err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), wire.Accepted{Status: "revoked", Message: "token " + args[0] + " revoked"})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Revoked token %s.\n", textsafe.Escape(args[0]))
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// tokenScope says what limits a token: ", cluster prod, 50 uses, expires ...".
func tokenScope(cluster string, uses *int, expires *time.Time) string {
	out := ""
	if cluster != "" {
		out += ", cluster " + textsafe.Escape(cluster)
	}
	if uses != nil {
		out += fmt.Sprintf(", %d uses", *uses)
	}
	if expires != nil {
		out += ", expires " + expires.Format(time.RFC3339)
	}
	return out
}

// writeSecret writes a secret to a new file of mode 0600; it refuses to
// overwrite an existing file.
func writeSecret(path, secret string) error {
	f, err := os.OpenFile(filepath.Clean(path), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
