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
	if ambiguousURL(dsn) {
		return ""
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
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

// ambiguousURL reports a URL with an @ other than one ending its user info:
// two in the authority, or one after the authority's end (its first /, ?
// or #). Either is most often a password with an unescaped @, /, ? or #,
// which pgx then cuts into a host, a port, a database or a parameter that
// Redact and pgx's errors would show ("postgres://muster:5432/Secr3t@db"
// reads as host muster, database "Secr3t@db"). Such a URL is refused
// whole: an @ anywhere but in the user info is written %40.
func ambiguousURL(dsn string) bool {
	if !LooksLikeURL(dsn) {
		return false
	}
	_, rest, _ := strings.Cut(dsn, "://")
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	return strings.Count(rest[:end], "@") > 1 || strings.Contains(rest[end:], "@")
}

var passwordKey = regexp.MustCompile(`(?i)(^|\s)password\s*=`)

// HasPassword reports whether the connection string itself holds a password
// (a password in the URL's user info or query, or a password key), or may
// hold one: a URL that cannot be read, or is ambiguous, counts as one.
func HasPassword(dsn string) bool {
	if ambiguousURL(dsn) {
		return true
	}
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
