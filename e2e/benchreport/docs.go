package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// The tables of docs/performance.md are made from a results file (`make
// docs`): each sits between <!-- bench:table NAME --> and
// <!-- /bench:table -->, and holds the rows of that table (tableOf), in
// the order of rows, each as the terminal table shows it.

var (
	tableBeginRE = regexp.MustCompile(`^<!-- bench:table ([a-z]+) -->$`)
	tableEnd     = "<!-- /bench:table -->"
)

// tableOf names the documentation table that shows the figure key.
func tableOf(key string) string {
	switch {
	case strings.HasPrefix(key, "run_waves_"), strings.HasPrefix(key, "approve_busy_"),
		strings.HasPrefix(key, "procedure_"), strings.HasPrefix(key, "step_latency_"), strings.HasPrefix(key, "inflight_"):
		return "runs"
	case strings.HasPrefix(key, "notify_"):
		return "notify"
	case strings.HasPrefix(key, "sim_"):
		return "fleet"
	}
	return "core"
}

// readResults reads a results file: a JSON object of numbers or null.
// A null figure is left out (not measured).
func readResults(path string) (map[string]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]*float64
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: not an object of numbers or null: %w", path, err)
	}
	res := map[string]float64{}
	for k, v := range doc {
		if v != nil {
			res[k] = *v
		}
	}
	return res, nil
}

// markdownTable is the table name of docs/performance.md made from res.
func markdownTable(name string, res map[string]float64) string {
	var b strings.Builder
	b.WriteString("| figure | value | reference (same run) | goal |\n|---|---|---|---|\n")
	for _, r := range rows {
		if tableOf(r.key) != name {
			continue
		}
		val, goal := "not measured", r.goal.String()
		if v, ok := res[r.key]; ok {
			val = num(v)
			if r.goal != nil {
				goal += ": " + r.goal.met(v)
			}
		}
		ref := ""
		if rv, ok := res[r.ref]; ok {
			ref = num(rv) + " " + r.refLabel
		} else if r.ref != "" {
			ref = "not measured"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(r.label), val, cell(ref), goal)
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// rewriteDocs replaces every table between markers in doc with the one
// made from res. A table name no row belongs to, or a marker left open,
// is an error.
func rewriteDocs(doc []byte, res map[string]float64) ([]byte, error) {
	known := map[string]bool{}
	for _, r := range rows {
		known[tableOf(r.key)] = true
	}
	var out bytes.Buffer
	lines := strings.SplitAfter(string(doc), "\n")
	for i := 0; i < len(lines); i++ {
		out.WriteString(lines[i])
		m := tableBeginRE.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		if !known[m[1]] {
			return nil, fmt.Errorf("line %d: no figure belongs to table %q", i+1, m[1])
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) != tableEnd {
			j++
		}
		if j == len(lines) {
			return nil, fmt.Errorf("line %d: table %q has no %s", i+1, m[1], tableEnd)
		}
		out.WriteString(markdownTable(m[1], res))
		out.WriteString(lines[j])
		i = j
	}
	return out.Bytes(), nil
}

// writeDocs rewrites the tables of the documentation file docs from the
// results file results.
func writeDocs(docs, results string) error {
	res, err := readResults(results)
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(docs)
	if err != nil {
		return err
	}
	out, err := rewriteDocs(doc, res)
	if err != nil {
		return fmt.Errorf("%s: %w", docs, err)
	}
	return os.WriteFile(docs, out, 0o644)
}
