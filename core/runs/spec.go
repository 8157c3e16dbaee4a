// Package runs does one approved operation across many nodes of a cluster
// (docs/architecture.md, "Runs and playbooks"): a run's stages, resolved to
// node lists when it is created, approved once through one digest, and executed
// in waves of child actions within each stage's limits. The planner (Plan) is a
// pure function of a run and its children; the engine stores what it decides,
// creating and cancelling child actions only through core/actions.
package runs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/target"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// Errors of run specs, matched with errors.Is.
var (
	// ErrInvalid is a spec that can never be valid (a 400).
	ErrInvalid = errors.New("invalid run")
	// ErrUnresolvable is a spec that does not fit the cluster as it is: an
	// unknown node or label, a kind some node lacks (a 422).
	ErrUnresolvable = errors.New("run does not fit the cluster")
)

// Values of on_failure.
const (
	OnFailureAbort = "abort"
	OnFailurePause = "pause"
)

// Bounds of a run.
const (
	MaxStages   = 50
	MaxChildren = 10_000
	// MaxStageName is the length of a stage name.
	MaxStageName = 64
	// MaxRunArgs bounds the args of all a run's stages together.
	MaxRunArgs = 256 << 10
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func validStageName(s string) bool {
	if s == "" || len(s) > MaxStageName {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// Check validates what does not depend on the cluster and fills the
// defaults: names, kinds, canonical args, limits, on_failure, and
// depends_on (absent: the previous stage), refusing unknown names and cycles.
// It changes req in place.
func Check(req *wire.CreateRunRequest) error {
	if req.ClusterID == "" {
		return invalid("cluster_id is required")
	}
	if len(req.Stages) == 0 {
		return invalid("a run needs at least one stage")
	}
	if len(req.Stages) > MaxStages {
		return invalid("a run has at most %d stages, not %d", MaxStages, len(req.Stages))
	}
	seen := map[string]bool{}
	for i := range req.Stages {
		st := &req.Stages[i]
		if st.Name == "" && len(req.Stages) == 1 {
			st.Name = "main"
		}
		where := fmt.Sprintf("stages[%d]", i)
		if !validStageName(st.Name) {
			return invalid("%s.name %q: letters, digits, '-', '_' and '.', at most %d", where, st.Name, MaxStageName)
		}
		where = fmt.Sprintf("stage %s", st.Name)
		if seen[st.Name] {
			return invalid("%s: the name is used twice", where)
		}
		seen[st.Name] = true
		if !action.ValidKind(st.Kind) {
			return invalid("%s: kind %q is not of the form domain/name", where, st.Kind)
		}
		args, err := action.NormalizeArgs(st.Args)
		if err != nil {
			return invalid("%s: %v", where, err)
		}
		st.Args = args
		if err := checkTarget(&st.Target); err != nil {
			return invalid("%s: target: %v", where, err)
		}
		if st.MaxConcurrency == nil {
			st.MaxConcurrency = &limit.Limit{N: 1}
		}
		if st.MaxConcurrency.N == 0 {
			return invalid("%s: max_concurrency must be at least 1 or 1%%", where)
		}
		if st.MaxErrors == nil {
			st.MaxErrors = &limit.Limit{}
		}
		switch st.OnFailure {
		case "":
			st.OnFailure = OnFailureAbort
		case OnFailureAbort, OnFailurePause:
		default:
			return invalid("%s: on_failure %q is not %q or %q", where, st.OnFailure, OnFailureAbort, OnFailurePause)
		}
		if st.TimeoutS < 0 || st.TimeoutS > action.MaxTimeoutS {
			return invalid("%s: timeout_s must be between 0 (the agent's default) and %d", where, action.MaxTimeoutS)
		}
		if st.DependsOn == nil {
			st.DependsOn = []string{}
			if i > 0 {
				st.DependsOn = []string{req.Stages[i-1].Name}
			}
		}
	}
	for _, st := range req.Stages {
		for _, d := range st.DependsOn {
			if !seen[d] {
				return invalid("stage %s: depends_on names no stage %q", st.Name, d)
			}
			if d == st.Name {
				return invalid("stage %s depends on itself", st.Name)
			}
		}
	}
	total := 0
	for _, st := range req.Stages {
		total += len(st.Args)
	}
	if total > MaxRunArgs {
		return invalid("the stages' args come to %d bytes, more than a run may carry (%d)", total, MaxRunArgs)
	}
	if cyc := cycle(req.Stages); cyc != nil {
		return invalid("depends_on forms a cycle: %s", strings.Join(cyc, " → "))
	}
	return nil
}

// checkTarget checks a target's form; its names are checked when it is
// resolved (a playbook's may hold template references until then).
func checkTarget(t *wire.Target) error { return target.CheckForm(*t) }

// cycle returns the stages of a depends_on cycle, the first repeated at the
// end, or nil.
func cycle(stages []wire.StageSpec) []string {
	deps := map[string][]string{}
	for _, st := range stages {
		deps[st.Name] = st.DependsOn
	}
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var path []string
	var visit func(n string) []string
	visit = func(n string) []string {
		color[n] = grey
		path = append(path, n)
		for _, d := range deps[n] {
			switch color[d] {
			case grey:
				i := slices.Index(path, d)
				return append(slices.Clone(path[i:]), d)
			case white:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		color[n] = black
		return nil
	}
	for _, st := range stages {
		if color[st.Name] == white {
			if c := visit(st.Name); c != nil {
				// Show it in the direction work flows: a → b means b waits for a.
				slices.Reverse(c)
				return c
			}
		}
	}
	return nil
}

// Resolve turns a checked request's targets into sorted node lists against
// the cluster's nodes, and checks that every node knows its stage's kind.
func Resolve(req *wire.CreateRunRequest, nodes []store.Node) ([]store.RunStage, error) {
	byID := map[string]*store.Node{}
	for i := range nodes {
		byID[nodes[i].ID] = &nodes[i]
	}
	total := 0
	var out []store.RunStage
	for _, sp := range req.Stages {
		ids, err := target.Resolve(sp.Target, nodes)
		if err != nil {
			return nil, fmt.Errorf("%w: stage %s: target: %v", ErrUnresolvable, sp.Name, err)
		}
		var lacking []string
		for _, id := range ids {
			if k := byID[id].Kinds; len(k) > 0 && !slices.Contains(k, sp.Kind) {
				lacking = append(lacking, id)
			}
		}
		if len(lacking) > 0 {
			return nil, fmt.Errorf("%w: stage %s: kind %s is unknown to node(s) %s", ErrUnresolvable,
				sp.Name, sp.Kind, strings.Join(lacking, ", "))
		}
		total += len(ids)
		if total > MaxChildren {
			return nil, invalid("a run creates at most %d child actions; this one would create more", MaxChildren)
		}
		out = append(out, store.RunStage{
			Name: sp.Name, Kind: sp.Kind, Args: sp.Args, Target: store.Target(sp.Target), Nodes: ids,
			MaxConcurrency: *sp.MaxConcurrency, MaxErrors: *sp.MaxErrors, OnFailure: sp.OnFailure,
			DependsOn: sp.DependsOn, TimeoutS: sp.TimeoutS, State: store.StagePending,
		})
	}
	return out, nil
}

// Digest fingerprints what an approver of the run signs off: the cluster
// and every stage's name, kind, canonical args, resolved nodes, limits,
// on_failure, dependencies and timeout.
func Digest(clusterID string, stages []store.RunStage) string {
	type stage struct {
		Name, Kind string
		Args       json.RawMessage
		Nodes      []string
		Conc, Errs string
		OnFailure  string
		DependsOn  []string
		TimeoutS   int
	}
	v := struct {
		Cluster string
		Stages  []stage
	}{Cluster: clusterID}
	for _, st := range stages {
		args, err := action.NormalizeArgs(st.Args)
		if err != nil {
			args = st.Args
		}
		v.Stages = append(v.Stages, stage{st.Name, st.Kind, args, st.Nodes, st.MaxConcurrency.String(),
			st.MaxErrors.String(), st.OnFailure, st.DependsOn, st.TimeoutS})
	}
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
