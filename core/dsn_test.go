package core

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 17, item 7: a PostgreSQL connection string given without
// store.driver postgres (MUSTER_STORE_DSN alone, say) is refused by name,
// shown redacted: the password never reaches the error, nor does any of a
// string pgx cannot read. A file name still opens SQLite.
func TestAPostgresDSNWithoutTheDriverIsRefusedRedacted(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"postgres://muster:s3cret-pw@db.example:5432/muster":           "(host=db.example port=5432 database=muster user=muster)",
		"postgresql://muster:s3cret@pw@db.example/muster":              "(not shown: pgx cannot read it)",
		"postgresql://muster:5432/s3cret@db.example/muster":            "(not shown: pgx cannot read it)",
		"host=db.example user=muster password=s3cret-pw dbname=muster": "host=db.example",
		"host = db.example password = s3cret-pw":                       "host=db.example",
		"host=db.example password='s3cret-pw":                          "(not shown: pgx cannot read it)",
	} {
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Store.DSN = dsn
		st, _, err := openStore(context.Background(), cfg)
		if err == nil {
			st.Close()
			t.Fatalf("%s opened a store", dsn)
		}
		if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "store.driver: postgres") || !strings.Contains(err.Error(), want) {
			t.Errorf("openStore(%q) = %v; want it redacted, saying %q and naming store.driver", dsn, err, want)
		}
	}
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store.DSN = filepath.Join(t.TempDir(), "core.db")
	st, _, err := openStore(context.Background(), cfg)
	if err != nil {
		t.Fatalf("a SQLite file: %v", err)
	}
	st.Close()
}

// Issue 30, item 6: with store.driver postgres, what the core says of a
// DSN whose password holds an unescaped @ shows no part of the password,
// nor when a / of the password ends the URL's authority early.
func TestACoreShowsNoPartOfAPasswordWithAnUnescapedAt(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"postgres://muster:Secr3tA@Rest0fPassA@127.0.0.1:1/muster?connect_timeout=1",
		"postgres://muster:5432/Secr3tA@127.0.0.1:1/muster?connect_timeout=1",
	} {
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Store.Driver, cfg.Store.DSN = DriverPostgres, dsn
		if err := cfg.Validate(); err != nil && (strings.Contains(err.Error(), "Secr3tA") || strings.Contains(err.Error(), "Rest0fPassA")) {
			t.Fatalf("Validate shows the password: %v", err)
		}
		st, _, err := openStore(context.Background(), cfg)
		if err == nil {
			st.Close()
			t.Fatalf("%s opened a store", dsn)
		}
		if strings.Contains(err.Error(), "Secr3tA") || strings.Contains(err.Error(), "Rest0fPassA") {
			t.Errorf("openStore(%s) = %v: shows part of the password", dsn, err)
		}
	}
}
