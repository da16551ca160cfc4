package engine

import (
	"context"
	"fmt"
	"time"

	"khook.io/core/event"
	"khook.io/core/load"
	"khook.io/core/lock"
	"khook.io/core/run"
	"khook.io/core/state"
	"khook.io/core/timeline"
	"khook.io/core/version"
)

// journal is a run's journal: the record store and each step's input
// hash.
type journal struct {
	store  *state.Store
	hashes []string // by step index
	// reads are, by step index, what the record keeps of each kustomize:
	// source's build, to check it without building next time
	reads []map[string][]string
	// changes are the steps the run may change, with why (see changing)
	changes map[string]string
	// partial: --steps left steps out; the run never claims the whole
	// spec (its hash), and a destroy keeps the record
	partial bool
}

// openState loads the spec's record and hashes every step; nil when the
// spec has no state: block (or it is disabled). Every write of the record
// first asks the run lock lk whether the run still holds it.
func (c *Cluster) openState(ctx context.Context, lk *lock.Lock) (*journal, error) {
	sp := c.doc.Spec
	if !sp.State.IsEnabled() {
		return nil, nil
	}
	loc := state.LocationOf(sp)
	end := c.phase(event.PhaseRecord, "read state record "+loc.String())
	store, err := state.Open(ctx, c.clients.Typed, loc, sp.Metadata.Name)
	end(err)
	if err != nil {
		return nil, err
	}
	if lk != nil {
		store.Fence(lk.Fence)
	}
	ins, err := c.stepInputs(ctx, store.Salt(), store.Previous())
	if err != nil {
		return nil, err
	}
	rs := &journal{store: store, hashes: hashesOf(ins), reads: make([]map[string][]string, len(ins))}
	for i, in := range ins {
		rs.reads[i] = in.Reads
	}
	return rs, nil
}

// begin marks the run started in the record, proving it writable. The
// same write, acknowledged before any step starts, stops the record
// claiming success for every step the run may change (changing), so that
// whenever the process dies the record claims no more than the cluster
// has.
func (rs *journal) begin(ctx context.Context, r *Run) error {
	doc := r.c.doc
	names := make([]string, len(doc.Spec.Steps))
	for i, st := range doc.Spec.Steps {
		names[i] = st.Name
	}
	changing := rs.changing(r)
	rs.changes = changing
	end := r.c.phase(event.PhaseRecord, "mark the run begun in state record "+rs.store.Location().String())
	err := rs.store.Begin(ctx, state.Run{
		Command:      string(r.command),
		SpecHash:     rs.specHash(doc),
		KhookVersion: version.Get().Version,
		TraceID:      r.c.opts.TraceID,
		Steps:        names,
		Changing:     changing,
	})
	end(err)
	return err
}

// changing lists the steps a run may change, with why:
//   - apply: every step that will run. One recorded ok runs only because
//     its inputs changed, and re-running it replaces (a Job, a helm
//     upgrade dropping objects) or rewrites what the record says is there;
//     killed half-way, the old entry would claim objects as of inputs the
//     cluster no longer has.
//   - destroy: every step it undoes, and every step it leaves alone
//     (delete, patch, wait, rollout) whatever its when: says: what such a
//     step acted on may be objects destroy deletes, so its success no
//     longer holds once destroy has run. Only the steps of kinds destroy
//     undoes that a when: excludes are untouched: destroy leaves their
//     objects in place.
func (rs *journal) changing(r *Run) map[string]string {
	out := map[string]string{}
	for i, t := range r.tasks {
		if r.disp[i].Fate == FateNotSelected {
			continue // left as it is
		}
		switch r.command {
		case CommandDestroy:
			undoes := r.undoes[i]
			switch {
			case undoes && r.c.doc.Included(i):
				out[t.Name] = "destroy began: it may be partly or wholly undone"
			case !undoes:
				out[t.Name] = "destroy began: what it acted on may be deleted"
			}
		default:
			if t.Skip == "" {
				out[t.Name] = string(r.command) + " began running it again with changed inputs"
			}
		}
	}
	return out
}

// sink records every step's outcome as it happens.
func (rs *journal) sink(next event.Sink, ru *Run) event.Sink {
	doc := ru.c.doc
	index := make(map[string]int, len(doc.Spec.Steps))
	for i, st := range doc.Spec.Steps {
		index[st.Name] = i
	}
	red, command := ru.c.red, ru.command
	// when each attempt ran and waited, for the timeline picture
	times := timeline.NewCollector()
	return event.SinkFunc(func(e event.Event) {
		next.Emit(e)
		times.Emit(e)
		i, ok := index[e.Step]
		if !ok {
			return
		}
		// how a step skipped without an attempt was skipped: up front by
		// its fate, or by the run (not triggered, a need failed, not
		// reached)
		skipped := e.Kind == event.StepSkipped
		upFront := skipped && e.Skip.UpFront()
		if skipped && (e.Skip == event.SkipNotSelected || e.Skip == event.SkipNotTriggered) {
			// not selected, or not triggered (without a record, or with
			// inputs the record resumes): its entry stays exactly as it
			// was
			rs.store.Restore(e.Step)
			return
		}
		r := state.StepRecord{Type: e.Type, Hash: rs.hashes[i], Reads: rs.reads[i], Attempts: e.Attempt, DurationMs: e.Elapsed.Milliseconds(), FinishedAt: time.Now().UTC()}
		if start, tl := timeline.Record(times.Attempts(e.Step)); !start.IsZero() {
			start = start.UTC()
			r.StartedAt, r.Timeline = &start, tl
		}
		switch {
		case command == CommandDestroy:
			r.Hash, r.Reads = "", nil
			switch e.Kind {
			case event.StepSucceeded:
				// undone: the next apply must run it again
				r.Status, r.Detail = state.StepSkipped, "undone by destroy"
			case event.StepFailed:
				r.Status, r.Error = state.StepFailed, red.String("destroy failed: "+e.Message)
			case event.StepInterrupted:
				r.Status, r.Error = state.StepInterrupted, red.String("destroy "+e.Message)
			case event.StepSkipped:
				switch {
				case e.Attempt > 0:
					// its destroy found nothing to undo
					r.Status, r.Detail = state.StepSkipped, red.String("undone by destroy: "+e.Message)
				case !upFront:
					// never started (destroy stopped first): nothing of
					// it was touched, its entry stands as it was
					rs.store.Restore(e.Step)
					return
				case rs.changes[e.Step] != "":
					// a step destroy leaves alone (a delete, patch, wait
					// or rollout): it runs again on the next apply, as
					// what it acted on may be gone
					r.Status, r.Detail = state.StepSkipped, red.String("destroy left it alone ("+e.Message+"); the next apply runs it again")
				default:
					return // excluded by when: destroy left its objects in place
				}
			default:
				return
			}
		case e.Kind == event.StepSucceeded:
			r.Status, r.Detail = state.StepOK, red.String(e.Message)
		case e.Kind == event.StepFailed:
			r.Status, r.Error = state.StepFailed, red.String(e.Message)
		case e.Kind == event.StepInterrupted:
			r.Status, r.Error = state.StepInterrupted, red.String(e.Message)
		case skipped && e.Skip == event.SkipResumed:
			return // keep the success it resumed from
		case e.Kind == event.StepSkipped && e.Attempt > 0:
			// skipIf found it done: a success that resumes next time
			r.Status, r.Detail = state.StepOK, red.String("skipped: "+e.Message)
		case e.Kind == event.StepSkipped:
			r.Status, r.Detail = state.StepSkipped, red.String(e.Message)
		default:
			return
		}
		rs.store.Step(e.Step, r)
	})
}

// skipCause is the cause of the skip of a step whose fate skips it up
// front (the record keeps a resumed step's entry, restores one --steps
// left out, and says the others).
func skipCause(f Fate) event.SkipCause {
	switch f {
	case FateExcluded:
		return event.SkipExcluded
	case FateNotSelected:
		return event.SkipNotSelected
	case FateResume:
		return event.SkipResumed
	case FateLeftAlone:
		return event.SkipLeftAlone
	}
	return event.SkipUpFront
}

// finish records how the run ended; after a fully successful destroy it
// deletes the record instead.
func (rs *journal) finish(ctx context.Context, c *Cluster, command Command, runStatus string) (err error) {
	if command == CommandDestroy && runStatus == run.RunOK && !rs.partial {
		end := c.phase(event.PhaseRecord, "delete state record "+rs.store.Location().String())
		defer func() { end(err) }()
		return rs.store.Delete(ctx)
	}
	end := c.phase(event.PhaseRecord, "record how the run ended in state record "+rs.store.Location().String())
	defer func() { end(err) }()
	if err := rs.store.Finish(ctx, runStatus); err != nil {
		return fmt.Errorf("%w (the run itself ended %s)", err, runStatus)
	}
	return nil
}

// specHash is the whole spec's hash the run records: a partial run keeps
// the previous record's (it applied only some steps, never the spec).
func (rs *journal) specHash(doc *load.Document) string {
	if rs.partial {
		if prev := rs.store.Previous(); prev != nil {
			return prev.SpecHash
		}
		return ""
	}
	return state.SpecHash(doc.Spec.Metadata.Name, rs.hashes)
}
