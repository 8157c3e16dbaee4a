// Package apicontract checks HTTP exchanges against an API's OpenAPI
// document (docs/api.md, "The contract"). The API tests send their requests
// through Transport: an answer that the document does not describe, a
// request the document refuses but the server accepts, or a route the
// document does not name is recorded as a problem, and the test fails.
//
// Only tests import it: the binaries serve their documents without it.
package apicontract

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Spec is a loaded and validated OpenAPI document. It is safe for
// concurrent use.
type Spec struct {
	doc    *openapi3.T
	router routers.Router
}

// Load reads an OpenAPI document (YAML or JSON) and checks that it is a
// valid one. The document's servers are ignored: the checks match any host.
func Load(doc []byte) (*Spec, error) {
	loader := openapi3.NewLoader()
	t, err := loader.LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("load the openapi document: %w", err)
	}
	if err := t.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the openapi document is not valid: %w", err)
	}
	t.Servers = nil
	r, err := gorillamux.NewRouter(t)
	if err != nil {
		return nil, fmt.Errorf("route the openapi document: %w", err)
	}
	return &Spec{doc: t, router: r}, nil
}

// Version is the document's openapi field, such as 3.1.0.
func (s *Spec) Version() string { return s.doc.OpenAPI }

var paramRE = regexp.MustCompile(`\{([^}/]+)\}`)

// Operations lists the document's operations as "METHOD path", path in the
// router's form (/api/v1/actions/:id), sorted.
func (s *Spec) Operations() []string {
	var out []string
	for path, item := range s.doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+paramRE.ReplaceAllString(path, ":$1"))
		}
	}
	slices.Sort(out)
	return out
}

// Transport records the problems of every exchange it carries.
type Transport struct {
	spec *Spec
	next http.RoundTripper

	mu       sync.Mutex
	problems []string
	checked  int
}

// Transport wraps next (nil: http.DefaultTransport) with the checks.
func (s *Spec) Transport(next http.RoundTripper) *Transport {
	if next == nil {
		next = http.DefaultTransport
	}
	return &Transport{spec: s, next: next}
}

// Problems returns what was found wrong so far.
func (t *Transport) Problems() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.problems)
}

// Checked is the number of exchanges checked.
func (t *Transport) Checked() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.checked
}

func (t *Transport) problem(req *http.Request, status int, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.problems = append(t.problems, fmt.Sprintf("%s %s answered %d: ", req.Method, req.URL.RequestURI(), status)+fmt.Sprintf(format, args...))
}

// RoundTrip sends req and checks the exchange: a request the document
// describes must get an answer it describes; a request it refuses must be
// refused (4xx) with an answer it describes; a route it does not name must
// answer 404 or 405.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	// The body is read and put back as it was: no body stays none, so that
	// the server sees the same request (an empty reader would be chunked).
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	probe := req.Clone(req.Context())
	probe.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) == 0 {
		probe.Body = http.NoBody
	}

	route, params, routeErr := t.spec.router.FindRoute(probe)
	var in *openapi3filter.RequestValidationInput
	var reqErr error
	if routeErr == nil {
		in = &openapi3filter.RequestValidationInput{
			Request:    probe,
			PathParams: params,
			Route:      route,
			Options: &openapi3filter.Options{
				AuthenticationFunc:                openapi3filter.NoopAuthenticationFunc,
				RejectWhenRequestBodyNotSpecified: true,
				SkipSettingDefaults:               true,
			},
		}
		reqErr = openapi3filter.ValidateRequest(req.Context(), in)
	}

	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	t.mu.Lock()
	t.checked++
	t.mu.Unlock()
	status := resp.StatusCode
	if routeErr != nil {
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			t.problem(req, status, "the document names no such route (%v)", routeErr)
		}
		return resp, nil
	}
	if reqErr != nil && (status < 400 || status > 499) {
		t.problem(req, status, "the document refuses this request, the server did not: %v", short(reqErr))
	}

	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		// A stream is not read here: its status and type are checked.
		out.Options.ExcludeResponseBody = true
		out.Body = http.NoBody
	} else {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		out.Body = io.NopCloser(bytes.NewReader(b))
	}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		t.problem(req, status, "the answer is not the documented one: %v", short(err))
	}
	return resp, nil
}

// short keeps a validation error readable: kin-openapi's can hold a whole
// schema.
func short(err error) string {
	s := err.Error()
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}
