package engine

import (
	"khook.io/core/load"
	"khook.io/core/timeline"
)

// TimelineDefs are doc's steps as a timeline of a run of command draws
// them, in the spec's order, each with the steps the run waited for: its
// needs, or for destroy (which undoes a step once every step that needs
// it is undone) the steps that need it.
func TimelineDefs(doc *load.Document, command Command) []timeline.Def {
	defs := make([]timeline.Def, len(doc.Spec.Steps))
	for i := range doc.Spec.Steps {
		st := &doc.Spec.Steps[i]
		defs[i] = timeline.Def{Name: st.Name, Type: st.Type(), Needs: st.Needs}
	}
	if command == CommandDestroy {
		needers := map[string][]string{}
		for _, st := range doc.Spec.Steps {
			for _, n := range st.Needs {
				needers[n] = append(needers[n], st.Name)
			}
		}
		for i := range defs {
			defs[i].Needs = needers[defs[i].Name]
		}
	}
	return defs
}

// Resumed reports, by step name, whether disp resumes the step of doc
// (the timeline marks it so).
func Resumed(doc *load.Document, disp []Disposition) func(name string) bool {
	resumed := make(map[string]bool, len(disp))
	for i, d := range disp {
		resumed[doc.Spec.Steps[i].Name] = d.Fate == FateResume
	}
	return func(name string) bool { return resumed[name] }
}
