package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke API tokens (admin role)",
	}
	f := bindClientFlags(cmd)
	var roles []string
	var secretFile string
	create := &cobra.Command{
		Use:   "create NAME --role ROLE...",
		Short: "Create a token and print its secret, once",
		Long: `Create a token. Its secret is shown once and stored nowhere: the core keeps
only a hash. Roles: viewer (read), operator (read, create, cancel, retry,
orchestrate), approver (read, approve, reject), admin (all, and tokens).

With --secret-file the secret is written to that file (mode 0600) instead of
the terminal. -o json never prints a secret, so it needs --secret-file.`,
		Example: `  muster token create bob --role approver
  muster token create ci --role operator --secret-file ci.token -o json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(roles) == 0 {
				return usageError("--role is required (viewer, operator, approver or admin)")
			}
			if f.json() && secretFile == "" {
				return usageError("-o json never prints a secret: add --secret-file FILE")
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			tok, err := c.CreateToken(cmd.Context(), args[0], roles)
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
				return writeJSON(w, wire.Token{Name: tok.Name, Roles: tok.Roles})
			}
			fmt.Fprintf(w, "Created token %s (roles %s).\n", textsafe.Escape(tok.Name), textsafe.Escape(strings.Join(tok.Roles, ", ")))
			if secretFile != "" {
				fmt.Fprintf(w, "Its secret is in %s.\n", secretFile)
				return nil
			}
			fmt.Fprintf(w, "Its secret, shown only this once:\n\n  %s\n\n", textsafe.Escape(tok.Token))
			return nil
		},
	}
	create.Flags().StringSliceVar(&roles, "role", nil, "role(s) of the token (repeatable or a comma list)")
	create.Flags().StringVar(&secretFile, "secret-file", "", "write the secret to this file (mode 0600) instead of printing it")

	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			toks, err := c.Tokens(cmd.Context())
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return writeJSON(cmd.OutOrStdout(), wire.TokenList{Tokens: toks})
			}
			t := newTable(cmd.OutOrStdout(), "NAME", "ROLES", "CREATED")
			for _, tok := range toks {
				t.row(tok.Name, strings.Join(tok.Roles, ","), ts(tok.CreatedTS))
			}
			return t.flush()
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
				return writeJSON(cmd.OutOrStdout(), wire.Accepted{Status: "revoked", Message: "token " + args[0] + " revoked"})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Revoked token %s.\n", textsafe.Escape(args[0]))
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
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
