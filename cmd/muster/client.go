package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/tlsutil"
)

// DefaultCoreAddr is where the client looks for the core without MUSTER_ADDR.
const DefaultCoreAddr = "http://127.0.0.1:7410"

// clientFlags are the connection and output flags of every client command.
type clientFlags struct {
	addr   string
	token  string
	output string
	// moreOutputs are -o forms of one command alone (events: cloudevents).
	moreOutputs []string
	utc         bool
	// TLS towards the core: its CA, and a client certificate when the core
	// requires one.
	caCert, clientCert, clientKey string
	// loginAddr is the core of muster login, when its token is used.
	loginAddr string
}

// bindClientFlags adds --addr, --token and -o to a group of client commands.
func bindClientFlags(cmd *cobra.Command) *clientFlags {
	f := &clientFlags{}
	p := cmd.PersistentFlags()
	p.StringVar(&f.addr, "addr", "", "core API address (default $MUSTER_ADDR, else "+DefaultCoreAddr+")")
	p.StringVar(&f.token, "token", "", "API token; prefer $MUSTER_TOKEN or $MUSTER_TOKEN_FILE (a file holding it, mode 0600): a flag is visible to every user in the process list")
	p.StringVarP(&f.output, "output", "o", "table", "output format: "+strings.Join(outputForms, ", "))
	p.BoolVar(&f.utc, "utc", false, "print times in UTC (default: local time, $TZ honoured)")
	p.StringVar(&f.caCert, "cacert", "", "CA certificate of the core's TLS certificate (default $MUSTER_CACERT)")
	p.StringVar(&f.clientCert, "client-cert", "", "client certificate, when the core requires one (default $MUSTER_CLIENT_CERT)")
	p.StringVar(&f.clientKey, "client-key", "", "key of the client certificate (default $MUSTER_CLIENT_KEY)")
	return f
}

// httpClient returns the HTTP client of the core: with the CA and client
// certificate of the flags or MUSTER_CACERT, MUSTER_CLIENT_CERT and
// MUSTER_CLIENT_KEY, or a plain one when none is set.
func (f *clientFlags) httpClient() (*http.Client, error) {
	ca := firstNonEmpty(f.caCert, os.Getenv("MUSTER_CACERT"))
	cert := firstNonEmpty(f.clientCert, os.Getenv("MUSTER_CLIENT_CERT"))
	key := firstNonEmpty(f.clientKey, os.Getenv("MUSTER_CLIENT_KEY"))
	if ca == "" && cert == "" && key == "" {
		return &http.Client{}, nil
	}
	if (cert == "") != (key == "") {
		return nil, cli.UsageError("MUSTER_CLIENT_CERT and MUSTER_CLIENT_KEY (--client-cert, --client-key) go together")
	}
	tc, err := tlsutil.ClientConfig(ca, cert, key)
	if err != nil {
		return nil, cli.UsageError("TLS towards the core: %v", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &http.Client{Transport: tr}, nil
}

// core returns a client of the core named by the flags and the environment.
func (f *clientFlags) core() (*client.Core, error) {
	if err := f.checkOutput(); err != nil {
		return nil, err
	}
	displayUTC.Store(f.utc)
	token, err := f.apiToken()
	if err != nil {
		return nil, err
	}
	// A login knows its core, and its ID token goes to no other: it is a
	// bearer that core would accept.
	addr := firstNonEmpty(f.addr, os.Getenv("MUSTER_ADDR"), f.loginAddr, DefaultCoreAddr)
	if f.loginAddr != "" && strings.TrimRight(addr, "/") != f.loginAddr {
		return nil, cli.UsageError("the login is for %s, not %s: run muster login --core %s, or use an API token",
			f.loginAddr, addr, addr)
	}
	hc, err := f.httpClient()
	if err != nil {
		return nil, err
	}
	return client.NewCore(addr, token, hc), nil
}

// maxTokenFile bounds what is read from MUSTER_TOKEN_FILE.
const maxTokenFile = 4 << 10

// apiToken returns the token of --token, else MUSTER_TOKEN, else the
// content of the file MUSTER_TOKEN_FILE names (surrounding space trimmed;
// refused when its group or others may read it). Setting both variables is
// refused: which one was meant is not clear.
func (f *clientFlags) apiToken() (string, error) {
	if f.token != "" {
		return f.token, nil
	}
	env, file := os.Getenv("MUSTER_TOKEN"), os.Getenv("MUSTER_TOKEN_FILE")
	switch {
	case env != "" && file != "":
		return "", cli.UsageError("MUSTER_TOKEN and MUSTER_TOKEN_FILE are both set: unset one")
	case env != "":
		return env, nil
	case file == "":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tok, addr, ok, err := loginToken(ctx)
		if err != nil || ok {
			f.loginAddr = addr
			return tok, err
		}
		return "", cli.UsageError("no API token: set MUSTER_TOKEN or MUSTER_TOKEN_FILE (a file holding it, mode 0600), or run muster login")
	}
	if err := config.CheckPrivateFile(file); err != nil {
		return "", cli.UsageError("MUSTER_TOKEN_FILE: %v", err)
	}
	fh, err := os.Open(file)
	if err != nil {
		return "", cli.UsageError("MUSTER_TOKEN_FILE: %v", err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxTokenFile+1))
	if err != nil {
		return "", cli.UsageError("MUSTER_TOKEN_FILE: %v", err)
	}
	token := strings.TrimSpace(string(b))
	switch {
	case len(b) > maxTokenFile:
		return "", cli.UsageError("MUSTER_TOKEN_FILE: %s is larger than %d bytes: not a token", file, maxTokenFile)
	case token == "":
		return "", cli.UsageError("MUSTER_TOKEN_FILE: %s is empty", file)
	case strings.ContainsAny(token, " \t\r\n"):
		return "", cli.UsageError("MUSTER_TOKEN_FILE: %s holds more than one word: put only the token in it", file)
	}
	return token, nil
}

// json reports an -o form that prints records rather than a table: json,
// yaml or name. Commands print them with f.write.
func (f *clientFlags) json() bool {
	return f.output == "json" || f.output == "yaml" || f.output == "name"
}

// wide reports -o wide: the table with more columns.
func (f *clientFlags) wide() bool { return f.output == "wide" }

// outputForms are the values of -o.
var outputForms = []string{"table", "wide", "json", "yaml", "name"}

func (f *clientFlags) checkOutput() error {
	if forms := append(slices.Clone(outputForms), f.moreOutputs...); !slices.Contains(forms, f.output) {
		return cli.UsageError("-o %q: want one of %s", f.output, strings.Join(forms, ", "))
	}
	return nil
}

// write prints v, the record or list a command got, in the -o form: json,
// yaml, or name (one id or name a line, for scripts and xargs).
func (f *clientFlags) write(w io.Writer, v any) error {
	switch f.output {
	case "yaml":
		return writeYAML(w, v)
	case "name":
		return writeNames(w, v)
	}
	return writeJSON(w, v)
}

// generic is v as the JSON encoder sees it (its json field names), decoded
// into maps, slices and scalars.
func generic(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return numbers(out), nil
}

// numbers turns json.Number leaves into int64 or float64, so YAML prints
// them as numbers.
func numbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// writeYAML prints v as YAML with the field names of its JSON form. Lines
// are escaped as tables are (textsafe.Escape), so that piping -o yaml to a
// terminal is as safe as a table.
func writeYAML(w io.Writer, v any) error {
	g, err := generic(v)
	if err != nil {
		return err
	}
	b, err := yaml.Marshal(g)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", cli.SafeLines(strings.TrimSuffix(string(b), "\n")))
	return err
}

// writeNames prints the id (else the name) of a record, or of each record
// of the first list a listing holds.
func writeNames(w io.Writer, v any) error {
	g, err := generic(v)
	if err != nil {
		return err
	}
	for _, n := range names(g) {
		if _, err := fmt.Fprintln(w, textsafe.Escape(n)); err != nil {
			return err
		}
	}
	return nil
}

func names(g any) []string {
	name := func(m map[string]any) (string, bool) {
		for _, k := range []string{"id", "name"} {
			if s, ok := m[k].(string); ok && s != "" {
				return s, true
			}
		}
		return "", false
	}
	switch x := g.(type) {
	case map[string]any:
		if n, ok := name(x); ok {
			return []string{n}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if l, ok := x[k].([]any); ok {
				return names(l)
			}
		}
	case []any:
		var out []string
		for _, e := range x {
			if m, ok := e.(map[string]any); ok {
				if n, ok := name(m); ok {
					out = append(out, n)
				}
			}
		}
		return out
	}
	return nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// exactArgs is cobra.ExactArgs with exit code 2 and the names of the arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return cli.UsageError("%s needs %d argument(s): %s (see '%s --help')", cmd.CommandPath(), len(names),
				strings.Join(names, " "), cmd.CommandPath())
		}
		return nil
	}
}

// apiError turns a client error into one line for people.
func apiError(c *client.Core, err error) error {
	var ae *client.APIError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	switch {
	case errors.As(err, &ae) && ae.PlainHTTPToTLS():
		return fmt.Errorf("the core at %s serves TLS: use https:// in MUSTER_ADDR (or --addr), and set MUSTER_CACERT to its CA", c.Addr())
	case errors.As(err, &ua):
		return fmt.Errorf("core at %s: its certificate is signed by an unknown authority: set MUSTER_CACERT (or --cacert) to the CA file that signed it", c.Addr())
	case errors.As(err, &he):
		return fmt.Errorf("core at %s: %v: use an address its certificate names", c.Addr(), he)
	case err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("the core at %s serves plain HTTP: use http:// in MUSTER_ADDR (or --addr)", c.Addr())
	case errors.Is(err, client.ErrNoCore):
		return fmt.Errorf("%w (MUSTER_ADDR lists the cores to try, separated by commas)", err)
	}
	if errors.As(err, &ae) {
		msg := ae.Detail.Message
		if len(ae.Detail.Matches) > 0 {
			msg += ": " + strings.Join(ae.Detail.Matches, ", ")
		}
		if ae.Detail.Code == "" {
			return fmt.Errorf("%s (%d from %s)", msg, ae.Status, c.Addr())
		}
		if hint := forbiddenHint(ae); hint != "" {
			return fmt.Errorf("%s (%d %s)\n%s", msg, ae.Status, ae.Detail.Code, hint)
		}
		return fmt.Errorf("%s (%d %s)", msg, ae.Status, ae.Detail.Code)
	}
	if err != nil && !errors.Is(err, client.ErrStreamClosed) {
		return fmt.Errorf("core at %s: %w", c.Addr(), err)
	}
	return err
}

// forbiddenHint is the line a 403 adds: the roles that would be allowed
// (the core names them), and what to run next to hold one; "" for another
// error, or a 403 that no role lifts (four-eyes: another person must).
func forbiddenHint(ae *client.APIError) string {
	roles := ae.Detail.AllowedRoles
	if ae.Status != http.StatusForbidden || len(roles) == 0 {
		return ""
	}
	return fmt.Sprintf("hint: use a token or a login that holds the %s role, or ask an admin to grant it: "+
		"muster grant create --person NAME --role %s --clusters GLOB", strings.Join(roles, " or "), roles[0])
}

// writeJSON prints v as indented JSON. encoding/json escapes C0 controls;
// textsafe.JSON escapes what it leaves (DEL, C1, bidi overrides), so that
// piping -o json to a terminal is as safe as a table.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", textsafe.JSON(b))
	return err
}

// writeJSONLine prints v as one line of JSON, escaped as writeJSON does.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", textsafe.JSON(b))
	return err
}

// table prints rows under a header, aligned in columns. Every cell is
// escaped (textsafe.Escape): a cell is whatever the core holds, which agents,
// commands and other users wrote.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cols ...string) {
	for i, c := range cols {
		cols[i] = cellText(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// shortID is how tables show action ids: a prefix every command accepts.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// displayUTC is --utc: the one process-wide choice of how times print,
// set from the flags before a command prints anything.
var displayUTC atomic.Bool

// ts prints a time for people: local time ($TZ honoured) with its zone, or
// UTC under --utc, to the second.
func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	if displayUTC.Load() {
		t = t.UTC()
	} else {
		t = t.Local()
	}
	return t.Format("2006-01-02 15:04:05 MST")
}

func tsPtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return ts(*t)
}
