package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/tlsutil"
)

func newTLSCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Make the certificate authority and the certificates of agents, core and clients",
		Long: `Make a small certificate authority and the certificates muster's endpoints
use for mutual TLS. Every certificate names one identity, as a URI SAN
that peers check:

  spiffe://muster/agent/NODE_ID   an agent's API
  spiffe://muster/core            the core (its API, and its client certificate towards agents)
  spiffe://muster/client/NAME     a person or a script calling the core API

Keys are ECDSA P-256, written with mode 0600. No file is ever overwritten.`,
		Args: cli.NoArgs,
	}
	ca := &cobra.Command{Use: "ca", Short: "The certificate authority", Args: cli.NoArgs}
	ca.AddCommand(newTLSCACreateCmd(), newTLSCAPinCmd())
	cert := &cobra.Command{Use: "cert", Short: "Certificates signed by the authority", Args: cli.NoArgs}
	cert.AddCommand(newTLSCertCreateCmd())
	cmd.AddCommand(ca, cert)
	return cmd
}

func newTLSCACreateCmd() *cobra.Command {
	var (
		dir  string
		days int
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a certificate authority: DIR/ca.pem and DIR/ca-key.pem",
		Long: `Create a certificate authority in DIR: ca.pem (give it to every agent and
the core) and ca-key.pem (keep it offline: whoever holds it can make a core).

It prints the CA's pin (sha256:...): agents that enroll with a join token
check the core against it before they send the token ('muster-agent enroll
--ca-pin', or 'muster agent enroll --ca-pin'). 'muster tls ca pin --dir DIR'
prints it again.`,
		Example: "  muster tls ca create --dir /etc/muster/tls",
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return cli.UsageError("--dir is required")
			}
			if days < 1 {
				return cli.UsageError("--days must be at least 1, got %d", days)
			}
			p, err := tlsutil.CreateCA(dir, time.Now(), time.Duration(days)*24*time.Hour)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote the CA certificate %s and its key %s (mode 0600), valid %d days.\n", p.Cert, p.Key, days)
			pin, err := caPin(p.Cert)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "CA pin (for 'muster-agent enroll --ca-pin'): %s\n", pin)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory of the CA files (created when missing)")
	cmd.Flags().IntVar(&days, "days", int(tlsutil.CAValidity/(24*time.Hour)), "validity in days")
	return cmd
}

func newTLSCAPinCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:     "pin",
		Short:   "Print the pin of the CA in DIR (what enrolling agents check the core against)",
		Example: "  muster tls ca pin --dir /etc/muster/tls",
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return cli.UsageError("--dir is required")
			}
			pin, err := caPin(filepath.Join(dir, tlsutil.CACertFile))
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), pin)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory of the CA files")
	return cmd
}

// caPin reads a CA certificate and returns its pin.
func caPin(certFile string) (string, error) {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return "", err
	}
	certs, err := tlsutil.ParseCerts(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", certFile, err)
	}
	return tlsutil.Pin(certs[0]), nil
}

func newTLSCertCreateCmd() *cobra.Command {
	var (
		dir, agent, client string
		core               bool
		hosts              []string
		days               int
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a certificate for an agent, the core or a client, signed by the CA in DIR",
		Long: `Create a certificate and its key in DIR, signed by the CA of DIR:
  --agent NODE_ID  DIR/agent-NODE_ID.pem and DIR/agent-NODE_ID-key.pem
  --core           DIR/core.pem and DIR/core-key.pem
  --client NAME    DIR/client-NAME.pem and DIR/client-NAME-key.pem
--hosts lists the DNS names and IP addresses the endpoint is reached at
(default localhost,127.0.0.1). The core checks an agent by the node id in its
certificate, not by host name; people with curl check host names.`,
		Example: `  muster tls cert create --dir /etc/muster/tls --core --hosts core.example.com,10.0.0.2
  muster tls cert create --dir /etc/muster/tls --agent db-1 --hosts db-1.example.com,10.0.1.7
  muster tls cert create --dir /etc/muster/tls --client alice`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return cli.UsageError("--dir is required")
			}
			var ids []tlsutil.Identity
			if cmd.Flags().Changed("agent") {
				ids = append(ids, tlsutil.Agent(agent))
			}
			if core {
				ids = append(ids, tlsutil.Core())
			}
			if cmd.Flags().Changed("client") {
				ids = append(ids, tlsutil.Client(client))
			}
			if len(ids) != 1 {
				return cli.UsageError("give exactly one of --agent NODE_ID, --core or --client NAME")
			}
			if err := ids[0].Validate(); err != nil {
				return cli.UsageError("%v", err)
			}
			if days < 1 {
				return cli.UsageError("--days must be at least 1, got %d", days)
			}
			p, err := tlsutil.CreateCert(dir, ids[0], hosts, time.Now(), time.Duration(days)*24*time.Hour)
			if err != nil {
				return err
			}
			shown := hosts
			if len(shown) == 0 {
				shown = tlsutil.DefaultHosts
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote %s (%s, hosts %s, valid %d days) and its key %s (mode 0600).\n",
				p.Cert, ids[0], strings.Join(shown, ","), days, p.Key)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "directory holding ca.pem and ca-key.pem; the certificate is written there")
	f.StringVar(&agent, "agent", "", "an agent's certificate for node NODE_ID")
	f.BoolVar(&core, "core", false, "the core's certificate")
	f.StringVar(&client, "client", "", "a client certificate for NAME (a person or a script)")
	f.StringSliceVar(&hosts, "hosts", nil, "DNS names and IP addresses, comma-separated (default localhost,127.0.0.1)")
	f.IntVar(&days, "days", int(tlsutil.LeafValidity/(24*time.Hour)), "validity in days")
	return cmd
}
