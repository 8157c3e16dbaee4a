package main

import (
	"bytes"
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
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

// Declarative policy (docs/policy-as-data.md): `muster diff -f FILE`
// prints what `muster apply -f FILE` would change, and apply changes only
// that. The whole file goes to the core in one call, which compares it
// with the store and makes every change or, on a refusal, none. What
// apply makes is marked with the file it came from (source "file:NAME"),
// and only such records are deleted (freezes lifted) when a later apply of
// a file of that name no longer declares them: a second apply of the same
// file changes nothing and says so. Kinds applied: freezes, windows,
// budgets, approval rules, teams and grants, playbooks and schedules. A
// playbook's document is inline or a file named relative to the policy
// file, read here and sent inline.

// maxPolicyFile bounds a policy file.
const maxPolicyFile = 1 << 20

// policyFile is a policy file: the kinds it declares. Freezes' times are
// read here (RFC 3339) so that a bad one is named by its place.
type policyFile struct {
	Freezes       []policyFreeze            `yaml:"freezes"`
	Windows       []wire.PolicyWindow       `yaml:"windows"`
	Budgets       []wire.PolicyBudget       `yaml:"budgets"`
	ApprovalRules []wire.PolicyApprovalRule `yaml:"approval_rules"`
	Teams         []wire.PolicyTeam         `yaml:"teams"`
	Grants        []wire.PolicyGrant        `yaml:"grants"`
	Playbooks     []policyPlaybook          `yaml:"playbooks"`
	Schedules     []policySchedule          `yaml:"schedules"`
}

// policyPlaybook is one declared playbook: its name and its document,
// inline (a YAML mapping, or a string holding one) or in a file (a path
// relative to the policy file).
type policyPlaybook struct {
	Name     string    `yaml:"name"`
	Document yaml.Node `yaml:"document"`
	File     string    `yaml:"file"`
}

// policySchedule is one declared schedule: what muster schedule apply
// takes.
type policySchedule struct {
	Name        string            `yaml:"name"`
	Cluster     string            `yaml:"cluster"`
	Playbook    string            `yaml:"playbook"`
	Version     string            `yaml:"version"`
	Params      map[string]string `yaml:"params"`
	Cron        string            `yaml:"cron"`
	Timezone    string            `yaml:"timezone"`
	Concurrency string            `yaml:"concurrency"`
	CatchUp     string            `yaml:"catch_up"`
}

// policyFreeze is one declared freeze.
type policyFreeze struct {
	Cluster string `yaml:"cluster"`
	From    string `yaml:"from"`
	To      string `yaml:"to"`
	Reason  string `yaml:"reason"`
}

// policyKinds names the kinds a policy file takes, for its errors.
const policyKinds = "freezes, windows, budgets, approval_rules, teams, grants, playbooks, schedules"

// decodePolicy reads a policy file strictly: no unknown key, no alias, one
// document; every freeze with a cluster, RFC 3339 times (to after from)
// and a reason; every window and approval rule with a name, every budget
// with a cluster, every playbook with a name and one document (inline, or
// a file read with read), every schedule with a name, a cluster, a
// playbook and a version that is a number or latest. The core checks the
// rest (the clusters, crons, limits, levels, bounds, playbooks) when it is
// applied.
func decodePolicy(doc []byte, read func(path string) ([]byte, error)) (wire.PolicyDocument, error) {
	var out wire.PolicyDocument
	if len(doc) > maxPolicyFile {
		return out, fmt.Errorf("the policy file is larger than %d bytes", maxPolicyFile)
	}
	if bytes.Contains(doc, []byte("*")) {
		var root yaml.Node
		if err := yaml.Unmarshal(doc, &root); err != nil {
			return out, fmt.Errorf("policy file: %v", oneLineErr(err))
		}
		if hasAlias(&root) {
			return out, errors.New("policy file: YAML aliases are not taken")
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	var pf policyFile
	if err := dec.Decode(&pf); err != nil && !errors.Is(err, io.EOF) {
		return out, fmt.Errorf("policy file: %v (kinds taken: %s)", oneLineErr(err), policyKinds)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return out, errors.New("policy file: one YAML document only")
	}
	for i, f := range pf.Freezes {
		at := fmt.Sprintf("freezes[%d]", i)
		if f.Cluster == "" {
			return out, fmt.Errorf("%s.cluster is required", at)
		}
		from, err := time.Parse(time.RFC3339, f.From)
		if err != nil {
			return out, fmt.Errorf("%s.from %q: want an RFC 3339 time", at, f.From)
		}
		to, err := time.Parse(time.RFC3339, f.To)
		if err != nil {
			return out, fmt.Errorf("%s.to %q: want an RFC 3339 time", at, f.To)
		}
		if !to.After(from) {
			return out, fmt.Errorf("%s.to %q: not after from", at, f.To)
		}
		if strings.TrimSpace(f.Reason) == "" {
			return out, fmt.Errorf("%s.reason is required", at)
		}
		out.Freezes = append(out.Freezes, wire.PolicyFreeze{Cluster: f.Cluster, From: from.UTC(), To: to.UTC(),
			Reason: strings.TrimSpace(f.Reason)})
	}
	for i, w := range pf.Windows {
		if w.Name == "" {
			return out, fmt.Errorf("windows[%d].name is required", i)
		}
	}
	for i, b := range pf.Budgets {
		if b.Cluster == "" {
			return out, fmt.Errorf("budgets[%d].cluster is required", i)
		}
	}
	for i, r := range pf.ApprovalRules {
		if r.Name == "" {
			return out, fmt.Errorf("approval_rules[%d].name is required", i)
		}
	}
	for i, tm := range pf.Teams {
		if tm.Name == "" {
			return out, fmt.Errorf("teams[%d].name is required", i)
		}
	}
	for i, g := range pf.Grants {
		if (g.Team == "") == (g.Person == "") || g.Role == "" {
			return out, fmt.Errorf("grants[%d]: a role, and a team or a person (one of them), are required", i)
		}
	}
	for i, p := range pf.Playbooks {
		at := fmt.Sprintf("playbooks[%d]", i)
		if p.Name == "" {
			return out, fmt.Errorf("%s.name is required", at)
		}
		text, err := playbookText(&p.Document, p.File, read)
		if err != nil {
			return out, fmt.Errorf("%s (%s): %v", at, p.Name, err)
		}
		out.Playbooks = append(out.Playbooks, wire.PolicyPlaybook{Name: p.Name, Document: text})
	}
	for i, s := range pf.Schedules {
		at := fmt.Sprintf("schedules[%d]", i)
		if s.Name == "" || s.Cluster == "" || s.Playbook == "" {
			return out, fmt.Errorf("%s: a name, a cluster and a playbook are required", at)
		}
		v, err := wire.ParseVersionRef(s.Version)
		if err != nil {
			return out, fmt.Errorf("%s.%v", at, err)
		}
		out.Schedules = append(out.Schedules, wire.PolicySchedule{Name: s.Name, Cluster: s.Cluster, Playbook: s.Playbook, Version: v,
			Params: s.Params, Cron: s.Cron, Timezone: s.Timezone, Concurrency: s.Concurrency, CatchUp: s.CatchUp})
	}
	out.Windows, out.Budgets, out.ApprovalRules = pf.Windows, pf.Budgets, pf.ApprovalRules
	out.Teams, out.Grants = pf.Teams, pf.Grants
	return out, nil
}

// playbookText is a declared playbook's document: the file at path (read
// with read), or the inline one (a string as written, a mapping as YAML);
// one of them.
func playbookText(doc *yaml.Node, path string, read func(string) ([]byte, error)) (string, error) {
	switch {
	case (doc.Kind == 0) == (path == ""):
		return "", errors.New("give the document inline (document:) or in a file (file:), one of them")
	case path != "":
		if read == nil {
			return "", fmt.Errorf("file %q: no file is read here", path)
		}
		b, err := read(path)
		if err != nil {
			return "", fmt.Errorf("file %q: %v", path, oneLineErr(err))
		}
		return string(b), nil
	case doc.Kind == yaml.ScalarNode && doc.Tag == "!!str":
		return doc.Value, nil
	case doc.Kind == yaml.MappingNode:
		b, err := yaml.Marshal(doc)
		if err != nil {
			return "", fmt.Errorf("document: %v", oneLineErr(err))
		}
		return string(b), nil
	}
	return "", errors.New("document: want the playbook as a mapping, or a string holding it")
}

// policyFileReader reads the files a policy file at path names, relative
// to its directory, each at most maxPolicyFile bytes.
func policyFileReader(path string) func(string) ([]byte, error) {
	dir := filepath.Dir(path)
	return func(name string) ([]byte, error) {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxPolicyFile+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxPolicyFile {
			return nil, fmt.Errorf("larger than %d bytes", maxPolicyFile)
		}
		return b, nil
	}
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

// newPolicyCmd is `muster diff -f FILE` (apply false) or `muster apply -f
// FILE` (apply true).
func newPolicyCmd(apply bool) *cobra.Command {
	use, short := "diff -f FILE", "Show what muster apply -f FILE would change (freezes, windows, budgets, approval rules, teams, grants, playbooks, schedules)"
	if apply {
		use, short = "apply -f FILE", "Make the store hold the policy of FILE (freezes, windows, budgets, approval rules, teams, grants, playbooks, schedules): change only what differs"
	}
	cmd := &cobra.Command{Use: use, Short: short, Args: cli.NoArgs,
		Example: "  muster diff -f policy.yaml\n  muster apply -f policy.yaml"}
	f := bindClientFlags(cmd)
	var file, reason string
	cmd.Flags().StringVarP(&file, "file", "f", "", "the policy file (YAML; see configs/policy.yaml)")
	if apply {
		cmd.Flags().StringVar(&reason, "reason", "", "why, for every change's event; required when the file loosens the policy (a window added beside others, moved or deleted, a budget widened or deleted, an approval rule, a freeze lifted)")
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if file == "" {
			return cli.UsageError("-f FILE is required")
		}
		doc, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		want, err := decodePolicy(doc, policyFileReader(file))
		if err != nil {
			return err
		}
		name := filepath.Base(file)
		c, err := f.core()
		if err != nil {
			return err
		}
		plan, err := c.ApplyPolicy(cmd.Context(), wire.ApplyPolicyRequest{Source: "file:" + name, DryRun: !apply, Reason: reason,
			Document: want})
		if err != nil {
			return apiError(c, err)
		}
		w := cmd.OutOrStdout()
		if f.json() {
			return f.write(w, plan)
		}
		// What changes, then what the file no longer declares and stays
		// (a playbook's versions).
		for _, ch := range append(plan.Changes, plan.Kept...) {
			fmt.Fprintln(w, textsafe.Escape(ch.Text))
		}
		if len(plan.Changes) == 0 {
			fmt.Fprintf(w, "No changes: the store holds what %s declares.\n", textsafe.Escape(name))
			return nil
		}
		if apply {
			fmt.Fprintf(w, "Applied %d change(s) from %s.\n", len(plan.Changes), textsafe.Escape(name))
		}
		return nil
	}
	return cmd
}
