package ui

import (
	"context"
	"fmt"
	"strings"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
	"github.com/musterhq/muster/shared/words"
)

// pausedShown bounds the paused runs the Approvals page shows: each one
// reads its children to say what approving continues.
const pausedShown = 20

// pausedRun is a run PAUSED for an approver (by its errors, or after a
// canary), as the Approvals page shows it: what approving continues, and
// the button the visitor may use.
type pausedRun struct {
	Run      wire.Run
	Progress []stageProgress
	// For is wire.PausedErrors or wire.PausedCanary.
	For string
	// Continues says, a line each, what a resume or a promote continues.
	Continues []string
	Mine      bool
	// CanResume, CanPromote: the engine's MayResume and MayPromote let
	// the visitor; Why says why not otherwise.
	CanResume, CanPromote bool
	Why                   string
	// CanAbort: the visitor may abort it (an approver, or its requester).
	CanAbort bool
}

// pausedRuns lists the oldest runs PAUSED for an approver (errors or a
// canary; a manual pause is an operator's and is not listed), at most
// pausedShown, and says whether there are more.
func (s *Server) pausedRuns(ctx context.Context, rd store.Reader, v *visitor) ([]pausedRun, bool, error) {
	var out []pausedRun
	vis, err := v.visible(ctx, rd)
	if err != nil {
		return nil, false, err
	}
	in := vis.In()
	marker := ""
	for pages := 0; pages < 5; pages++ {
		// Brief runs to find them; the whole run of those shown.
		list, next, err := store.RunPage(ctx, rd, store.RunQuery{States: []string{store.RunPaused}, ClusterIn: in,
			Marker: marker, Limit: runsPerPage, Oldest: true, Brief: true})
		if err != nil {
			return nil, false, err
		}
		for i := range list {
			why := ops.RunPausedFor(&list[i])
			if why == wire.PausedManual {
				continue
			}
			if len(out) == pausedShown {
				return out, true, nil
			}
			r, err := rd.Run(ctx, list[i].ID)
			if err != nil {
				return nil, false, err
			}
			p, err := s.pausedRun(ctx, rd, v, r, why)
			if err != nil {
				return nil, false, err
			}
			out = append(out, p)
		}
		if next == "" {
			return out, false, nil
		}
		marker = next
	}
	return out, true, nil
}

// pausedRun says what approving run r, paused for why, continues, and
// whether v may.
func (s *Server) pausedRun(ctx context.Context, rd store.Reader, v *visitor, r *store.Run, why string) (pausedRun, error) {
	// From the store's counters: a paused run of any size costs two small
	// reads, not its children.
	counts, err := rd.RunChildCounts(ctx, []string{r.ID})
	if err != nil {
		return pausedRun{}, err
	}
	started, err := rd.RunStartedNodes(ctx, r.ID)
	if err != nil {
		return pausedRun{}, err
	}
	p := pausedRun{Run: ops.RunView(r, counts), For: why, Mine: approval.SamePerson(r.Requester, v.tok.Name)}
	if p.Run.Approval, err = s.ops.RunApproval(ctx, rd, r); err != nil {
		return pausedRun{}, err
	}
	for i := range p.Run.Stages {
		st := p.Run.Stages[i]
		st.Nodes = st.Nodes[:min(len(st.Nodes), store.BriefNodes)]
		p.Progress = append(p.Progress, progressOf(st))
	}
	var pending []string
	for i := range r.Stages {
		st := &r.Stages[i]
		c := ops.RunTally(r, st, counts, started[st.Name])
		switch {
		case st.State == store.StagePending:
			pending = append(pending, st.Name)
		case st.State != store.StageRunning:
		case why == wire.PausedCanary && st.Canary > 0 && !st.Promoted:
			p.Continues = append(p.Continues, fmt.Sprintf("Promoting lets stage %s go on past its canary: %d of its %d nodes remain. "+
				"The canary: %s done, %d failed.", st.Name, c.Pending, len(st.Nodes), words.Count(c.Done, "node"), c.Errors))
		case why == wire.PausedErrors && st.OnFailure == ops.RunOnFailurePause && c.Errors-st.Forgiven > st.MaxErrors.Floor(len(st.Nodes)):
			p.Continues = append(p.Continues, fmt.Sprintf("Resuming forgives the %s of stage %s (max_errors %s) and goes on: "+
				"%d of its %d nodes remain.", words.Count(c.Errors-st.Forgiven, "error"), st.Name, st.MaxErrors, c.Pending, len(st.Nodes)))
		case c.Pending > 0:
			p.Continues = append(p.Continues, fmt.Sprintf("Stage %s goes on too: %d of its %d nodes remain.", st.Name, c.Pending, len(st.Nodes)))
		}
	}
	if len(pending) > 0 {
		word := "Then stage "
		if len(pending) > 1 {
			word = "Then stages "
		}
		p.Continues = append(p.Continues, word+strings.Join(pending, ", ")+".")
	}
	p.CanAbort = s.ops.MayAbort(v.caller(nil), r) == nil
	verb, roleWhy, mayErr := "resume", "", error(nil)
	switch {
	case why == wire.PausedCanary && !v.canOn(auth.Approve, r.ClusterID):
		verb, roleWhy = "promote", "do not include approving"
	case why == wire.PausedCanary:
		verb, mayErr = "promote", s.ops.MayPromote(ctx, rd, v.caller(nil), r)
		p.CanPromote = mayErr == nil
	case !v.canOn(auth.Continue, r.ClusterID):
		roleWhy = "do not include resuming runs"
	default:
		mayErr = s.ops.MayResume(ctx, rd, v.caller(nil), r)
		p.CanResume = mayErr == nil
	}
	switch {
	case mayErr != nil && ops.Describe(mayErr).Internal:
		return pausedRun{}, mayErr
	case mayErr != nil:
		p.Why = "You may not " + verb + " this run: " + strings.TrimPrefix(mayErr.Error(), ops.ErrForbidden.Error()+": ") + "."
	case roleWhy != "":
		p.Why = "You may not " + verb + " this run: your roles (" + v.held() + ") " + roleWhy + "."
	}
	return p, nil
}
