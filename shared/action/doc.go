// Package action is the one source of truth for muster's action record: its
// fields, its states and the table of transitions between them. The agent, the
// core and the client all use it; nothing else defines a state.
package action
