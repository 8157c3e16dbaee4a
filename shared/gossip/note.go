package gossip

import (
	"encoding/json"
	"fmt"
)

// Notes are the direct messages members send each other over memberlist's
// reliable (TCP) channel: "I am leaving" before a member leaves, and "my
// actions changed" from an agent to the cores (docs/architecture.md, "Node
// syncs and reactive progress"). A note never carries action data: the core
// pulls the records over HTTP.
//
// MaxNoteSize bounds a note; a larger one is refused unread.
const MaxNoteSize = 512

// Note is one direct message. Exactly one of its fields is set.
type Note struct {
	// Leaving is the member name of a member about to leave; Proof is the
	// secret whose digest it announced as Meta.Leave.
	Leaving string `json:"leaving,omitempty"`
	Proof   string `json:"proof,omitempty"`
	// Changed names the agent (cluster and node) whose actions changed.
	Changed *NodeRef `json:"changed,omitempty"`
}

// NodeRef names one node of one cluster.
type NodeRef struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
}

// EncodeNote returns the wire form of n.
func EncodeNote(n Note) ([]byte, error) {
	if err := n.validate(); err != nil {
		return nil, err
	}
	return json.Marshal(n)
}

// DecodeNote reads a note written by EncodeNote. A note of unknown content,
// more than one content, or names that are not valid ids is an error.
func DecodeNote(b []byte) (Note, error) {
	if len(b) > MaxNoteSize {
		return Note{}, fmt.Errorf("%w: note of %d bytes, the limit is %d", ErrBadMeta, len(b), MaxNoteSize)
	}
	var n Note
	if err := json.Unmarshal(b, &n); err != nil {
		return Note{}, fmt.Errorf("%w: note: %v", ErrBadMeta, err)
	}
	return n, n.validate()
}

func (n Note) validate() error {
	switch {
	case n.Leaving != "" && n.Changed != nil, n.Proof != "" && n.Leaving == "":
		return fmt.Errorf("%w: note with two contents", ErrBadMeta)
	case n.Leaving != "":
		if len(n.Leaving) > MaxNoteSize/2 || len(n.Proof) > 64 {
			return fmt.Errorf("%w: note: member name or proof too long", ErrBadMeta)
		}
		return nil
	case n.Changed != nil:
		if !validID(n.Changed.Cluster) || !validID(n.Changed.Node) {
			return fmt.Errorf("%w: note: %q/%q is not a valid cluster and node", ErrBadMeta, n.Changed.Cluster, n.Changed.Node)
		}
		return nil
	}
	return fmt.Errorf("%w: empty note", ErrBadMeta)
}

// validID accepts the ids of clusters and nodes: letters, digits, '.', '_'
// and '-', 1 to 128 characters.
func validID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
