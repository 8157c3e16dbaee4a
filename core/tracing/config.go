// Package tracing sends OpenTelemetry traces of runs and actions over
// OTLP/HTTP (docs/architecture.md, "Traces"; docs/operations.md,
// "Tracing"). One trace per run and per action, made of short spans: the
// ids of a trace and of its long-lived parents (a run, a step attempt) are
// derived from the run's and the action's ids, so spans recorded at
// different times, by different syncs or replicas, join the same trace,
// and a parent is recorded once, with its real start and end, when the
// thing it stands for ends.
package tracing

import (
	"bufio"
	"fmt"
	"net"
	"net/textproto"
	"net/url"
	"os"
	"strings"

	"github.com/musterhq/muster/shared/config"
)

// Config is the core.yaml tracing: section. Tracing is off while Endpoint
// is empty.
type Config struct {
	// Endpoint is the OTLP/HTTP receiver's base URL, such as
	// https://otel-collector:4318; spans go to its /v1/traces.
	Endpoint string `mapstructure:"endpoint" yaml:"endpoint"`
	// SampleRatio is the share of traces kept, 0 to 1 (default 1). The
	// choice is made from the trace id, so every span of a trace is kept
	// or dropped together.
	SampleRatio float64 `mapstructure:"sample_ratio" yaml:"sample_ratio"`
	// HeadersFile names a private file of "Name: value" lines sent with
	// every export (an API key, say); optional.
	HeadersFile string `mapstructure:"headers_file" yaml:"headers_file"`
	// ServiceName is the service.name resource attribute (default muster-core).
	ServiceName string `mapstructure:"service_name" yaml:"service_name"`
}

// DefaultConfig is tracing off, every trace kept once it is on.
func DefaultConfig() Config { return Config{SampleRatio: 1, ServiceName: "muster-core"} }

// Enabled reports whether traces are sent.
func (c Config) Enabled() bool { return c.Endpoint != "" }

// Validate returns one error per bad field, named tracing.field.
func (c Config) Validate() config.Errors {
	var errs config.Errors
	if c.SampleRatio < 0 || c.SampleRatio > 1 {
		errs.Add("tracing.sample_ratio", "%v is not between 0 and 1", c.SampleRatio)
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			errs.Add("tracing.endpoint", "%q is not an http(s) URL with a host (such as https://collector:4318)", c.Endpoint)
		} else if u.User != nil {
			errs.Add("tracing.endpoint", "credentials in the URL are refused: put them in headers_file")
		} else if u.Scheme == "http" && c.HeadersFile != "" && !loopback(u.Hostname()) {
			errs.Add("tracing.endpoint", "%s is plain http off loopback: the headers of headers_file would travel in clear (use https)", c.Endpoint)
		}
	}
	if c.HeadersFile != "" {
		if _, err := LoadHeaders(c.HeadersFile); err != nil {
			errs.Add("tracing.headers_file", "%v", err)
		}
	}
	return errs
}

// maxHeaders bounds the lines of a headers file.
const maxHeaders = 64

// maxHeadersFile bounds the size of a headers file.
const maxHeadersFile = 64 << 10

// LoadHeaders reads a headers file: private to its owner, one "Name:
// value" per line, blank lines and lines starting with # skipped.
func LoadHeaders(path string) (map[string]string, error) {
	if err := config.CheckPrivateFile(path); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) > maxHeadersFile {
		return nil, fmt.Errorf("%s: more than %d bytes", path, maxHeadersFile)
	}
	h, err := ParseHeaders(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// ParseHeaders reads the text of a headers file.
func ParseHeaders(text string) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), maxHeadersFile)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || !validHeaderName(k) || !validHeaderValue(v) {
			return nil, fmt.Errorf("line %d is not \"Name: value\"", n)
		}
		out[textproto.CanonicalMIMEHeaderKey(k)] = v
		if len(out) > maxHeaders {
			return nil, fmt.Errorf("more than %d headers", maxHeaders)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// validHeaderValue: printable ASCII and tabs (no CR, LF, NUL or other
// controls), as an HTTP field value.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// loopback reports a host that is localhost or a loopback address.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func validHeaderName(k string) bool {
	for _, c := range k {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}
