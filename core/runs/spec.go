// Package runs does one approved operation across many nodes of a cluster
// (docs/architecture.md, "Runs and playbooks"): a run's stages, resolved to
// node lists when it is created, approved once through one digest, and executed
// in waves of child actions within each stage's limits. The planner (PlanWith)
// is a pure function of a run and its children; the engine stores what it
// decides, creating and cancelling child actions only through core/actions.
//
// The Engine is three parts that share its policy, action rules and clock:
// the Creator makes runs (Create, CreateIn, InsertAt, InsertOccurrence), the
// Decider makes the changes people ask for and expires runs (Approve,
// Reject, Pause, Resume, Promote, Cancel, MarkUrgent, Retry, Expire), and
// the Advancer moves active runs on (Active, AdvanceIn, AdvanceNodes). This
// package is the one home of every change to a run's row: each is a
// runChange, the row and the events it raises, stored by runChange.save in
// the caller's transaction, as core/actions stores an action's changes with
// actions.Write. A change of a run's state that raises no event is refused.
package runs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/target"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/names"
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
	// OnFailureContinue never stops for errors.
	OnFailureContinue = "continue"
)

// Values of unavailable: what becomes of a DOWN or drained node at its turn.
const (
	UnavailableFail = "fail"
	UnavailableSkip = "skip"
	UnavailableWait = "wait"
)

// Bounds of a run.
const (
	MaxStages   = 50
	MaxChildren = 10_000
	// MaxRunArgs bounds the args of all a run's stages together.
	MaxRunArgs = 256 << 10
	// MaxWaitS bounds a stage's soak and unavailable_timeout (7 days).
	MaxWaitS = 7 * 24 * 3600
	// DefaultUnavailableTimeoutS is how long unavailable: wait waits.
	DefaultUnavailableTimeoutS = 600
	// MaxSteps bounds the steps of a stage's procedure.
	MaxSteps = 50
	// MaxAttempts bounds a step's tries (retry.attempts), MaxRetryDelayS
	// its delay and max_delay, MaxBackoff its backoff factor.
	MaxAttempts    = 20
	MaxRetryDelayS = 3600
	MaxBackoff     = 10
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
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
	if req.DeadlineS < 0 || req.DeadlineS > MaxWaitS {
		return invalid("deadline_s must be between 0 (none) and %d (7 days)", MaxWaitS)
	}
	if err := checkLock(req.Lock, "lock"); err != nil {
		return err
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
		if err := names.CheckStep(st.Name); err != nil {
			return invalid("%s.name: %v", where, err)
		}
		where = fmt.Sprintf("stage %s", st.Name)
		if seen[st.Name] {
			return invalid("%s: the name is used twice", where)
		}
		seen[st.Name] = true
		if len(st.Rollback) > 0 && len(st.Steps) == 0 {
			return invalid("%s: a rollback needs steps", where)
		}
		if len(st.Steps) > 0 {
			if err := checkSteps(st, where); err != nil {
				return err
			}
		} else {
			if IsCoreKind(st.Kind) {
				return invalid("%s: kind %s is a step of a procedure: give it in steps", where, st.Kind)
			}
			if !action.ValidKind(st.Kind) {
				return invalid("%s: kind %q is not of the form domain/name", where, st.Kind)
			}
			args, err := action.NormalizeArgs(st.Args)
			if err != nil {
				return invalid("%s: %v", where, err)
			}
			st.Args = args
		}
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
		case OnFailureAbort, OnFailurePause, OnFailureContinue:
		default:
			return invalid("%s: on_failure %q is not %q, %q or %q", where, st.OnFailure, OnFailureAbort, OnFailurePause,
				OnFailureContinue)
		}
		if st.TimeoutS < 0 || st.TimeoutS > action.MaxTimeoutS {
			return invalid("%s: timeout_s must be between 0 (the agent's default) and %d", where, action.MaxTimeoutS)
		}
		if st.Canary < 0 {
			return invalid("%s: canary must be 0 (none) or more", where)
		}
		if st.SoakS < 0 || st.SoakS > MaxWaitS {
			return invalid("%s: soak_s must be between 0 and %d (7 days)", where, MaxWaitS)
		}
		switch st.Unavailable {
		case "":
			st.Unavailable = UnavailableFail
		case UnavailableFail, UnavailableSkip, UnavailableWait:
		default:
			return invalid("%s: unavailable %q is not %q, %q or %q", where, st.Unavailable, UnavailableFail,
				UnavailableSkip, UnavailableWait)
		}
		if st.UnavailableTimeoutS < 0 || st.UnavailableTimeoutS > MaxWaitS {
			return invalid("%s: unavailable_timeout_s must be between 0 (the default, 600) and %d (7 days)", where, MaxWaitS)
		}
		if err := checkLock(st.Lock, where+": lock"); err != nil {
			return err
		}
		// A run holding its lock for its whole life and waiting for
		// another at a stage could wait on a run doing the reverse, for
		// ever: with a run lock, a stage takes no other.
		if req.Lock != nil && st.Lock != nil && *st.Lock != *req.Lock {
			return invalid("%s: lock %s: the run holds lock %s from start to end, so a stage may take no other (two runs taking them in the opposite order would wait for each other for ever)",
				where, st.Lock.Name, req.Lock.Name)
		}
		if st.Follow && len(st.Target.Labels) == 0 {
			return invalid("%s: follow needs a target of labels: it adds the nodes that join with them", where)
		}
		if st.IncludeFailed && i == 0 {
			return invalid("%s: include_failed: the first stage has no earlier stage whose failed nodes it could include", where)
		}
		if len(st.Steps) == 0 && (st.AutoPromoteAfterS != 0 || len(st.AbortOn) > 0) {
			return invalid("%s: auto_promote_after_s and abort_on need steps with gates", where)
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
		for _, sp := range append(slices.Clone(st.Steps), st.Rollback...) {
			total += len(sp.Args) + len(sp.When)
		}
	}
	if total > MaxRunArgs {
		return invalid("the stages' args come to %d bytes, more than a run may carry (%d)", total, MaxRunArgs)
	}
	if cyc := cycle(req.Stages); cyc != nil {
		return invalid("depends_on forms a cycle: %s", strings.Join(cyc, " → "))
	}
	return nil
}

// checkSteps checks the procedure of stage st (named where in errors):
// step names, kinds, args, timeouts and retries.
func checkSteps(st *wire.StageSpec, where string) error {
	if st.Kind != "" || len(st.Args) > 0 || st.TimeoutS != 0 {
		return invalid("%s: a stage with steps gives kind, args and timeout in each step", where)
	}
	if n := len(st.Steps) + len(st.Rollback); n > MaxSteps {
		return invalid("%s: a stage has at most %d steps, rollback included, not %d", where, MaxSteps, n)
	}
	all := map[string]bool{}
	for _, sp := range st.Steps {
		all[sp.Name] = true
	}
	for _, sp := range st.Rollback {
		all[sp.Name] = true
	}
	seen := map[string]bool{}
	list := append(slices.Clone(st.Steps), st.Rollback...)
	for j := range list {
		sp := &list[j]
		at := fmt.Sprintf("%s: steps[%d]", where, j)
		if j >= len(st.Steps) {
			at = fmt.Sprintf("%s: rollback[%d]", where, j-len(st.Steps))
		}
		if err := names.CheckStep(sp.Name); err != nil {
			return invalid("%s.name: %v", at, err)
		}
		at = fmt.Sprintf("%s: step %s", where, sp.Name)
		if seen[sp.Name] {
			return invalid("%s: the name is used twice", at)
		}
		seen[sp.Name] = true
		if err := coreStepForm(sp); err != nil {
			return invalid("%s: %v", at, err)
		}
		if !action.ValidKind(sp.Kind) {
			return invalid("%s: kind %q is not of the form domain/name", at, sp.Kind)
		}
		args, err := action.NormalizeArgs(sp.Args)
		if err != nil {
			return invalid("%s: %v", at, err)
		}
		sp.Args = args
		if sp.TimeoutS < 0 || sp.TimeoutS > action.MaxTimeoutS {
			return invalid("%s: timeout_s must be between 0 (the agent's default) and %d", at, action.MaxTimeoutS)
		}
		if err := checkRetry(sp.Retry); err != nil {
			return invalid("%s: retry: %v", at, err)
		}
		// Templates see the steps before this one: for a rollback step,
		// every step and the rollback steps before it.
		before := maps.Clone(seen)
		delete(before, sp.Name)
		if sp.When != "" && sp.When != WhenAlways {
			if !strings.Contains(sp.When, "{{") {
				return invalid("%s: when %q is neither %q nor a template such as {{ eq .steps.NAME.state \"DONE\" }}",
					at, sp.When, WhenAlways)
			}
			if err := checkStepTemplate(sp.When, at+": when", before, all); err != nil {
				return err
			}
		}
		if err := checkArgTemplates(sp.Args, at, before, all); err != nil {
			return err
		}
	}
	copy(st.Steps, list[:len(st.Steps)])
	copy(st.Rollback, list[len(st.Steps):])
	return checkCoreStage(st, where)
}

// checkLock checks a lock of a run or a stage (nil: none) and fills its
// scope's default, cluster.
func checkLock(l *wire.Lock, where string) error {
	if l == nil {
		return nil
	}
	if err := names.CheckStep(l.Name); err != nil {
		return invalid("%s: name: %v", where, err)
	}
	switch l.Scope {
	case "":
		l.Scope = wire.LockCluster
	case wire.LockCluster, wire.LockGlobal:
	default:
		return invalid("%s: scope %q is not %q or %q", where, l.Scope, wire.LockCluster, wire.LockGlobal)
	}
	return nil
}

// storeLock is a checked wire lock as the store keeps it (nil: none).
func storeLock(l *wire.Lock) *store.Lock {
	if l == nil {
		return nil
	}
	return &store.Lock{Name: l.Name, Scope: l.Scope}
}

// checkRetry checks a step's retry (nil: no retry).
func checkRetry(r *wire.Retry) error {
	if r == nil {
		return nil
	}
	switch {
	case r.Attempts < 1 || r.Attempts > MaxAttempts:
		return fmt.Errorf("attempts must be between 1 and %d, not %d", MaxAttempts, r.Attempts)
	case r.DelayS < 0 || r.DelayS > MaxRetryDelayS:
		return fmt.Errorf("delay_s must be between 0 and %d (1h), not %d", MaxRetryDelayS, r.DelayS)
	case r.MaxDelayS < 0 || r.MaxDelayS > MaxRetryDelayS:
		return fmt.Errorf("max_delay_s must be between 0 and %d (1h), not %d", MaxRetryDelayS, r.MaxDelayS)
	case r.Backoff != 0 && (r.Backoff < 1 || r.Backoff > MaxBackoff):
		return fmt.Errorf("backoff must be between 1 and %g, not %g", float64(MaxBackoff), r.Backoff)
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
// Of each stage's nodes it keeps those the limit
// picks (target.Limit: node ids or globs; none: every node), and gives
// each stage the locks its kinds declare (locks; nil: none), as if the
// stage said them (lockKinds). Each pattern of the limit must pick a node
// of the cluster, and each stage keep one node at least.
func Resolve(req *wire.CreateRunRequest, nodes []store.Node, limit []string, locks KindLocks) ([]store.RunStage, error) {
	if err := target.CheckLimit(limit, nodes); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnresolvable, err)
	}
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
		all := ids
		if ids = target.Limit(all, limit); len(ids) == 0 {
			return nil, fmt.Errorf("%w: stage %s: the limit %s keeps none of its node(s) %s", ErrUnresolvable, sp.Name,
				strings.Join(limit, ","), strings.Join(all, ", "))
		}
		rs := store.RunStage{Name: sp.Name, Kind: sp.Kind, Args: sp.Args, TimeoutS: sp.TimeoutS}
		for _, step := range sp.Steps {
			rs.Steps = append(rs.Steps, store.RunStep{Name: step.Name, Kind: step.Kind, Args: step.Args,
				TimeoutS: step.TimeoutS, Retry: (*store.Retry)(step.Retry), When: step.When, SoakS: step.SoakS})
		}
		for _, step := range sp.Rollback {
			rs.Rollback = append(rs.Rollback, store.RunStep{Name: step.Name, Kind: step.Kind, Args: step.Args,
				TimeoutS: step.TimeoutS, Retry: (*store.Retry)(step.Retry), When: step.When, SoakS: step.SoakS})
		}
		perNode := 0
		for _, step := range append(slices.Clone(rs.Procedure()), rs.Rollback...) {
			var lacking []string
			for _, id := range ids {
				if IsCoreKind(step.Kind) {
					break // the core runs it
				}
				if k := byID[id].Kinds; len(k) > 0 && !slices.Contains(k, step.Kind) {
					lacking = append(lacking, id)
				}
			}
			if len(lacking) > 0 {
				return nil, fmt.Errorf("%w: stage %s: kind %s is unknown to node(s) %s", ErrUnresolvable,
					sp.Name, step.Kind, strings.Join(lacking, ", "))
			}
			if err := checkSecrets(sp.Name, &step, ids, byID); err != nil {
				return nil, err
			}
			perNode += step.Attempts()
		}
		if err := planNodes(&rs, ids, byID); err != nil {
			return nil, fmt.Errorf("stage %s: %w", sp.Name, err)
		}
		if sp.Canary > 0 && sp.Canary >= len(ids) {
			return nil, invalid("stage %s: canary %d must be fewer than the stage's %d node(s)", sp.Name, sp.Canary, len(ids))
		}
		// Every step of every node, and every attempt at most.
		total += len(ids) * perNode
		if total > MaxChildren {
			return nil, invalid("a run creates at most %d child actions, counting every step and retry; this one could create %d or more",
				MaxChildren, total)
		}
		out = append(out, store.RunStage{Steps: rs.Steps, Rollback: rs.Rollback, Canary: sp.Canary, SoakS: sp.SoakS,
			Unavailable: sp.Unavailable, UnavailableTimeoutS: sp.UnavailableTimeoutS, IncludeFailed: sp.IncludeFailed,
			Follow: sp.Follow, Lock: storeLock(sp.Lock), Name: sp.Name, Kind: sp.Kind, Args: sp.Args, Target: store.Target(sp.Target), Nodes: ids,
			MaxConcurrency: *sp.MaxConcurrency, MaxErrors: *sp.MaxErrors, OnFailure: sp.OnFailure,
			DependsOn: sp.DependsOn, TimeoutS: sp.TimeoutS, State: store.StagePending,
			AutoPromoteAfterS: sp.AutoPromoteAfterS, AbortOn: sp.AbortOn,
		})
	}
	if err := lockKinds(out, storeLock(req.Lock), locks); err != nil {
		return nil, err
	}
	return out, nil
}

// planNodes checks, for every node of stage st (ids), what can be known of
// its steps before the run: each when renders true or false, and each step's
// args match the args_schema the node announced for its kind (each node is
// checked against its own: nodes may run different versions of a kind).
func planNodes(st *store.RunStage, ids []string, byID map[string]*store.Node) error {
	steps := append(slices.Clone(st.Procedure()), st.Rollback...)
	need := false
	for _, sp := range steps {
		if strings.Contains(sp.When, "{{") {
			need = true
		}
		for _, id := range ids {
			if _, ok := byID[id].ArgsSchemas[sp.Kind]; ok {
				need = true
			}
		}
	}
	if !need {
		return nil
	}
	type key struct{ schema, args string }
	checked := map[key]error{} // the same args against the same schema
	ctxs := map[string]nodeContext{}
	pl := newPlanner(steps)
	for i := range steps {
		sp := &steps[i]
		when := strings.Contains(sp.When, "{{")
		var failed []string
		var first error
		for _, id := range ids {
			n := byID[id]
			raw, ok := n.ArgsSchemas[sp.Kind]
			if !ok && !when {
				continue
			}
			c, made := ctxs[id]
			if !made {
				c = pl.context(id, n.Labels)
				ctxs[id] = c
			}
			if err := pl.when(sp, c); err != nil {
				return fmt.Errorf("%w: node %s: %v", ErrInvalid, id, err)
			}
			if !ok {
				continue
			}
			args, later, err := pl.args(sp, c)
			if err != nil {
				return fmt.Errorf("%w: node %s: %v", ErrInvalid, id, err)
			}
			k := key{string(raw), string(args)}
			err, done := checked[k]
			if !done || len(later) > 0 {
				err = actions.ValidateArgs(n, sp.Kind, args, func(f string) bool { return later[f] })
				if len(later) == 0 {
					checked[k] = err
				}
			}
			if err != nil {
				failed = append(failed, id)
				if first == nil {
					first = fmt.Errorf("node %s: %s: %w", id, sp.Kind, err)
				}
			}
		}
		if first != nil {
			more := ""
			if len(failed) > 1 {
				rest := failed[1:]
				if len(rest) > 3 {
					rest = append(rest[:3:3], "…")
				}
				more = fmt.Sprintf(" (and %d more node(s): %s)", len(failed)-1, strings.Join(rest, ", "))
			}
			where := "step " + displayStep(sp.Name)
			if sp.Name == "" {
				where = "args"
			}
			return fmt.Errorf("%w: %s: %w%s", ErrUnresolvable, where, first, more)
		}
	}
	return nil
}

// Digest fingerprints what an approver of the run signs off: the cluster
// and every stage's name, kind, canonical args, resolved nodes, limits,
// on_failure, dependencies, timeout, include_failed, auto_promote_after_s
// and abort_on, the locks its kinds declare, and its steps (each one's name, kind, canonical args,
// timeout, retry and soak: a gate's or a call's args are the gate or the
// call).
func Digest(clusterID string, stages []store.RunStage) string { return DigestRun(clusterID, stages, 0) }

// DigestRun is Digest of a run with a deadline (deadlineS seconds; 0 for
// none gives Digest's).
func DigestRun(clusterID string, stages []store.RunStage, deadlineS int) string {
	return DigestRunAt(clusterID, stages, deadlineS, nil)
}

// DigestRunAt is DigestRun covering the run's not_before too: an approver
// approves this run, at that time (docs/architecture.md, "Windows, freezes
// and later starts"). Without a not_before it is DigestRun.
func DigestRunAt(clusterID string, stages []store.RunStage, deadlineS int, notBefore *time.Time) string {
	return DigestRunLocked(clusterID, stages, deadlineS, notBefore, nil)
}

// DigestRunLocked is DigestRunAt covering the lock the run takes too
// (nil: none, which gives DigestRunAt's). Each stage's lock, and the steps
// a retry from the failed step reuses on each node, are in every digest.
func DigestRunLocked(clusterID string, stages []store.RunStage, deadlineS int, notBefore *time.Time, lock *store.Lock) string {
	type stage struct {
		Name, Kind string
		Args       json.RawMessage
		Nodes      []string
		Conc, Errs string
		OnFailure  string
		DependsOn  []string
		TimeoutS   int
		Steps      []store.RunStep `json:",omitempty"`
		Rollback   []store.RunStep `json:",omitempty"`
		Canary     int             `json:",omitempty"`
		SoakS      int             `json:",omitempty"`
		// Unavailable is left out when it is the default, fail.
		Unavailable         string                        `json:",omitempty"`
		UnavailableTimeoutS int                           `json:",omitempty"`
		IncludeFailed       bool                          `json:",omitempty"`
		Lock                *store.Lock                   `json:",omitempty"`
		Reuse               map[string][]store.ReusedStep `json:",omitempty"`
		AutoPromoteAfterS   int                           `json:",omitempty"`
		AbortOn             []string                      `json:",omitempty"`
		KindLocks           []store.KindLock              `json:",omitempty"`
		// Follow is the labels of a stage with follow, whose nodes
		// are left out: its approval covers the nodes matching them,
		// those that join while it runs included.
		Follow map[string]string `json:",omitempty"`
	}
	v := struct {
		Cluster   string
		Stages    []stage
		DeadlineS int         `json:",omitempty"`
		NotBefore string      `json:",omitempty"`
		Lock      *store.Lock `json:",omitempty"`
	}{Cluster: clusterID, DeadlineS: deadlineS, Lock: lock}
	if notBefore != nil {
		v.NotBefore = notBefore.UTC().Format(time.RFC3339Nano)
	}
	for _, st := range stages {
		args, err := action.NormalizeArgs(st.Args)
		if err != nil {
			args = st.Args
		}
		steps := make([]store.RunStep, len(st.Steps))
		for j, sp := range st.Steps {
			if a, err := action.NormalizeArgs(sp.Args); err == nil {
				sp.Args = a
			}
			steps[j] = sp
		}
		rollback := make([]store.RunStep, len(st.Rollback))
		for j, sp := range st.Rollback {
			if a, err := action.NormalizeArgs(sp.Args); err == nil {
				sp.Args = a
			}
			rollback[j] = sp
		}
		unavailable := st.Unavailable
		if unavailable == UnavailableFail {
			unavailable = ""
		}
		v.Stages = append(v.Stages, stage{st.Name, st.Kind, args, st.Nodes, st.MaxConcurrency.String(),
			st.MaxErrors.String(), st.OnFailure, st.DependsOn, st.TimeoutS, steps, rollback, st.Canary, st.SoakS,
			unavailable, st.UnavailableTimeoutS, st.IncludeFailed, st.Lock, st.Reuse, st.AutoPromoteAfterS, st.AbortOn,
			st.KindLocks, nil})
		if st.Follow {
			s := &v.Stages[len(v.Stages)-1]
			s.Nodes, s.Follow = nil, st.Target.Labels
		}
	}
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// WireKindLocks shows the locks a stage's kinds declare (nil: none).
func WireKindLocks(st *store.RunStage) []wire.KindLock {
	var out []wire.KindLock
	for _, k := range st.KindLocks {
		out = append(out, wire.KindLock{Name: k.Name, Scope: k.Scope, Kinds: k.Kinds})
	}
	return out
}

// WireLock shows a stored lock (nil: none).
func WireLock(l *store.Lock) *wire.Lock {
	if l == nil {
		return nil
	}
	return &wire.Lock{Name: l.Name, Scope: l.Scope}
}
