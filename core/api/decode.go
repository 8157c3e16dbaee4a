package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/target"
	"github.com/musterhq/muster/shared/jsonbody"
	"github.com/musterhq/muster/shared/wire"
)

// readBody reads the request body, refusing more than MaxBody bytes. A body
// without Content-Length is cut by the body-limit middleware while it is
// read: that is a 413 too.
func readBody(c *echo.Context) ([]byte, error) {
	b, err := jsonbody.Read(c.Request().Body, MaxBody)
	if err != nil && echo.StatusCode(err) == http.StatusRequestEntityTooLarge {
		return nil, fmt.Errorf("%w: the limit is %d bytes", ErrTooLarge, MaxBody)
	}
	return b, err
}

// decodeStrict decodes one JSON object from body into out: unknown fields,
// trailing data and an empty body are errors (jsonbody.ErrInvalid, a 400).
func decodeStrict(body []byte, out any) error { return jsonbody.Decode(body, out) }

// decodeBody decodes a request body strictly (decodeStrict) into a new T:
// the decoder of every body that needs no check beyond its shape (the
// operations check the rest).
func decodeBody[T any](body []byte) (*T, error) {
	var req T
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// decodeCreate decodes the body of POST /api/v1/actions strictly (no
// unknown field, one object) and checks it (ops.CheckAction, or
// ops.CheckActionTarget when it gives a target instead of a node_id): on
// success the args are a canonical JSON object of at most action.MaxArgs
// bytes, the kind is well formed, the id empty or a canonical UUID, the
// timeout and not_before within bounds, and the target (nil: one node)
// of exactly one well-formed form. What depends on the store (does the
// node exist, does it know the kind, what the target picks) is checked
// later.
func decodeCreate(body []byte) (*ops.ActionRequest, *target.Target, error) {
	var req wire.CreateActionRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, nil, err
	}
	out := &ops.ActionRequest{ID: req.ID, ClusterID: req.ClusterID, NodeID: req.NodeID, Kind: req.Kind, Args: req.Args,
		TimeoutS: req.TimeoutS, NotBefore: req.NotBefore, RequestID: req.RequestID}
	if req.Target != nil {
		t := *req.Target
		if err := ops.CheckActionTarget(out, t, time.Now()); err != nil {
			return nil, nil, err
		}
		return out, &t, nil
	}
	if req.RequestID != "" {
		return nil, nil, badRequest("request_id goes with a target; a single create is made idempotent by its id")
	}
	if err := ops.CheckAction(out, time.Now()); err != nil {
		return nil, nil, err
	}
	return out, nil, nil
}

// Caps of query strings (API4). A list parameter reaches the store as one SQL
// variable per value, and SQLite takes at most 32766 of them: beyond these caps
// the answer is a 400 naming the parameter and the cap, never a 500.
const (
	// MaxListValues caps the values of one list parameter (state, kind,
	// sort keys...), its commas and its repeats counted together.
	MaxListValues = 100
	// MaxQueryParams caps the parameters of one query string, repeats
	// counted.
	MaxQueryParams = 64
)

// checkQuery refuses a query string of more than MaxQueryParams parameters
// before any handler reads it.
func checkQuery(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		n := 0
		for _, vs := range c.QueryParams() {
			n += len(vs)
		}
		if n > MaxQueryParams {
			return badRequest("the query string has %d parameters; at most %d are allowed", n, MaxQueryParams)
		}
		return next(c)
	}
}

// onlyParams refuses, with a 400 that names it and the parameters the call
// reads, a query parameter the call does not read: a misspelt filter
// (?run_id= for ?run=) must not silently list everything.
func onlyParams(h echo.HandlerFunc, names ...string) echo.HandlerFunc {
	return func(c *echo.Context) error {
		for name := range c.QueryParams() {
			if !slices.Contains(names, name) {
				if len(names) == 0 {
					return badRequest("unknown query parameter %q: this call takes none", name)
				}
				return badRequest("unknown query parameter %q (this call takes %s)", name, strings.Join(names, ", "))
			}
		}
		return h(c)
	}
}

// limitParam reads a page size: fallback when v is empty, otherwise an
// integer from 1 to max, or a 400 that says so.
func limitParam(v string, fallback, max int) (int, error) {
	if v == "" {
		return fallback, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, badRequest("limit must be an integer from 1 to %d, not %q", max, v)
	}
	return n, nil
}

// listParam returns the values of the list parameter name: comma lists, the
// parameter possibly repeated (kind=a,b&kind=c is a, b and c), blanks
// dropped. More than MaxListValues values is a 400 naming the parameter.
func listParam(c *echo.Context, name string) ([]string, error) {
	vs := c.QueryParams()[name]
	n := 0
	for _, v := range vs {
		n += strings.Count(v, ",") + 1
	}
	if n > MaxListValues {
		return nil, badRequest("%s: %d values; at most %d are allowed", name, n, MaxListValues)
	}
	var out []string
	for _, v := range vs {
		out = append(out, splitList(v)...)
	}
	return out, nil
}
