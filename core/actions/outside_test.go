package actions

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/storetest"
	"github.com/musterhq/muster/shared/action"
)

// withSchema announces schema for muster.io/debug.ping on n1.
func (e *env) withSchema(schema string) {
	e.t.Helper()
	e.update(func(ctx context.Context, tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: cluster, ID: "n1", Addr: "127.0.0.1:1", Source: store.SourceStatic,
			Status: store.NodeUp, Kinds: []string{"muster.io/debug.ping"},
			ArgsSchemas: map[string]json.RawMessage{"muster.io/debug.ping": json.RawMessage(schema)}})
	})
}

// TestActionArgsAreCheckedOutsideTheWriteTransaction: while an action's
// args are checked against its node's args_schema, for a new action or a
// retry, another write of the core commits; the action is then stored.
func TestActionArgsAreCheckedOutsideTheWriteTransaction(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.withSchema(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	ctx := context.Background()
	req := Request{ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.ping", Args: json.RawMessage(`{"n":1}`)}
	var done *store.Record
	e.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		if done, err = e.r.Create(ctx, tx, req, alice); err != nil {
			return err
		}
		done.State = action.Done
		return tx.UpdateAction(ctx, done)
	})
	for name, newAction := range map[string]func() error{
		"create": func() error { _, err := e.r.CreateIn(ctx, e.st, req, alice); return err },
		"retry":  func() error { _, err := e.r.RetryIn(ctx, e.st, done.ID, alice); return err },
	} {
		inCheck, release := make(chan struct{}), make(chan struct{})
		e.r.argsChecked = func() {
			close(inCheck)
			<-release
		}
		made := make(chan error, 1)
		go func() { made <- newAction() }()
		<-inCheck
		storetest.WriteCommitsWhile(t, e.st, release, name+": an action's args being checked")
		if err := <-made; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestActionArgsAreCheckedAgainWhenTheSchemaChangedMeanwhile: the write
// transaction takes the check only when the node's schema for the kind is
// the one the args were checked against; when it changed meanwhile, the
// args are checked again against the schema as it is.
func TestActionArgsAreCheckedAgainWhenTheSchemaChangedMeanwhile(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.withSchema(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	ctx := context.Background()
	checks := 0
	e.r.argsChecked = func() {
		if checks++; checks == 1 {
			e.withSchema(`{"type":"object","properties":{"n":{"type":"integer","maximum":0}}}`)
		}
	}
	_, err := e.r.CreateIn(ctx, e.st, Request{ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.ping",
		Args: json.RawMessage(`{"n":1}`)}, alice)
	if !errors.Is(err, ErrUnprocessable) {
		t.Fatalf("create against a schema that changed to refuse its args: %v, want ErrUnprocessable", err)
	}
	if checks != 2 {
		t.Fatalf("args checked %d times, want twice: once outside, once again on the changed schema", checks)
	}
	// Unchanged, the check is not repeated in the transaction.
	checks = 1
	if _, err := e.r.CreateIn(ctx, e.st, Request{ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.ping",
		Args: json.RawMessage(`{"n":0}`)}, alice); err != nil {
		t.Fatal(err)
	}
	if checks != 2 {
		t.Fatalf("args checked %d times, want once, outside the transaction", checks-1)
	}
}
