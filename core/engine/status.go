package engine

import (
	"context"
	"slices"

	"khook.io/core/load"
	"khook.io/core/spec"
	"khook.io/core/state"
)

// NeedsState refuses a spec without a state: block for a command that
// reads the record (status): there is nothing to read.
func NeedsState(doc *load.Document) error {
	if doc.Spec.State.IsEnabled() {
		return nil
	}
	pos := doc.Positions.At("state")
	return &load.InvalidError{Problems: spec.ErrorList{{Pos: pos, Path: "state", Msg: "status reads the run-state record, which this spec does not enable: add state: {} (or state.enabled: true)"}}}
}

// NextConditional is what status says the next apply does with a step
// Dispose makes conditional: it runs if a trigger changes something.
const NextConditional = "conditional"

// Status reads one cluster's state record and compares it with the spec (a
// command made from the session, NewStatus, in helm's action style),
// hashing each step's inputs as apply does: what the next apply does with
// each step, as Dispose decides it (a step with triggeredBy the record
// has done is conditional, as apply has it). With a selection, only the
// selected steps. nil when there is no record yet. A note says when a run
// holds the record's lock.
type Status struct{ c *Cluster }

// NewStatus is the status of c's cluster.
func NewStatus(c *Cluster) *Status { return &Status{c: c} }

// Run reads and compares: see Status.
func (s *Status) Run(ctx context.Context) (*state.Status, error) {
	c := s.c
	if err := NeedsState(c.doc); err != nil {
		return nil, err
	}
	c.noteLock(ctx)
	rec, ins, err := c.readRecord(ctx)
	if err != nil || rec == nil {
		return nil, err
	}
	disp := Dispose(c.doc, CommandStatus, c.opts.Selection, Facts{Resumed: Resumes(c.doc, rec, hashesOf(ins))})
	resumes := make([]bool, len(disp))
	for i, d := range disp {
		resumes[i] = d.Fate == FateResume || d.Fate == FateBlocked && d.Resumed
	}
	st := c.compare(rec, ins, resumes)
	for k := range st.Steps {
		if i, ok := c.doc.Graph.Index(st.Steps[k].Name); ok && disp[i].Fate == FateConditional {
			st.Steps[k].Next, st.Steps[k].Why = NextConditional, "unchanged — "+disp[i].Reason(c.doc, i)
		}
	}
	if sel := c.opts.Selection; sel.Partial() {
		in := map[string]bool{}
		for i, s := range c.doc.Spec.Steps {
			in[s.Name] = sel.Selected(i)
		}
		st.Steps = slices.DeleteFunc(st.Steps, func(s state.StepStatus) bool { return !in[s.Name] })
		st.Resumes = slices.DeleteFunc(st.Resumes, func(n string) bool { return !in[n] })
	}
	return st, nil
}

// recorded is what the state record says of a command about to run: the
// record (nil without one), every step's inputs, which steps the record
// resumes, and the fate each step gets.
type recorded struct {
	rec     *state.Record
	ins     []*state.Inputs
	resumed []bool
	disp    []Disposition
}

// dispose reads the record and gives each step the fate command gives it;
// an error when the record cannot be read or --no-needs leaves a step
// blocked.
func (c *Cluster) dispose(ctx context.Context, command Command) (*recorded, error) {
	rec, ins, err := c.readRecord(ctx)
	if err != nil {
		return nil, err
	}
	resumed := make([]bool, len(c.doc.Spec.Steps))
	if rec != nil {
		resumed = Resumes(c.doc, rec, hashesOf(ins))
	}
	disp := Dispose(c.doc, command, c.opts.Selection, Facts{Resumed: resumed})
	if err := CheckBlocked(c.doc, disp); err != nil {
		return nil, err
	}
	return &recorded{rec: rec, ins: ins, resumed: resumed, disp: disp}, nil
}

// readRecord reads the state record, without writing it, and reads every
// step's inputs (their hashes) to compare with it: nil without a state:
// block or a record.
func (c *Cluster) readRecord(ctx context.Context) (*state.Record, []*state.Inputs, error) {
	if !c.doc.Spec.State.IsEnabled() {
		return nil, nil, nil
	}
	rec, found, err := state.Read(ctx, c.clients.Typed, state.LocationOf(c.doc.Spec))
	if err != nil || !found {
		return nil, nil, err
	}
	ins, err := c.stepInputs(ctx, rec.SaltBytes(), rec)
	if err != nil {
		return nil, nil, err
	}
	return rec, ins, nil
}

// compare is the record compared with the spec, resumed saying which
// steps the next apply resumes.
func (c *Cluster) compare(rec *state.Record, ins []*state.Inputs, resumed []bool) *state.Status {
	sp := c.doc.Spec
	steps := make([]state.SpecStep, len(sp.Steps))
	for i, st := range sp.Steps {
		steps[i] = state.SpecStep{Name: st.Name, Type: st.Type(), Hash: ins[i].Hash, Excluded: !c.doc.Included(i), When: st.When, Resumes: resumed[i], HashCannotSee: ins[i].HashCannotSee}
	}
	return state.Compare(state.LocationOf(sp), rec, steps)
}
