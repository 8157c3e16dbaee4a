package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/store/pgtest"
)

// Issue 17, item 7: a password never appears in what Open says, whatever
// the connection string looks like: URLs with an unescaped @, key=value
// pairs with spaces around =, a server that answers with an error, one that
// does not answer. A DSN pgx reads is shown by host, port, database and user.
func TestPostgresPasswordNeverAppearsInStartupErrors(t *testing.T) {
	t.Parallel()
	real, err := url.Parse(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	real.User = url.UserPassword(real.User.Username(), "s3cret-pw")
	missing := *real
	missing.Path = "/no_such_database"
	for name, tc := range map[string]struct{ dsn, want string }{
		"unescaped @":           {"postgres://muster:s3cret-pw@@db.example:5432/muster?connect_timeout=1", ""},
		"spaces around =":       {"host = 127.0.0.1 port = 1 password = s3cret-pw user = muster connect_timeout = 1", "host=127.0.0.1 port=1"},
		"unclosed quote":        {"host=127.0.0.1 password='s3cret-pw user=muster", "pgx can read"},
		"bad port":              {"postgres://muster:s3cret-pw@127.0.0.1:notaport/muster", "pgx can read"},
		"key=value, no server":  {"host=127.0.0.1 port=1 user=muster password=s3cret-pw dbname=muster connect_timeout=1", "host=127.0.0.1 port=1 database=muster user=muster"},
		"server answers an err": {missing.String(), "database=no_such_database"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := Open(context.Background(), tc.dsn)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%s) succeeded", name)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error shows the password: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
	for dsn, want := range map[string]string{
		"postgres://muster:Secr3tA@Rest0fPassA@db.example/app":      "",
		"postgres://muster:s3cret-pw@db.example:6432/app":           "host=db.example port=6432 database=app user=muster",
		"host=db.example user=muster password=s3cret-pw dbname=app": "host=db.example port=5432 database=app user=muster",
		"host=db password='s3cret-pw":                               "",
		"postgres://muster:s3cret@pw@db.example/app":                "",
		"postgres://muster:5432/s3cret@db.example/app":              "",
		"postgres://muster@db.example/app?user=s3cret@pw":           "",
	} {
		if got := Redact(dsn); got != want {
			t.Errorf("Redact(%q) = %q, want %q", dsn, got, want)
		}
	}
	for dsn, want := range map[string]bool{
		"postgres://muster:pw@db/app": true, "postgres://muster@db/app?password=pw": true, "postgres://muster@db/app": false,
		"host=db password=pw": true, "host=db user=muster": false, "postgres://%zz": true,
		"postgres://muster:5432/pw@db/app": true,
	} {
		if got := HasPassword(dsn); got != want {
			t.Errorf("HasPassword(%q) = %v, want %v", dsn, got, want)
		}
	}
}

// Issue 30, item 6: a password with an unescaped @ is not cut in two, the
// second half shown as a host: nothing after the URL's user name reaches
// the error, for a server that does not answer (a real connection
// refused) as for a name that does not resolve.
func TestNoPartOfAPasswordWithAnUnescapedAtIsShown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	for _, dsn := range []string{
		"postgres://muster:Secr3tA@Rest0fPassA@127.0.0.1/muster?connect_timeout=1",
		fmt.Sprintf("postgres://muster:Secr3tA@Rest0fPassA@127.0.0.1:%d/muster?connect_timeout=1", closed),
		fmt.Sprintf("postgresql://muster:Secr3tA:Rest0fPassA@@localhost:%d/muster?connect_timeout=1", closed),
		fmt.Sprintf("postgres://muster:Secr3tA%%40Rest0fPassA@127.0.0.1:%d/muster?connect_timeout=1", closed),
		// A / (or ? or #) of the password ends the authority: pgx took
		// "muster:5432" for the host and the rest for the database.
		"postgres://muster:5432/Secr3tA@127.0.0.1/muster?connect_timeout=1",
		fmt.Sprintf("postgres://muster:%d/Secr3tA@Rest0fPassA@127.0.0.1/muster?connect_timeout=1", closed),
		fmt.Sprintf("postgres://muster@127.0.0.1:%d/muster?connect_timeout=1&application_name=Secr3tA@Rest0fPassA", closed),
		fmt.Sprintf("postgres://127.0.0.1:%d/muster?connect_timeout=1#Secr3tA@Rest0fPassA", closed),
		fmt.Sprintf("host=127.0.0.1 port=%d user=muster password=Secr3tA@Rest0fPassA dbname=muster connect_timeout=1", closed),
	} {
		s, err := Open(context.Background(), dsn)
		if err == nil {
			s.Close()
			t.Fatalf("Open(%s) succeeded", dsn)
		}
		for _, secret := range []string{"Secr3tA", "Rest0fPassA"} {
			if strings.Contains(err.Error(), secret) || strings.Contains(Describe(dsn), secret) {
				t.Errorf("Open(%s) = %v: shows %s", dsn, err, secret)
			}
		}
		if strings.HasPrefix(dsn, "postgres") && !strings.Contains(dsn, "%40") && !errors.Is(err, ErrAmbiguousURL) {
			t.Errorf("Open(%s) = %v; want it refused before pgx reads it, saying to escape", dsn, err)
		}
		t.Logf("%s: %v", dsn, err)
	}
}
