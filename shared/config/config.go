// Package config holds the configuration sections the agent and the core
// share (logging, TLS files), with their validation. Reading configuration
// sources is cmd/muster's job; this package only describes and checks.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"
)

// Log is the log section: level (debug, info, warn, error) and format (text, json).
type Log struct {
	Level  string `mapstructure:"level" yaml:"level"`
	Format string `mapstructure:"format" yaml:"format"`
}

// DefaultLog logs at info level as text.
func DefaultLog() Log { return Log{Level: "info", Format: "text"} }

// Validate returns one error per bad field.
func (l Log) Validate() Errors {
	var errs Errors
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(l.Level)); err != nil {
		errs.Add("log.level", "%q is not debug, info, warn or error", l.Level)
	}
	switch strings.ToLower(l.Format) {
	case "text", "json":
	default:
		errs.Add("log.format", "%q is not text or json", l.Format)
	}
	return errs
}

// TLS names the files of a TLS endpoint.
type TLS struct {
	CertFile     string `mapstructure:"cert_file" yaml:"cert_file"`
	KeyFile      string `mapstructure:"key_file" yaml:"key_file"`
	ClientCAFile string `mapstructure:"client_ca_file" yaml:"client_ca_file"`
}

// API is the listener section of an HTTP API (api.* in both configurations).
type API struct {
	Addr string `mapstructure:"addr" yaml:"addr"`
	TLS  TLS    `mapstructure:"tls" yaml:"tls"`
	// Insecure allows a plaintext listener on a non-loopback address (the
	// core), or a TCP API without the core's certificate (the agent).
	Insecure bool `mapstructure:"insecure" yaml:"insecure"`
	// Server bounds what clients may hold of the server.
	Server `mapstructure:",squash" yaml:",inline"`
}

// Server bounds what the clients of one HTTP server may hold: time to send
// a request, to read an answer, to keep an idle connection, header bytes,
// and open connections (each listener on its own).
type Server struct {
	ReadTimeout    time.Duration `mapstructure:"read_timeout" yaml:"read_timeout"`
	WriteTimeout   time.Duration `mapstructure:"write_timeout" yaml:"write_timeout"`
	IdleTimeout    time.Duration `mapstructure:"idle_timeout" yaml:"idle_timeout"`
	MaxHeaderBytes int           `mapstructure:"max_header_bytes" yaml:"max_header_bytes"`
	MaxConnections int           `mapstructure:"max_connections" yaml:"max_connections"`
	// MaxConnectionsPerClient caps the connections open at once from one
	// client address; beyond it the address's oldest connection doing
	// nothing is closed (or, when all are serving, the new one).
	MaxConnectionsPerClient int `mapstructure:"max_connections_per_client" yaml:"max_connections_per_client"`
}

// DefaultServer is what every API server allows unless configured.
func DefaultServer() Server {
	return Server{
		ReadTimeout:    30 * time.Second,
		WriteTimeout:   60 * time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		MaxConnections: 1024,
		// The core holds a few connections to an agent; a person a few to
		// the core.
		MaxConnectionsPerClient: 64,
	}
}

// Validate returns one error per bad field; prefix names the section.
func (s Server) Validate(prefix string) Errors {
	var errs Errors
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"read_timeout", s.ReadTimeout}, {"write_timeout", s.WriteTimeout}, {"idle_timeout", s.IdleTimeout}} {
		if d.v <= 0 {
			errs.Add(fmt.Sprintf("%s.%s", prefix, d.key), "must be a positive duration such as 30s, got %s", d.v)
		}
	}
	if s.MaxHeaderBytes < 4<<10 || s.MaxHeaderBytes > 1<<20 {
		errs.Add(prefix+".max_header_bytes", "must be from 4096 to 1048576, got %d", s.MaxHeaderBytes)
	}
	if s.MaxConnections < 1 {
		errs.Add(prefix+".max_connections", "must be at least 1, got %d", s.MaxConnections)
	}
	if s.MaxConnectionsPerClient < 1 || s.MaxConnectionsPerClient > s.MaxConnections {
		errs.Add(prefix+".max_connections_per_client", "must be from 1 to %s.max_connections (%d), got %d",
			prefix, s.MaxConnections, s.MaxConnectionsPerClient)
	}
	return errs
}

// Enabled reports whether a certificate is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Validate checks that cert and key come together. prefix names the section.
func (t TLS) Validate(prefix string) Errors {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return Errors{Problem(prefix, "cert_file and key_file must be set together")}
	}
	return nil
}

// ValidateAddr checks a host:port listen address.
func ValidateAddr(key, addr string) Errors {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return Errors{Problem(key, "%q is not host:port", addr)}
	}
	return nil
}

// IsLoopback reports whether a listen address only binds loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ErrFileOpen is a secret file whose mode lets its group or others in.
var ErrFileOpen = errors.New("readable by group or others")

// CheckPrivateFile refuses a secret file (a key) that its group or others
// may read or write: one clear error naming the file and its mode. It does
// not open the file; reading it stays the caller's job.
func CheckPrivateFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return fmt.Errorf("%s has mode %04o, %w: run chmod 600 %s", path, m, ErrFileOpen, path)
	}
	return nil
}

// CheckKeyFiles refuses, before anything starts, key files (by configuration
// key; an empty path is skipped) that their group or others may read: one
// FieldError per file, wrapping ErrFileOpen.
func CheckKeyFiles(files map[string]string) error {
	var errs Errors
	for key, path := range files {
		if path == "" {
			continue
		}
		if err := CheckPrivateFile(path); errors.Is(err, ErrFileOpen) {
			errs = append(errs, Wrap(key, err))
		}
	}
	return errs.Err()
}

// DefaultShutdownTimeout is the default shutdown_timeout of the agent and
// the core: how long a stop may take, every part together.
const DefaultShutdownTimeout = 10 * time.Second

// ValidateShutdownTimeout checks shutdown_timeout: positive.
func ValidateShutdownTimeout(d time.Duration) Errors {
	if d <= 0 {
		return Errors{Problem("shutdown_timeout", "must be a positive duration such as 10s, got %s", d)}
	}
	return nil
}
