package runs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// Core-side steps (docs/runs-and-playbooks.md, "Gates" and "Core-side
// steps"): a step may be a gate the core evaluates or a call the core
// sends, instead of a kind its node's agent runs. Either is stored as a
// step of a reserved kind whose args are the gate or the call, so that
// templates, the plan and the digest treat it as any step's args.
const (
	// KindGate is the kind of a gate step; its args are a wire.Gate.
	KindGate = "core/gate"
	// KindCall is the kind of a call step; its args are a wire.Call.
	KindCall = "core/call"
	// MaxCoreTimeoutS bounds one evaluation of a gate or one call;
	// DefaultCoreTimeoutS is its timeout when the step gives none.
	MaxCoreTimeoutS     = 300
	DefaultCoreTimeoutS = 10
)

// IsCoreKind reports whether a step of kind k is run by the core.
func IsCoreKind(k string) bool { return k == KindGate || k == KindCall }

// Expect is a gate's comparison of a value, as "< 0.01".
type Expect struct {
	Op    string
	Value float64
}

// expectOps are the comparisons of an expect, longest first.
var expectOps = []string{"<=", ">=", "==", "!=", "<", ">"}

// ParseExpect reads an expect: a comparison and a number.
func ParseExpect(s string) (Expect, error) {
	t := strings.TrimSpace(s)
	for _, op := range expectOps {
		if rest, ok := strings.CutPrefix(t, op); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				return Expect{}, fmt.Errorf("expect %q: %q is not a number", s, strings.TrimSpace(rest))
			}
			return Expect{Op: op, Value: v}, nil
		}
	}
	return Expect{}, fmt.Errorf("expect %q is not a comparison such as \"< 0.01\" (%s)", s, strings.Join(expectOps, " "))
}

// Holds reports whether v meets e.
func (e Expect) Holds(v float64) bool {
	switch e.Op {
	case "<":
		return v < e.Value
	case "<=":
		return v <= e.Value
	case ">":
		return v > e.Value
	case ">=":
		return v >= e.Value
	case "==":
		return v == e.Value
	case "!=":
		return v != e.Value
	}
	return false
}

// coreStepForm turns a step given as gate or call into its stored form
// (kind and args), and checks the args of a step of a core kind.
func coreStepForm(sp *wire.StepSpec) error {
	switch {
	case sp.Gate != nil && sp.Call != nil:
		return fmt.Errorf("a step is a gate or a call, not both")
	case sp.Gate != nil || sp.Call != nil:
		if sp.Kind != "" || len(sp.Args) > 0 {
			return fmt.Errorf("a gate or a call step has no kind or args")
		}
		var v any = sp.Gate
		sp.Kind = KindGate
		if sp.Call != nil {
			v, sp.Kind = sp.Call, KindCall
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		sp.Args, sp.Gate, sp.Call = b, nil, nil
	}
	if !IsCoreKind(sp.Kind) {
		if sp.SoakS != 0 {
			return fmt.Errorf("soak_s is for gates")
		}
		return nil
	}
	if sp.SoakS < 0 || sp.SoakS > MaxWaitS || (sp.SoakS > 0 && sp.Kind != KindGate) {
		return fmt.Errorf("soak_s is for gates, between 0 and %d (7 days)", MaxWaitS)
	}
	if sp.TimeoutS > MaxCoreTimeoutS {
		return fmt.Errorf("timeout_s of a gate or a call is at most %d", MaxCoreTimeoutS)
	}
	if sp.Kind == KindGate {
		_, err := DecodeGate(sp.Args)
		return err
	}
	_, err := DecodeCall(sp.Args)
	return err
}

// strictJSON decodes b into v, refusing unknown fields.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// templated reports whether s holds a template: its final form is known
// only when rendered for a node.
func templated(s string) bool { return strings.Contains(s, "{{") }

// checkCoreURL checks a gate's or a call's URL, unless it holds a
// template (checked when rendered).
func checkCoreURL(raw string) error {
	if raw == "" {
		return fmt.Errorf("url is required")
	}
	if templated(raw) {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("url %q is not an http(s) URL with a host", raw)
	}
	return nil
}

// DecodeGate reads and checks a gate step's args.
func DecodeGate(args json.RawMessage) (wire.Gate, error) {
	var g wire.Gate
	if err := strictJSON(args, &g); err != nil {
		return g, fmt.Errorf("gate: %v", err)
	}
	switch {
	case (g.HTTP == nil) == (g.Prometheus == nil):
		return g, fmt.Errorf("a gate is one of http or prometheus")
	case g.HTTP != nil:
		if err := checkCoreURL(g.HTTP.URL); err != nil {
			return g, fmt.Errorf("gate: http: %v", err)
		}
		if s := g.HTTP.ExpectStatus; s != 0 && (s < 100 || s > 599) {
			return g, fmt.Errorf("gate: http: expect_status %d is not an HTTP status", s)
		}
	default:
		p := g.Prometheus
		if err := checkCoreURL(p.URL); err != nil {
			return g, fmt.Errorf("gate: prometheus: %v", err)
		}
		if strings.TrimSpace(p.Query) == "" {
			return g, fmt.Errorf("gate: prometheus: query is required")
		}
		if _, err := ParseExpect(p.Expect); err != nil {
			return g, fmt.Errorf("gate: prometheus: %v", err)
		}
	}
	return g, nil
}

// callMethods are the methods a call may use.
var callMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}

// DecodeCall reads and checks a call step's args.
func DecodeCall(args json.RawMessage) (wire.Call, error) {
	var c wire.Call
	if err := strictJSON(args, &c); err != nil {
		return c, fmt.Errorf("call: %v", err)
	}
	if c.HTTP == nil {
		return c, fmt.Errorf("a call is an http request: call: {http: {method, url, body, headers}}")
	}
	h := c.HTTP
	if h.Method != "" && !slices.Contains(callMethods, h.Method) {
		return c, fmt.Errorf("call: http: method %q is not one of %s", h.Method, strings.Join(callMethods, " "))
	}
	if err := checkCoreURL(h.URL); err != nil {
		return c, fmt.Errorf("call: http: %v", err)
	}
	for k := range h.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			return c, fmt.Errorf("call: http: header name %q is not valid", k)
		}
	}
	return c, nil
}

// checkCoreStage checks a stage's auto_promote_after_s and abort_on
// against its steps (named where in errors).
func checkCoreStage(st *wire.StageSpec, where string) error {
	if st.AutoPromoteAfterS < 0 || st.AutoPromoteAfterS > MaxWaitS {
		return invalid("%s: auto_promote_after_s must be between 0 and %d (7 days)", where, MaxWaitS)
	}
	if st.AutoPromoteAfterS > 0 && st.Canary == 0 {
		return invalid("%s: auto_promote_after_s promotes a canary: the stage has none", where)
	}
	gates := 0
	for _, sp := range st.Steps {
		if sp.Kind == KindGate {
			gates++
		}
	}
	if st.AutoPromoteAfterS > 0 && gates == 0 {
		return invalid("%s: auto_promote_after_s waits for the canary's gates: the stage's steps have none", where)
	}
	seen := map[string]bool{}
	for _, name := range st.AbortOn {
		if seen[name] {
			return invalid("%s: abort_on names %q twice", where, name)
		}
		seen[name] = true
		if !slices.ContainsFunc(st.Steps, func(sp wire.StepSpec) bool { return sp.Name == name && sp.Kind == KindGate }) {
			return invalid("%s: abort_on: %q is not a gate step of the stage", where, name)
		}
	}
	return nil
}

// coreTimeout is the timeout of one evaluation of a core step.
func coreTimeout(sp *store.RunStep) int {
	if sp.TimeoutS > 0 {
		return sp.TimeoutS
	}
	return DefaultCoreTimeoutS
}
