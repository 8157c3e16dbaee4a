package playbook

import (
	"bytes"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Format writes p as the YAML document Parse reads: what a run built field
// by field (the web UI's New run form) becomes before it is planned, so
// that a form and a document are one model, planned and started one way.
// Empty strings and empty lists are left out, as a person would write it.
func Format(p *Playbook) ([]byte, error) {
	var n yaml.Node
	if err := n.Encode(p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	dropEmpty(&n)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return b.Bytes(), nil
}

// Limit is a max_concurrency or max_errors as written: a count or a
// percentage (limit.Parse), or "" for none.
func Limit(s string) yaml.Node {
	if s == "" {
		return yaml.Node{}
	}
	n := yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if _, err := strconv.Atoi(s); err == nil {
		n.Tag = "!!int"
	}
	return n
}

// dropEmpty removes the keys of every mapping under n whose value is an
// empty string, an empty sequence or an empty mapping.
func dropEmpty(n *yaml.Node) {
	for _, c := range n.Content {
		dropEmpty(c)
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	kept := n.Content[:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		v := n.Content[i+1]
		empty := (v.Kind == yaml.ScalarNode && v.Tag == "!!str" && v.Value == "") ||
			((v.Kind == yaml.SequenceNode || v.Kind == yaml.MappingNode) && len(v.Content) == 0)
		if !empty {
			kept = append(kept, n.Content[i], v)
		}
	}
	n.Content = kept
}
