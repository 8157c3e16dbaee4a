package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/gossip"
)

func TestGossipKeygenPrintsAUsableKey(t *testing.T) {
	t.Parallel()
	var keys []string
	for range 2 {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{"gossip", "keygen"})
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		k := strings.TrimSpace(out.String())
		if _, err := gossip.ParseKey(k); err != nil {
			t.Fatalf("keygen printed %q: %v", out.String(), err)
		}
		keys = append(keys, k)
	}
	if keys[0] == keys[1] {
		t.Fatal("two keys are equal")
	}
}
