package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/musterhq/muster/shared/action"
)

// The built-in kinds.
const (
	KindPing  = "muster.io/debug.ping"
	KindSleep = "muster.io/debug.sleep"
	KindFail  = "muster.io/debug.fail"
)

// builtinStep is how long the built-ins wait between steps at most.
const builtinStep = time.Second

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// ping is done at once, with output "pong".
type ping struct{}

func (ping) Validate(args json.RawMessage) error { return decodeArgs(args, &struct{}{}) }

func (ping) Step(ctx context.Context, x *Exec) Result {
	if ctx.Err() != nil {
		return Result{Status: Stopped}
	}
	x.Printf("pong")
	return Result{Status: Done}
}

// sleep waits {"seconds": N}. The deadline goes into progress on the first
// step, so a restarted agent waits for the same deadline, not N more seconds.
type sleep struct{}

type sleepArgs struct {
	Seconds *float64 `json:"seconds"`
}

type sleepProgress struct {
	Deadline time.Time `json:"deadline"`
}

func (sleep) Validate(args json.RawMessage) error {
	var a sleepArgs
	if err := decodeArgs(args, &a); err != nil {
		return err
	}
	if a.Seconds == nil {
		return fmt.Errorf("%w: seconds is required", ErrBadArgs)
	}
	if *a.Seconds < 0 || *a.Seconds > action.MaxTimeoutS {
		return fmt.Errorf("%w: seconds must be between 0 and %d", ErrBadArgs, action.MaxTimeoutS)
	}
	return nil
}

func (sleep) Step(ctx context.Context, x *Exec) Result {
	if ctx.Err() != nil {
		return Result{Status: Stopped}
	}
	var p sleepProgress
	_ = json.Unmarshal(x.Progress, &p)
	now := time.Now()
	if p.Deadline.IsZero() {
		var a sleepArgs
		if err := decodeArgs(x.Action.Args, &a); err != nil || a.Seconds == nil {
			return Result{Status: Failed, Message: "bad args"}
		}
		p.Deadline = action.UTC(now.Add(time.Duration(*a.Seconds * float64(time.Second))))
		x.SetProgress(p)
		x.Printf("sleeping until %s", p.Deadline.Format(time.RFC3339Nano))
	}
	left := p.Deadline.Sub(now)
	if left <= 0 {
		x.Printf("woke up")
		return Result{Status: Done}
	}
	return Result{Status: Running, After: min(left, builtinStep)}
}

// fail fails at once with {"message": "..."}.
type fail struct{}

type failArgs struct {
	Message string `json:"message"`
}

func (fail) Validate(args json.RawMessage) error { return decodeArgs(args, &failArgs{}) }

func (fail) Step(ctx context.Context, x *Exec) Result {
	if ctx.Err() != nil {
		return Result{Status: Stopped}
	}
	var a failArgs
	_ = decodeArgs(x.Action.Args, &a)
	if a.Message == "" {
		a.Message = "failed on purpose"
	}
	x.Printf("%s", a.Message)
	return Result{Status: Failed, Message: a.Message}
}
