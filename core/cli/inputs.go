package cli

import (
	"context"
	"errors"

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
func (s *session) stepInputs(ctx context.Context, salt []byte, prev *state.Record) ([]*state.Inputs, error) {
	if s.registry == nil {
		// the executors declare what a step reads: without them a hash
		// would leave the files out and never match apply's
		return nil, errors.New("this build of khook has no step executors to read the steps' inputs")
	}
	h := &state.Hasher{BaseDir: s.doc.BaseDir, Redactor: s.red, Salt: salt, Previous: prev, Steps: s.registry}
	out := make([]*state.Inputs, len(s.doc.Spec.Steps))
	for i := range s.doc.Spec.Steps {
		in, err := h.Inputs(ctx, &s.doc.Spec.Steps[i])
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
// executor declares (clusters' Steps build them, no cluster needed).
// Without executors nothing is noted.
func markHashCannotSee(p *plan.Plan, doc *load.Document, clusters *Clusters) {
	if !doc.Spec.State.IsEnabled() {
		return
	}
	var reg *step.Registry
	if clusters != nil && clusters.Steps != nil {
		if r, err := clusters.Steps(); err == nil {
			reg = r
		}
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
