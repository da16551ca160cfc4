package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"khook.io/core/event"
	"khook.io/core/load"
	"khook.io/core/render"
	"khook.io/core/spec"
	"khook.io/core/state"
	"khook.io/core/version"
)

// runState is a run's journal: the record store and each step's input
// hash.
type runState struct {
	store  *state.Store
	hashes []string // by step index
	// reads are, by step index, what the record keeps of each kustomize:
	// source's build, to check it without building next time
	reads []map[string][]string
}

// openState loads the spec's record and hashes every step; nil when the
// spec has no state: block (or it is disabled).
func (s *session) openState(ctx context.Context) (*runState, error) {
	sp := s.doc.Spec
	if !sp.State.IsEnabled() {
		return nil, nil
	}
	loc := state.Location{Namespace: sp.StateNamespace(), Name: sp.StateSecretName()}
	store, err := state.Open(ctx, s.clients.Typed, loc, sp.Metadata.Name)
	if err != nil {
		return nil, err
	}
	ins, err := s.stepInputs(ctx, store.Salt(), store.Previous())
	if err != nil {
		return nil, err
	}
	rs := &runState{store: store, hashes: hashesOf(ins), reads: make([]map[string][]string, len(ins))}
	for i, in := range ins {
		rs.reads[i] = in.Reads
	}
	return rs, nil
}

// hashSteps computes every step's input hash to compare with rec.
func (s *session) hashSteps(ctx context.Context, rec *state.Record) ([]string, error) {
	ins, err := s.stepInputs(ctx, rec.SaltBytes(), rec)
	if err != nil {
		return nil, err
	}
	return hashesOf(ins), nil
}

// begin marks the run started in the record, proving it writable.
func (rs *runState) begin(ctx context.Context, command string, s *session) error {
	names := make([]string, len(s.doc.Spec.Steps))
	for i, st := range s.doc.Spec.Steps {
		names[i] = st.Name
	}
	return rs.store.Begin(ctx, command, state.SpecHash(s.doc.Spec.Metadata.Name, rs.hashes), version.Get().Version, names)
}

// sink records every step's outcome as it happens.
func (rs *runState) sink(next event.Sink, s *session, command string) event.Sink {
	index := make(map[string]int, len(s.doc.Spec.Steps))
	for i, st := range s.doc.Spec.Steps {
		index[st.Name] = i
	}
	red := s.app.red
	return event.SinkFunc(func(e event.Event) {
		next.Emit(e)
		i, ok := index[e.Step]
		if !ok {
			return
		}
		r := state.StepRecord{Type: e.Type, Hash: rs.hashes[i], Reads: rs.reads[i], Attempts: e.Attempt, DurationMs: e.Elapsed.Milliseconds(), FinishedAt: time.Now().UTC()}
		switch {
		case command == "destroy":
			switch e.Kind {
			case event.StepSucceeded:
				// undone: the next apply must run it again
				r.Status, r.Detail, r.Hash = state.StepSkipped, "undone by destroy", ""
			case event.StepFailed:
				r.Status, r.Error, r.Hash = state.StepFailed, red.String("destroy failed: "+e.Message), ""
			case event.StepInterrupted:
				r.Status, r.Error, r.Hash = state.StepInterrupted, red.String("destroy "+e.Message), ""
			default:
				return // a step destroy leaves alone keeps its record
			}
		case e.Kind == event.StepSucceeded:
			r.Status, r.Detail = state.StepOK, red.String(e.Message)
		case e.Kind == event.StepFailed:
			r.Status, r.Error = state.StepFailed, red.String(e.Message)
		case e.Kind == event.StepInterrupted:
			r.Status, r.Error = state.StepInterrupted, red.String(e.Message)
		case e.Kind == event.StepSkipped && e.Message == state.ResumeReason:
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

// finish records how the run ended; after a fully successful destroy it
// deletes the record instead.
func (rs *runState) finish(ctx context.Context, command, runStatus string) error {
	if command == "destroy" && runStatus == "ok" {
		return rs.store.Delete(ctx)
	}
	if err := rs.store.Finish(ctx, runStatus); err != nil {
		return fmt.Errorf("%w (the run itself ended %s)", err, runStatus)
	}
	return nil
}

// ---- status ----

func (a *app) newStatusCommand() *cobra.Command {
	f := &SpecFlags{}
	out := newOutputFlag("text", "text", "json")
	cmd := &cobra.Command{
		Use:   "status -f SPEC",
		Short: "Show the last run recorded in the spec's state record",
		Long: `Show the last run recorded in the spec's state record: when it ran, each
step's outcome, and what the next apply will do with each step (resume it,
re-run it because it failed or its inputs changed, run it for the first
time). The spec must have a state: block. Without a record yet: "not applied
yet", exit 0.`,
		Example: a.examples(`status -f bootstrap.yaml
status -f bootstrap.yaml -o json`),
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.status(cmd.Context(), f, out.value)
		},
	}
	f.AddFlags(cmd)
	out.add(cmd, "output", "o", "output format")
	return cmd
}

func (a *app) status(ctx context.Context, f *SpecFlags, output string) error {
	doc, err := f.load(a)
	if err != nil {
		return err
	}
	sp := doc.Spec
	if !sp.State.IsEnabled() {
		pos := doc.Positions.At("state")
		return &load.InvalidError{Problems: spec.ErrorList{{Pos: pos, Path: "state", Msg: "status reads the run-state record, which this spec does not enable: add state: {} (or state.enabled: true)"}}}
	}
	clients, err := a.clients(ctx)
	if err != nil {
		return err
	}
	loc := state.Location{Namespace: sp.StateNamespace(), Name: sp.StateSecretName()}
	rec, found, err := state.Read(ctx, clients.Typed, loc)
	if err != nil {
		return err
	}
	if !found {
		if output == "json" {
			return render.JSON(a.out, render.NewStatusReport(nil))
		}
		_, err := fmt.Fprintf(a.out, "%s is not applied yet: no state record at %s.\n", sp.Metadata.Name, loc)
		return err
	}
	s := &session{app: a, doc: doc}
	ins, err := s.stepInputs(ctx, rec.SaltBytes(), rec)
	if err != nil {
		return err
	}
	steps := make([]state.SpecStep, len(sp.Steps))
	for i, st := range sp.Steps {
		steps[i] = state.SpecStep{Name: st.Name, Type: st.Type(), Hash: ins[i].Hash, Excluded: !doc.Included(i), When: st.When, HashCannotSee: ins[i].HashCannotSee}
	}
	st := state.Compare(loc, rec, steps)
	if output == "json" {
		return render.JSON(a.out, render.NewStatusReport(st))
	}
	return render.StatusText(a.out, st)
}
