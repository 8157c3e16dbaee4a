package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/musterhq/muster/core/api"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
)

// cliAPI is a real core API on a real listener over a SQLite store of
// its own, with the clusters given and a token for each person (name →
// role), for the CLI's commands to talk to.
type cliAPI struct {
	st      store.Store
	url     string
	secrets map[string]string
}

func newCLIAPI(t *testing.T, people map[string]string, clusters ...string) *cliAPI {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Update(ctx, func(tx store.Tx) error {
		for _, id := range clusters {
			if err := tx.PutCluster(ctx, &store.Cluster{ID: id, Status: store.ClusterHealthy}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Config{}, st, nil, slog.New(slog.DiscardHandler))
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Close(); ts.Close() })
	a := &cliAPI{st: st, url: ts.URL, secrets: map[string]string{}}
	for name, role := range people {
		s, err := auth.CreateToken(ctx, st, name, []string{role}, "test", "")
		if err != nil {
			t.Fatal(err)
		}
		a.secrets[name] = s
	}
	return a
}

// run runs muster with args as who and returns what it wrote to standard
// output.
func (a *cliAPI) run(t *testing.T, who string, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	root.SetArgs(append(args, "--addr", a.url, "--token", a.secrets[who]))
	var out lockedBuffer
	root.SetOut(&out)
	root.SetErr(&lockedBuffer{})
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}
