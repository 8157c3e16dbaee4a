package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core/budget"
)

// The example kinds of `muster dev` (docs/development.md, "Example kinds"):
// each simulates one operation on a node, keeping the node's state (its
// version, whether it is drained) in a file of the dev data directory, so
// that the shipped playbooks run on a dev cluster. A kind fails on a node
// while the file fail/STEP.NODE exists in the data directory: empty, every
// time; holding a number, that many times (counted down).

// devKindPrefix starts the name of every example kind.
const devKindPrefix = "example.com/"

// devKinds are the example kinds by step: the kind's name after
// devKindPrefix, whether the disruption budget counts it, and its
// args_schema (the core refuses bad args before any approval).
var devKinds = []struct {
	step, kind string
	disruptive bool
	schema     handlers.SchemaText
}{
	{"drain", "node.drain", false, ""},
	{"undrain", "node.undrain", false, ""},
	{"upgrade", "node.upgrade", true, devUpgradeSchema},
	{"verify", "node.verify", false, ""},
	{"restart", "service.restart", true, ""},
	{"health", "service.health", false, ""},
	{"backup", "db.backup", false, ""},
}

// devUpgradeSchema: upgrade takes one argument, the version, a string.
const devUpgradeSchema = `type: object
required: [version]
additionalProperties: false
properties:
  version: {type: string, minLength: 1, maxLength: 64, description: the version to upgrade to}
`

// devInitialVersion is every dev node's version before any upgrade.
const devInitialVersion = "1.0"

// devExternalKinds are the agents' external kinds: this binary's hidden
// `dev kind STEP` over the data directory dir.
func devExternalKinds(exe, dir string) []handlers.External {
	var out []handlers.External
	for _, k := range devKinds {
		out = append(out, handlers.External{Kind: devKindPrefix + k.kind, Run: []string{exe, "dev", "kind", "--dir", dir, k.step},
			ArgsSchema: k.schema})
	}
	return out
}

// devKindRules marks the disruptive example kinds for the core's budget.
func devKindRules() []budget.KindRule {
	var out []budget.KindRule
	for _, k := range devKinds {
		if k.disruptive {
			out = append(out, budget.KindRule{Kind: devKindPrefix + k.kind, Disruptive: true})
		}
	}
	return out
}

// devRole is node i's role label (from 1): node-1 is the primary.
func devRole(i int) string {
	if i == 1 {
		return "primary"
	}
	return "replica"
}

// devFailFlag parses one --fail value, STEP@NODE.
var devFailFlag = regexp.MustCompile(`^([a-z]+)@([A-Za-z0-9._-]+)$`)

// devFail makes step fail on node (STEP@NODE) from the start: it writes
// the empty fail file.
// devPrepareFail makes the fail directory, which the banner tells people
// to put fail files in, and a fail file for each --fail spec.
func devPrepareFail(dir string, specs []string) error {
	if err := os.MkdirAll(filepath.Join(dir, "fail"), 0o755); err != nil {
		return err
	}
	for _, f := range specs {
		if err := devFail(dir, f); err != nil {
			return &cli.ExitError{Code: 2, Err: err}
		}
	}
	return nil
}

func devFail(dir, spec string) error {
	m := devFailFlag.FindStringSubmatch(spec)
	if m == nil || !devStepKnown(m[1]) {
		return fmt.Errorf("--fail %q: want STEP@NODE with a step among %s", spec, devStepNames())
	}
	if err := os.MkdirAll(filepath.Join(dir, "fail"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "fail", m[1]+"."+m[2]), nil, 0o644)
}

func devStepKnown(step string) bool {
	for _, k := range devKinds {
		if k.step == step {
			return true
		}
	}
	return false
}

func devStepNames() string {
	var s []string
	for _, k := range devKinds {
		s = append(s, k.step)
	}
	return strings.Join(s, ", ")
}

// newDevKindCmd is `muster dev kind STEP`, run by the dev agents.
func newDevKindCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    "kind STEP",
		Short:  "Run one example kind of muster dev (the agents run it)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDevKind(dir, args[0], os.Getenv("MUSTER_NODE_ID"), os.Getenv("MUSTER_OUTPUTS"), cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the dev data directory")
	return cmd
}

// devNodeState is what the example kinds keep of a node.
type devNodeState struct {
	Version string `json:"version"`
	Drained bool   `json:"drained"`
}

// runDevKind runs step on node: record is the action record (its args), and
// outputs the file of $MUSTER_OUTPUTS.
func runDevKind(dir, step, node, outputs string, record io.Reader, out io.Writer) error {
	if dir == "" || node == "" || !devStepKnown(step) {
		return &cli.ExitError{Code: 2, Err: fmt.Errorf("dev kind: want --dir, $MUSTER_NODE_ID and a step among %s", devStepNames())}
	}
	var rec struct {
		Args map[string]any `json:"args"`
	}
	if err := json.NewDecoder(record).Decode(&rec); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("dev kind: read the action record: %w", err)
	}
	arg := func(name string) string {
		if v, ok := rec.Args[name]; ok {
			return fmt.Sprint(v)
		}
		return ""
	}
	if failed, err := devShouldFail(dir, step, node); err != nil {
		return err
	} else if failed {
		fmt.Fprintf(out, "%s on %s: failing on purpose (fail/%s.%s in the dev data directory)\n", step, node, step, node)
		return &cli.ExitError{Code: 3, Err: fmt.Errorf("%s failed on purpose", step)}
	}
	statePath := filepath.Join(dir, node, "example-state.json")
	st := devNodeState{Version: devInitialVersion}
	if b, err := os.ReadFile(statePath); err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("dev kind: %s: %w", statePath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	switch step {
	case "drain":
		st.Drained = true
		fmt.Fprintf(out, "%s drained\n", node)
	case "undrain":
		st.Drained = false
		fmt.Fprintf(out, "%s back in service\n", node)
	case "upgrade":
		v := arg("version")
		if v == "" {
			return &cli.ExitError{Code: 2, Err: errors.New("upgrade: args.version is required")}
		}
		prev := st.Version
		st.Version = v
		if outputs != "" {
			b, _ := json.Marshal(map[string]string{"previous": prev})
			if err := os.WriteFile(outputs, b, 0o600); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "%s upgraded from %s to %s\n", node, prev, v)
	case "verify":
		if v := arg("version"); v != "" && v != st.Version {
			fmt.Fprintf(out, "%s runs %s, not %s\n", node, st.Version, v)
			return &cli.ExitError{Code: 1, Err: errors.New("verify: wrong version")}
		}
		fmt.Fprintf(out, "%s healthy at %s\n", node, st.Version)
	case "restart":
		fmt.Fprintf(out, "%s: %s restarted\n", node, orDefault(arg("service"), "service"))
	case "health":
		fmt.Fprintf(out, "%s: %s healthy\n", node, orDefault(arg("service"), "service"))
	case "backup":
		fmt.Fprintf(out, "%s: %s backup written to %s\n", node, orDefault(arg("mode"), "full"), orDefault(arg("destination"), "(default)"))
	}
	b, _ := json.Marshal(st)
	if err := os.MkdirAll(filepath.Dir(statePath), 0o755); err != nil {
		return err
	}
	return os.WriteFile(statePath, b, 0o644)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// devShouldFail reports whether step fails on node now: the file
// fail/STEP.NODE exists, empty or holding a count above zero (then counted
// down).
func devShouldFail(dir, step, node string) (bool, error) {
	p := filepath.Join(dir, "fail", step+"."+node)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return true, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return false, nil
	}
	return true, os.WriteFile(p, []byte(strconv.Itoa(n-1)+"\n"), 0o644)
}
