package engine

import (
	"context"

	"khook.io/core/load"
	"khook.io/core/plan"
	"khook.io/core/state"
	"khook.io/core/step"
)

// stepInputs computes every step's inputs with the record's salt. prev is
// the record the hashes are compared with (nil: none): a kustomization
// whose recorded reads all still return the same is checked without a
// build. A step whose local inputs cannot be read gets no hash: it never
// resumes, and reports the problem itself when it runs.
func (c *Cluster) stepInputs(ctx context.Context, salt []byte, prev *state.Record) ([]*state.Inputs, error) {
	if c.registry == nil {
		return nil, errNoExecutors
	}
	h := &state.Hasher{BaseDir: c.doc.BaseDir, Redactor: c.red, Salt: salt, Previous: prev, Steps: c.registry}
	out := make([]*state.Inputs, len(c.doc.Spec.Steps))
	for i := range c.doc.Spec.Steps {
		in, err := h.Inputs(ctx, &c.doc.Spec.Steps[i])
		if err != nil {
			return nil, err
		}
		out[i] = in
	}
	return out, nil
}

func hashesOf(ins []*state.Inputs) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.Hash
	}
	return out
}

// markHashCannotSee notes, on each planned step of a spec that enables
// state, the remote content its input hash cannot see: what the step's
// executor (reg) declares, no cluster needed. Without executors nothing
// is noted.
func markHashCannotSee(p *plan.Plan, doc *load.Document, reg *step.Registry) {
	if !doc.Spec.State.IsEnabled() {
		return
	}
	byName := make(map[string]int, len(p.Steps))
	for k, ps := range p.Steps {
		byName[ps.Name] = k
	}
	for i := range doc.Spec.Steps {
		st := &doc.Spec.Steps[i]
		p.Steps[byName[st.Name]].HashCannotSee = state.HashCannotSee(st, doc.BaseDir, reg)
	}
}
