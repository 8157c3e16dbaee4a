package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
	"github.com/musterhq/muster/shared/words"
)

// pageNames are the templates/<name>.html files; each defines "content"
// and, for pages that update live, "live".
var pageNames = []string{"login", "approvals", "actions", "action", "clusters", "events", "error", "runs", "run",
	"notifications", "node", "dashboard", "playbooks", "playbook", "schedules", "schedule", "newaction", "newschedule", "newrun"}

// printable returns s with every control character (but newline and tab,
// which a page shows as they are), every bidirectional override and every
// byte of invalid UTF-8 written as a visible escape such as \x1b, by
// shared/textsafe: text that came from an agent or a command cannot
// recolour or reorder what the page shows. html/template escapes the rest.
func printable(s string) string {
	if !strings.ContainsAny(s, "\n\t") {
		return textsafe.Escape(s)
	}
	var b strings.Builder
	for {
		i := strings.IndexAny(s, "\n\t")
		if i < 0 {
			b.WriteString(textsafe.Escape(s))
			return b.String()
		}
		b.WriteString(textsafe.Escape(s[:i]))
		b.WriteByte(s[i])
		s = s[i+1:]
	}
}

// prettyArgs indents a JSON object for reading, with <, > and & written as
// themselves rather than as \u003c escapes (the page escapes them).
func prettyArgs(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

var funcs = template.FuncMap{
	"printable": printable,
	"args":      func(raw json.RawMessage) string { return printable(prettyArgs(raw)) },
	"utc": func(t time.Time) string {
		return t.UTC().Format(time.RFC3339)
	},
	"utcText": func(t time.Time) string {
		return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
	},
	"join":         strings.Join,
	"nodePath":     nodePath,
	"playbookPath": playbookPath,
	"schedulePath": schedulePath,
	"short":        func(id string) string { return id[:min(8, len(id))] },
	"shortDigest":  func(d string) string { return d[:min(12, len(d))] },
	"plural":       words.Count,
	// stageNamed is the stage of stages called name (nil if none).
	"stageNamed": func(stages []wire.Stage, name string) *wire.Stage {
		for i := range stages {
			if stages[i].Name == name {
				return &stages[i]
			}
		}
		return nil
	},
	"wrappable":  wrappable,
	"sourceName": sourceName,
	// rbName and rbID are the New run builder's field names (s0.name,
	// s0.p1.kind; step -1 for a stage's) and element ids (rb-s0-name).
	"rbName": builderField,
	"add1":   func(i int) int { return i + 1 },
	"rbInput": func(errs fieldErrs, name, label, value, hint string) map[string]any {
		return map[string]any{"N": name, "L": label, "V": value, "H": hint, "E": errs}
	},
	"rbID":      func(name string) string { return "rb-" + strings.NewReplacer(".", "-", "_", "-").Replace(name) },
	"stateName": func(s action.State) string { return strings.ReplaceAll(string(s), "_", " ") },
	"lower":     strings.ToLower,
	"deref":     func(t *time.Time) time.Time { return *t },
	"sameText":  func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) },
	"spaced":    func(s string) string { return strings.ReplaceAll(s, "_", " ") },
	// runCard and decideArgs hand a run's templates the page's view too.
	"shownArgs": shownArgs,
	"runCard":   func(v *view, p any) map[string]any { return map[string]any{"V": v, "Item": p} },
	"decideArgs": func(v *view, r wire.Run, next string) map[string]any {
		return map[string]any{"V": v, "Run": r, "Next": next}
	},
}

// wrappable is printable(s), escaped for HTML, with a line break
// opportunity after each slash: a kind (example.com/node.upgrade) wraps
// there on a narrow screen, never inside a word.
func wrappable(s string) template.HTML {
	return template.HTML(strings.ReplaceAll(template.HTMLEscapeString(printable(s)), "/", "/<wbr>"))
}

func parsePages() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/runparts.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("ui template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// liveRegion tells the page's script what to refresh: the URL of the live
// part and the filter of the stream that signals a change.
type liveRegion struct {
	URL    string
	Stream string
}

// view is what every page template gets.
type view struct {
	Title string
	Nav   string
	User  *store.Token
	// Groups are a person's group claims (single sign-on).
	Groups []string
	CSRF   string
	// CanApprove: the visitor's roles grant approve (and reject).
	CanApprove bool
	// CanNotify: the visitor may see the Notifications page (admin).
	CanNotify bool
	Flash     string
	FlashLink string // a page the flash message points to
	Error     string
	Live      *liveRegion
	// Since is the newest event when the page began to read (-1: none
	// read): its live stream starts after it.
	Since int64
	Data  any
}

// newView fills the common part of a page for v (nil before sign-in).
func newView(v *visitor, title, nav string) *view {
	out := &view{Title: title, Nav: nav, Since: -1}
	if v != nil {
		out.Since = v.since
		out.User = v.tok
		out.Groups = v.who.Groups
		out.CSRF = v.sess.CSRF
		out.CanApprove = v.can(auth.Approve)
		out.CanNotify = ops.Authorize(v.who, auth.Notify) == nil // on every cluster
	}
	return out
}

// render writes a page, or only its live part when the request asks for it
// (?part=live, as the page's script does).
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page string, data *view) {
	t := s.pages[page]
	name := "layout"
	if r.URL.Query().Get("part") == "live" && t.Lookup("live") != nil {
		name = "live"
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Error("render page", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// renderError shows an error page with a message meant for the visitor.
func (s *Server) renderError(w http.ResponseWriter, r *http.Request, v *visitor, status int, msg string) {
	vw := newView(v, http.StatusText(status), "")
	vw.Error = msg
	vw.Data = status
	s.render(w, r, status, "error", vw)
}

// clientAddr is the direct peer's address (proxy headers are not trusted).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
