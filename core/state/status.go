package state

import "sort"

// What the next apply does with a step, given the record.
const (
	NextResume = "resume" // skipped: succeeded before with the same inputs
	NextRerun  = "re-run" // ran before; runs again
	NextRun    = "run"    // never ran
	NextSkip   = "skip"   // a when: excludes it
)

// SpecStep is a step of the current spec as status compares it.
type SpecStep struct {
	Name, Type string
	Hash       string
	// Excluded is set when a when: excludes the step now.
	Excluded bool
	// Resumes: the next apply resumes the step (the engine's decision:
	// the record has it done with the same, known inputs).
	Resumes bool
	When    string
	// HashCannotSee lists the remote content the step's hash identifies by
	// reference only (Inputs.HashCannotSee).
	HashCannotSee []string
}

// StepStatus is one step's record and what the next apply does with it.
type StepStatus struct {
	Name   string      `json:"name"`
	Type   string      `json:"type"`
	Record *StepRecord `json:"record,omitempty"`
	Next   string      `json:"next"`
	Why    string      `json:"why,omitempty"`
	// HashCannotSee lists the remote content the step depends on whose
	// changes its input hash cannot see.
	HashCannotSee []string `json:"hashCannotSee,omitempty"`
}

// Status compares a record with the current spec.
type Status struct {
	Location Location     `json:"-"`
	Record   *Record      `json:"-"`
	Steps    []StepStatus `json:"steps"`
	// Resumes lists the steps the next apply skips, in spec order.
	Resumes []string `json:"resumes"`
	// Removed lists recorded steps that are no longer in the spec.
	Removed []string `json:"removed"`
}

// Compare says, per step of the current spec, what the next apply does
// given the record: a step resumes when the caller says so (Resumes: the
// engine decides it as apply does); otherwise the record says why it
// runs again.
func Compare(loc Location, rec *Record, steps []SpecStep) *Status {
	st := &Status{Location: loc, Record: rec, Resumes: []string{}, Removed: []string{}}
	inSpec := make(map[string]bool, len(steps))
	for _, s := range steps {
		inSpec[s.Name] = true
		ss := StepStatus{Name: s.Name, Type: s.Type, Record: rec.Steps[s.Name], HashCannotSee: s.HashCannotSee}
		r := ss.Record
		switch {
		case s.Excluded:
			ss.Next, ss.Why = NextSkip, "when: "+s.When+" is false — will skip"
		case r == nil:
			ss.Next, ss.Why = NextRun, "never ran — will run"
		case s.Resumes:
			ss.Next, ss.Why = NextResume, "unchanged — will resume"
			st.Resumes = append(st.Resumes, s.Name)
		case r.Status == StepOK && s.Hash == "":
			ss.Next, ss.Why = NextRerun, "its inputs cannot be read — will re-run"
		case r.Status == StepOK:
			ss.Next, ss.Why = NextRerun, "input changed — will re-run"
		case r.Status == StepFailed:
			ss.Next, ss.Why = NextRerun, "failed — will re-run"
		case r.Status == StepInterrupted:
			ss.Next, ss.Why = NextRerun, "interrupted — will re-run"
		case r.Status == StepRunning:
			ss.Next, ss.Why = NextRerun, "running, or its run was killed — will re-run"
		default:
			ss.Next, ss.Why = NextRerun, "skipped — will re-run"
		}
		st.Steps = append(st.Steps, ss)
	}
	for name := range rec.Steps {
		if !inSpec[name] {
			st.Removed = append(st.Removed, name)
		}
	}
	sort.Strings(st.Removed)
	return st
}
