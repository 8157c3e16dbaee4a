package postgres

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Redact shows a connection string without its secrets: host, port, database
// and user as pgx reads them, and nothing else. A string pgx cannot read
// shows nothing of itself (an unescaped character of a password may be what
// broke it): "" then.
func Redact(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil || ambiguousURL(dsn) {
		return ""
	}
	return fmt.Sprintf("host=%s port=%d database=%s user=%s", cfg.Host, cfg.Port, cfg.Database, cfg.User)
}

// Describe is Redact for a message: what to call the DSN.
func Describe(dsn string) string {
	if r := Redact(dsn); r != "" {
		return r
	}
	return "not shown: pgx cannot read it"
}

// ambiguousURL reports a URL whose user info holds an unescaped @: pgx then
// takes part of the password for the host, which Redact would show.
func ambiguousURL(dsn string) bool {
	if !LooksLikeURL(dsn) {
		return false
	}
	_, rest, _ := strings.Cut(dsn, "://")
	authority, _, _ := strings.Cut(rest, "/")
	authority, _, _ = strings.Cut(authority, "?")
	return strings.Count(authority, "@") > 1
}

var passwordKey = regexp.MustCompile(`(?i)(^|\s)password\s*=`)

// HasPassword reports whether the connection string itself holds a password
// (a password in the URL's user info or query, or a password key), or may
// hold one: a URL that cannot be read counts as one.
func HasPassword(dsn string) bool {
	if LooksLikeURL(dsn) {
		u, err := url.Parse(dsn)
		if err != nil {
			return true
		}
		_, set := u.User.Password()
		return set || u.Query().Has("password")
	}
	return passwordKey.MatchString(dsn)
}

// LooksLikeURL reports whether dsn is a postgres:// or postgresql:// URL.
func LooksLikeURL(dsn string) bool {
	l := strings.ToLower(strings.TrimSpace(dsn))
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

var dsnKey = regexp.MustCompile(`(?i)(^|\s)(host|hostaddr|port|user|dbname|password|passfile|sslmode|service)\s*=`)

// LooksLikeDSN reports whether s is a PostgreSQL connection string rather
// than a file name: a postgres:// URL, or key=value pairs with a key of
// libpq's.
func LooksLikeDSN(s string) bool {
	return LooksLikeURL(s) || dsnKey.MatchString(s)
}
