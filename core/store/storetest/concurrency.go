package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/testwait"
)

// WriteCommitsWhile fails the test unless another write transaction on st
// commits, within testwait.Timeout, while something stands held in the
// middle of its work until release is closed: what names that work in the
// failure ("a run being planned"). It closes release whatever happens, so
// the held work goes on.
func WriteCommitsWhile(t testing.TB, st store.Store, release chan struct{}, what string) {
	t.Helper()
	defer close(release)
	ctx := context.Background()
	wrote := make(chan error, 1)
	go func() {
		wrote <- st.Update(ctx, func(tx store.Tx) error {
			return tx.AppendEvent(ctx, &store.Event{Type: store.EventActionCreated, Actor: "admin", Message: "another write"})
		})
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testwait.Timeout):
		t.Fatalf("a write waited for %s: it holds the write transaction", what)
	}
}
