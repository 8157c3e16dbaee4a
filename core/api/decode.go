package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// readBody reads the request body (bounded by the body-limit middleware).
func readBody(c *echo.Context) ([]byte, error) {
	b, err := io.ReadAll(c.Request().Body)
	if err != nil {
		if echo.StatusCode(err) == http.StatusRequestEntityTooLarge {
			return nil, fmt.Errorf("%w: the limit is %d bytes", ErrTooLarge, MaxBody)
		}
		return nil, badRequest("read body: %v", err)
	}
	return b, nil
}

// decodeStrict decodes one JSON value from body into out: unknown fields,
// trailing data and an empty body are errors (ErrBadRequest).
func decodeStrict(body []byte, out any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("empty body, want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return badRequest("%s", jsonError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("trailing data after the JSON object")
	}
	return nil
}

// jsonError rewrites decoding errors into messages for people.
func jsonError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("want a JSON object, not %s", te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return fmt.Sprintf("field %s may not be set by a caller", f)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON"
	}
	return "malformed JSON: " + err.Error()
}

// decodeCreate decodes and validates the body of POST /api/v1/actions. On
// success the args are a canonical JSON object of at most action.MaxArgs
// bytes, the kind is well formed, the id empty or a canonical UUID, and the
// timeout within bounds. What depends on the store (does the node exist, does
// it know the kind) is checked later.
func decodeCreate(body []byte) (*wire.CreateActionRequest, error) {
	var req wire.CreateActionRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := checkCreate(&req); err != nil {
		return nil, err
	}
	return &req, nil
}

func checkCreate(req *wire.CreateActionRequest) error {
	if req.ClusterID == "" {
		return badRequest("cluster_id is required")
	}
	if req.NodeID == "" {
		return badRequest("node_id is required")
	}
	if req.ID != "" && !action.ValidID(req.ID) {
		return badRequest("id %q is not a canonical UUID", req.ID)
	}
	if !action.ValidKind(req.Kind) {
		return badRequest("kind %q is not of the form domain/name", req.Kind)
	}
	if req.TimeoutS < 0 || req.TimeoutS > action.MaxTimeoutS {
		return badRequest("timeout_s must be between 0 (the agent's default) and %d", action.MaxTimeoutS)
	}
	args, err := action.NormalizeArgs(req.Args)
	if err != nil {
		return badRequest("%v", err)
	}
	if len(args) > action.MaxArgs {
		return badRequest("args larger than %d bytes", action.MaxArgs)
	}
	req.Args = args
	return nil
}
