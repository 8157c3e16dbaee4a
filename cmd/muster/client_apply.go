package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

// Declarative policy (docs/cli.md, "Policy files"): `muster diff -f FILE` prints what
// `muster apply -f FILE` would change, and apply changes only that, through
// the API. What apply makes is marked with the file it came from
// (source "file:NAME"), and only such objects are changed or lifted by a
// later apply of a file of that name: a second apply of the same file
// changes nothing and says so. Kinds applied today: freezes.

// maxPolicyFile bounds a policy file.
const maxPolicyFile = 1 << 20

// policyFile is a policy file: the kinds it declares.
type policyFile struct {
	Freezes []policyFreeze `yaml:"freezes"`
}

// policyFreeze is one declared freeze.
type policyFreeze struct {
	Cluster string `yaml:"cluster"`
	From    string `yaml:"from"`
	To      string `yaml:"to"`
	Reason  string `yaml:"reason"`
}

// wantFreeze is a declared freeze read: times parsed.
type wantFreeze struct {
	Cluster  string
	From, To time.Time
	Reason   string
}

// decodePolicy reads a policy file strictly: no unknown key, no alias, one
// document; every freeze with a cluster, RFC 3339 times (to after from)
// and a reason. The core checks the rest (the cluster, the bounds).
func decodePolicy(doc []byte) ([]wantFreeze, error) {
	if len(doc) > maxPolicyFile {
		return nil, fmt.Errorf("the policy file is larger than %d bytes", maxPolicyFile)
	}
	if bytes.Contains(doc, []byte("*")) {
		var root yaml.Node
		if err := yaml.Unmarshal(doc, &root); err != nil {
			return nil, fmt.Errorf("policy file: %v", oneLineErr(err))
		}
		if hasAlias(&root) {
			return nil, errors.New("policy file: YAML aliases are not taken")
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	var pf policyFile
	if err := dec.Decode(&pf); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("policy file: %v (kinds applied: freezes)", oneLineErr(err))
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("policy file: one YAML document only")
	}
	var out []wantFreeze
	for i, f := range pf.Freezes {
		at := fmt.Sprintf("freezes[%d]", i)
		if f.Cluster == "" {
			return nil, fmt.Errorf("%s.cluster is required", at)
		}
		from, err := time.Parse(time.RFC3339, f.From)
		if err != nil {
			return nil, fmt.Errorf("%s.from %q: want an RFC 3339 time", at, f.From)
		}
		to, err := time.Parse(time.RFC3339, f.To)
		if err != nil {
			return nil, fmt.Errorf("%s.to %q: want an RFC 3339 time", at, f.To)
		}
		if !to.After(from) {
			return nil, fmt.Errorf("%s.to %q: not after from", at, f.To)
		}
		if strings.TrimSpace(f.Reason) == "" {
			return nil, fmt.Errorf("%s.reason is required", at)
		}
		out = append(out, wantFreeze{Cluster: f.Cluster, From: from.UTC(), To: to.UTC(), Reason: strings.TrimSpace(f.Reason)})
	}
	return out, nil
}

func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode {
		return true
	}
	for _, c := range n.Content {
		if hasAlias(c) {
			return true
		}
	}
	return false
}

func oneLineErr(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// policyChange is one change of a plan: a freeze to make, or one to lift.
type policyChange struct {
	create *wantFreeze
	lift   *wire.Freeze
}

func (c policyChange) String() string {
	if c.create != nil {
		f := c.create
		return fmt.Sprintf("+ freeze %s from %s until %s: %s", textsafe.Escape(f.Cluster), f.From.Format(time.RFC3339),
			f.To.Format(time.RFC3339), textsafe.Escape(f.Reason))
	}
	f := c.lift
	return fmt.Sprintf("- freeze %s of %s from %s until %s: %s (lifted: no longer in the file)", textsafe.Escape(f.ID),
		textsafe.Escape(f.ClusterID), f.From.UTC().Format(time.RFC3339), f.To.UTC().Format(time.RFC3339), textsafe.Escape(f.Reason))
}

// sameFreeze reports whether a stored freeze is the declared one: same
// cluster, end and reason, and the same start, or a declared start before
// the stored one that began at its making (a start in the past is now).
func sameFreeze(s wire.Freeze, w wantFreeze) bool {
	if s.ClusterID != w.Cluster || !s.To.Equal(w.To) || s.Reason != w.Reason {
		return false
	}
	return s.From.Equal(w.From) || (w.From.Before(s.From) && s.CreatedTS != nil && !s.From.After(s.CreatedTS.Add(time.Second)))
}

// planPolicy compares the declared freezes with those the store holds in
// force from this file (source) and returns the changes, creations first.
func planPolicy(ctx context.Context, c *client.Core, source string, want []wantFreeze, now time.Time) ([]policyChange, error) {
	have, err := c.Freezes(ctx, "", false)
	if err != nil {
		return nil, err
	}
	var mine []wire.Freeze
	for _, f := range have {
		if f.Source == source {
			mine = append(mine, f)
		}
	}
	matched := make([]bool, len(mine))
	var out []policyChange
	for i := range want {
		w := &want[i]
		found := false
		for j, s := range mine {
			if !matched[j] && sameFreeze(s, *w) {
				matched[j], found = true, true
				break
			}
		}
		if !found && w.To.After(now) { // one that ended has nothing to hold
			out = append(out, policyChange{create: w})
		}
	}
	for j := range mine {
		if !matched[j] {
			out = append(out, policyChange{lift: &mine[j]})
		}
	}
	return out, nil
}

// newPolicyCmd is `muster diff -f FILE` (apply false) or `muster apply -f
// FILE` (apply true).
func newPolicyCmd(apply bool) *cobra.Command {
	use, short := "diff -f FILE", "Show what muster apply -f FILE would change (freezes)"
	if apply {
		use, short = "apply -f FILE", "Make the store hold the policy of FILE (freezes): change only what differs"
	}
	cmd := &cobra.Command{Use: use, Short: short, Args: cli.NoArgs,
		Example: "  muster diff -f policy.yaml\n  muster apply -f policy.yaml"}
	f := bindClientFlags(cmd)
	var file, reason string
	cmd.Flags().StringVarP(&file, "file", "f", "", "the policy file (YAML; see configs/policy.yaml)")
	if apply {
		cmd.Flags().StringVar(&reason, "reason", "", "why, for the lifts (default: the file's name)")
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if file == "" {
			return cli.UsageError("-f FILE is required")
		}
		doc, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		want, err := decodePolicy(doc)
		if err != nil {
			return err
		}
		name := filepath.Base(file)
		source := "file:" + name
		c, err := f.core()
		if err != nil {
			return err
		}
		plan, err := planPolicy(cmd.Context(), c, source, want, time.Now())
		if err != nil {
			return apiError(c, err)
		}
		w := cmd.OutOrStdout()
		if len(plan) == 0 {
			fmt.Fprintf(w, "No changes: the store holds what %s declares.\n", textsafe.Escape(name))
			return nil
		}
		for _, ch := range plan {
			fmt.Fprintln(w, ch.String())
		}
		if !apply {
			return nil
		}
		why := reason
		if why == "" {
			why = "no longer in " + name
		}
		for _, ch := range plan {
			if ch.create != nil {
				from := ch.create.From
				req := wire.CreateFreezeRequest{Until: ch.create.To, Reason: ch.create.Reason, Source: source}
				if from.After(time.Now()) {
					req.From = &from
				}
				if _, err := c.CreateFreeze(cmd.Context(), ch.create.Cluster, req); err != nil {
					return apiError(c, err)
				}
				continue
			}
			if _, err := c.LiftFreeze(cmd.Context(), ch.lift.ID, why); err != nil {
				return apiError(c, err)
			}
		}
		fmt.Fprintf(w, "Applied %d change(s) from %s.\n", len(plan), textsafe.Escape(name))
		return nil
	}
	return cmd
}
