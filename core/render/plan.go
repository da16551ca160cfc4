// Package render prints plans and graphs for people (text, Mermaid, DOT)
// and for programs (JSON, YAML). Callers write the result through the
// secret redactor.
package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"khook.io/core/engine"
	"khook.io/core/internal/english"
	"khook.io/core/plan"
)

// PlanText writes the plan as a table: one row per step in DAG order, with
// the reason for a skip (or an unknown), live details and the remote
// content the step's input hash cannot see on the following lines.
func PlanText(w io.Writer, p *plan.Plan) error {
	steps := len(p.Steps)
	fmt.Fprintf(w, "Plan for %s (%s): %s in %s\n\n", p.Name, p.Mode, english.CountNoun(steps, "step"), english.CountNoun(p.Levels, "level"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEVEL\tSTEP\tTYPE\tACTION\tNEEDS\tSUMMARY")
	for _, s := range p.Steps {
		needs := "-"
		if len(s.Needs) > 0 {
			needs = strings.Join(s.Needs, ",")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", s.Level, s.Name, s.Type, s.Action, needs, s.Summary)
		if s.Reason != "" {
			fmt.Fprintf(tw, "\t\t\t\t\t↳ %s\n", s.Reason)
		}
		for _, d := range s.Details {
			fmt.Fprintf(tw, "\t\t\t\t\t↳ %s\n", d)
		}
		for _, r := range s.HashCannotSee {
			fmt.Fprintf(tw, "\t\t\t\t\t↳ the input hash cannot see %s\n", r)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	counts := map[string]int{}
	var order []string
	for _, s := range p.Steps {
		if counts[s.Action] == 0 {
			order = append(order, s.Action)
		}
		counts[s.Action]++
	}
	parts := make([]string, len(order))
	for i, a := range order {
		parts[i] = fmt.Sprintf("%d %s", counts[a], a)
	}
	if _, err := fmt.Fprintf(w, "\n%s.\n", strings.Join(parts, ", ")); err != nil {
		return err
	}
	var drifted []string
	for _, s := range p.Steps {
		if len(s.Drift) > 0 {
			drifted = append(drifted, s.Name)
		}
	}
	if len(drifted) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "Drift left as it is (drift mode warn) in %s: %s.\n", english.CountNoun(len(drifted), "step"), strings.Join(drifted, ", "))
	return err
}

// JSON writes v as indented JSON.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// YAML writes v as YAML, with the field names of its JSON form.
func YAML(w io.Writer, v any) error {
	out, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("render yaml: %w", err)
	}
	_, err = w.Write(out)
	return err
}

// Mermaid writes the plan's DAG as a Mermaid flowchart. Steps the plan
// skips (a when: excludes, --steps leaves out) are drawn dashed.
func Mermaid(w io.Writer, res *engine.PlanResult) error {
	p := res.Plan
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	ids := nodeIDs(p)
	skipped := false
	for _, s := range p.Steps {
		label := s.Name + "<br/>" + s.Type
		class := ""
		if res.Skips(s.Name) {
			label += " (skip)"
			class = ":::skipped"
			skipped = true
		}
		fmt.Fprintf(&b, "  %s[\"%s\"]%s\n", ids[s.Name], label, class)
	}
	for _, s := range p.Steps {
		for _, n := range s.Needs {
			fmt.Fprintf(&b, "  %s --> %s\n", ids[n], ids[s.Name])
		}
	}
	if skipped {
		b.WriteString("  classDef skipped stroke-dasharray: 5 5,color:#888\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// DOT writes the plan's DAG in Graphviz DOT, the steps the plan skips
// dashed.
func DOT(w io.Writer, res *engine.PlanResult) error {
	p := res.Plan
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %q {\n  rankdir=TB;\n  node [shape=box, fontname=\"sans-serif\"];\n", p.Name)
	for _, s := range p.Steps {
		attrs := fmt.Sprintf("label=%q", s.Name+"\n"+s.Type)
		if res.Skips(s.Name) {
			attrs = fmt.Sprintf("label=%q, style=dashed, fontcolor=gray", s.Name+"\n"+s.Type+" (skip)")
		}
		fmt.Fprintf(&b, "  %q [%s];\n", s.Name, attrs)
	}
	for _, s := range p.Steps {
		for _, n := range s.Needs {
			fmt.Fprintf(&b, "  %q -> %q;\n", n, s.Name)
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// nodeIDs gives each step a Mermaid-safe id (step names may hold "--",
// which Mermaid reads as an edge).
func nodeIDs(p *plan.Plan) map[string]string {
	ids := make(map[string]string, len(p.Steps))
	for i, s := range p.Steps {
		ids[s.Name] = fmt.Sprintf("s%d", i)
	}
	return ids
}
