package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/musterhq/muster/shared/wire"
)

// APIError is an answer with a non-2xx status. Detail is the decoded envelope.
type APIError struct {
	Status int
	Detail wire.ErrorDetail
}

func (e *APIError) Error() string {
	if e.Detail.Message != "" {
		return fmt.Sprintf("%s (%d %s)", e.Detail.Message, e.Status, e.Detail.Code)
	}
	return fmt.Sprintf("HTTP %d", e.Status)
}

// StatusOf returns the HTTP status of err when it is an *APIError, else 0
// (a transport error: the request may not have arrived).
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// decodeError reads an error answer into an *APIError.
func decodeError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &APIError{Status: resp.StatusCode}
	var env wire.ErrorBody
	if json.Unmarshal(body, &env) == nil {
		e.Detail = env.Error
	}
	if e.Detail.Message == "" {
		e.Detail.Message = http.StatusText(resp.StatusCode)
	}
	return e
}
