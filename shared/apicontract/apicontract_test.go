package apicontract

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const doc = `
openapi: 3.1.0
info: {title: things, version: v1}
paths:
  /things:
    post:
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              additionalProperties: false
              required: [name]
              properties:
                name: {type: string}
      responses:
        '201': {$ref: '#/components/responses/Thing'}
        default: {$ref: '#/components/responses/Error'}
  /things/{id}:
    parameters:
      - {name: id, in: path, required: true, schema: {type: string}}
    get:
      responses:
        '200': {$ref: '#/components/responses/Thing'}
        default: {$ref: '#/components/responses/Error'}
  /stream:
    get:
      responses:
        '200':
          description: events
          content:
            text/event-stream:
              schema: {type: string}
components:
  responses:
    Thing:
      description: a thing
      content:
        application/json:
          schema:
            type: object
            required: [id, name]
            properties:
              id: {type: string}
              name: {type: string}
              gone_ts: {type: [string, 'null'], format: date-time}
    Error:
      description: an error
      content:
        application/json:
          schema:
            type: object
            required: [error]
            properties:
              error: {type: object, required: [code], properties: {code: {type: string}}}
`

// answer is what the fake server says to any request.
type answer struct {
	status int
	ctype  string
	body   string
}

func TestTransport(t *testing.T) {
	t.Parallel()
	spec, err := Load([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if spec.Version() != "3.1.0" {
		t.Fatalf("version %q", spec.Version())
	}
	if got, want := strings.Join(spec.Operations(), ","), "GET /stream,GET /things/:id,POST /things"; got != want {
		t.Fatalf("operations %s, want %s", got, want)
	}
	thing := `{"id":"1","name":"a","gone_ts":null}`
	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		answer       answer
		problem      string // "" when the exchange is as documented
	}{
		{"documented", "GET", "/things/1", "", answer{200, "application/json", thing}, ""},
		{"documented create", "POST", "/things", `{"name":"a"}`, answer{201, "application/json", thing}, ""},
		{"documented error", "GET", "/things/2", "", answer{404, "application/json", `{"error":{"code":"not_found"}}`}, ""},
		{"missing field", "GET", "/things/1", "", answer{200, "application/json", `{"id":"1"}`}, "not the documented one"},
		{"wrong type", "GET", "/things/1", "", answer{200, "application/json", `{"id":1,"name":"a"}`}, "not the documented one"},
		{"bad timestamp", "GET", "/things/1", "", answer{200, "application/json", `{"id":"1","name":"a","gone_ts":"yesterday"}`}, "not the documented one"},
		{"undocumented status", "POST", "/things", `{"name":"a"}`, answer{200, "application/json", thing}, "not the documented one"},
		{"error without envelope", "GET", "/things/2", "", answer{404, "text/plain", "not found"}, "not the documented one"},
		{"unknown field accepted", "POST", "/things", `{"name":"a","admin":true}`, answer{201, "application/json", thing}, "refuses this request"},
		{"unknown field refused", "POST", "/things", `{"name":"a","admin":true}`, answer{400, "application/json", `{"error":{"code":"bad_request"}}`}, ""},
		{"undocumented route served", "GET", "/secret", "", answer{200, "application/json", `{}`}, "names no such route"},
		{"undocumented route refused", "GET", "/secret", "", answer{404, "application/json", `{"error":{"code":"not_found"}}`}, ""},
		{"stream not read", "GET", "/stream", "", answer{200, "text/event-stream", "data: x\n\n"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.answer.ctype)
				w.WriteHeader(tc.answer.status)
				io.WriteString(w, tc.answer.body)
			}))
			defer ts.Close()
			tr := spec.Transport(ts.Client().Transport)
			c := &http.Client{Transport: tr}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, _ := http.NewRequest(tc.method, ts.URL+tc.path, body)
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(got) != tc.answer.body {
				t.Fatalf("the caller read %q, want %q", got, tc.answer.body)
			}
			problems := tr.Problems()
			if tr.Checked() != 1 {
				t.Fatalf("%d exchanges checked, want 1", tr.Checked())
			}
			switch {
			case tc.problem == "" && len(problems) > 0:
				t.Fatalf("problems with a documented exchange: %q", problems)
			case tc.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0], tc.problem)):
				t.Fatalf("problems %q, want one saying %q", problems, tc.problem)
			}
		})
	}
}

func TestLoadRefusesInvalidDocuments(t *testing.T) {
	t.Parallel()
	for name, d := range map[string]string{
		"not yaml":       "openapi: [",
		"no info":        "openapi: 3.1.0\npaths: {}\n",
		"dangling ref":   strings.Replace(doc, "'#/components/responses/Thing'}\n        default", "'#/components/responses/Nope'}\n        default", 1),
		"path param gap": strings.Replace(doc, "/things/{id}:", "/things/{thing}:", 1),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := Load([]byte(d)); err == nil {
				t.Fatal("loaded")
			}
		})
	}
}
