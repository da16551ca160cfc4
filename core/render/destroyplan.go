package render

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"khook.io/core/engine"
	"khook.io/core/internal/english"
	"khook.io/core/step"
)

// DestroyPlanView is what destroy would do, per cluster: shown before it
// asks, and by destroy --dry-run.
type DestroyPlanView struct {
	Spec     string
	Clusters []DestroyCluster
}

// DestroyCluster is one cluster's destroy plan. Err says why it could not
// be planned (unreachable); Steps are in destroy's order (the last step
// first).
type DestroyCluster struct {
	Context, Server, Err string
	Steps                []DestroyStep
}

// The steps, objects and fields of a destroy plan are the engine's
// (engine.Run.DestroyPlan).
type (
	DestroyStep   = engine.DestroyStep
	DestroyObject = engine.DestroyObject
	DestroyField  = engine.DestroyField
)

// maxFieldValue is how much of a field's value the plan shows, in
// characters.
const maxFieldValue = 60

// fieldLine is one field of a reverted object as the plan shows it.
func fieldLine(f DestroyField) string {
	var s string
	switch f.Outcome {
	case "restore":
		s = f.Path + ": back to " + clip(f.Value)
	case "remove":
		s = f.Path + ": removed"
		if f.Value != "" {
			s += ", the server then sets " + clip(f.Value)
		}
	case "stay":
		s = f.Path + ": stays"
	case "lost":
		s = f.Path + ": stays as khook wrote it"
	default:
		s = f.Path + ": " + f.Outcome
	}
	if f.Reason != "" {
		s += " (" + f.Reason + ")"
	}
	return s
}

// clip shortens a value to maxFieldValue characters.
func clip(v string) string {
	r := []rune(v)
	if len(r) <= maxFieldValue {
		return v
	}
	return string(r[:maxFieldValue-1]) + "…"
}

// Counts returns the cluster's headline: "2 to delete, 1 to revert": the
// objects of each action its kind counts (DestroyAction.Tally), in the
// actions' rank.
func (c DestroyCluster) Counts() string {
	n := map[string]int{}
	var tallies []step.DestroyAction
	for _, s := range c.Steps {
		for _, it := range s.Items {
			a := it.Action
			if a.Tally == "" {
				continue
			}
			if n[a.Tally] == 0 {
				tallies = append(tallies, a)
			}
			n[a.Tally]++
		}
	}
	if len(tallies) == 0 {
		return "nothing to undo"
	}
	sort.SliceStable(tallies, func(i, j int) bool {
		if tallies[i].Rank != tallies[j].Rank {
			return tallies[i].Rank < tallies[j].Rank
		}
		return tallies[i].Tally < tallies[j].Tally
	})
	parts := make([]string, len(tallies))
	for i, a := range tallies {
		parts[i] = fmt.Sprintf("%d %s", n[a.Tally], a.Tally)
	}
	return strings.Join(parts, ", ")
}

// Refused returns the objects the plan refuses ("Kind/name in ns: why"),
// each with its cluster's context in a fleet.
func (v DestroyPlanView) Refused() []string {
	var out []string
	for _, c := range v.Clusters {
		for _, s := range c.Steps {
			for _, it := range s.Items {
				if !it.Action.Refuses {
					continue
				}
				line := "step " + s.Name + ": " + it.Object + ": " + it.Reason
				if len(v.Clusters) > 1 {
					line = c.Context + ": " + line
				}
				out = append(out, line)
			}
		}
	}
	return out
}

// DestroyPlan writes the plan: per cluster its context, server and
// counts, then every step and object with what destroy does and why.
func DestroyPlan(w io.Writer, v DestroyPlanView) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Destroy plan of spec %s (the last step first):\n", v.Spec)
	for _, c := range v.Clusters {
		name := c.Context
		if name == "" {
			name = c.Server
		}
		fmt.Fprintf(&b, "\nCluster %s (server %s): ", name, c.Server)
		if c.Err != "" {
			fmt.Fprintf(&b, "cannot be planned: %s\n", c.Err)
			continue
		}
		fmt.Fprintf(&b, "%s\n", c.Counts())
		for _, s := range c.Steps {
			fmt.Fprintf(&b, "  %s (%s)", s.Name, s.Type)
			if s.Note != "" {
				fmt.Fprintf(&b, ": %s", s.Note)
			}
			b.WriteString("\n")
			for _, it := range s.Items {
				fmt.Fprintf(&b, "    %-9s %s", it.Action.Word, it.Object)
				if it.Reason != "" {
					fmt.Fprintf(&b, ": %s", it.Reason)
				}
				b.WriteString("\n")
				same := 0
				for _, f := range it.Fields {
					if f.Outcome == "same" {
						same++
						continue
					}
					fmt.Fprintf(&b, "              %s\n", fieldLine(f))
				}
				switch {
				case same == 1:
					b.WriteString("              1 more field stays as it was: khook's write did not change it\n")
				case same > 1:
					fmt.Fprintf(&b, "              %d more fields stay as they were: khook's write did not change them\n", same)
				}
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// DestroyQuestion asks for the spec's name (or yes), naming the clusters.
func DestroyQuestion(w io.Writer, v DestroyPlanView) error {
	names := make([]string, len(v.Clusters))
	for i, c := range v.Clusters {
		names[i] = c.Context
		if names[i] == "" {
			names[i] = c.Server
		}
	}
	_, err := fmt.Fprintf(w, "\ndestroy deletes what spec %s created, and removes what it wrote on objects it did not create, on %s (%s).\nType the spec's name (%s) or 'yes' to destroy: ",
		v.Spec, english.CountNoun(len(v.Clusters), "cluster"), strings.Join(names, ", "), v.Spec)
	return err
}
