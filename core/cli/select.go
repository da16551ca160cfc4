package cli

import (
	"errors"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"khook.io/core/engine"
	"khook.io/core/load"
	"khook.io/core/render"
)

// Day-2 flags: which steps a run touches (--steps, --no-needs) and which
// it re-runs whatever the record says (--replace); the engine resolves
// them (engine.Resolve) and decides each step's fate (engine.Dispose).

// SelectFlags are --steps, --no-needs and --replace.
type SelectFlags struct {
	Steps   []string
	NoNeeds bool
	Replace []string

	// emptySteps and emptyReplace record a flag given an empty value
	// (an unset variable): refused, never taken for its absence.
	emptySteps, emptyReplace bool
}

// AddFlags registers --steps, and for the commands that run steps
// forward (apply, plan, diff) --no-needs and --replace; destroy
// (undo=true) takes --steps alone; status and graph (replace=false)
// --steps and --no-needs.
func (f *SelectFlags) AddFlags(cmd *cobra.Command, command string) {
	fs := cmd.Flags()
	undo := command == "destroy"
	usage := "run only these steps and the steps they need, transitively (step names and glob patterns, comma-separated or repeated); the others are skipped: not selected"
	if undo {
		usage = "undo only these steps and the steps that need them, transitively (step names and glob patterns, comma-separated or repeated); the others are left alone"
	}
	fs.Var(&contextsValue{list: &f.Steps, empty: &f.emptySteps}, "steps", usage)
	_ = cmd.RegisterFlagCompletionFunc("steps", completeSteps)
	if undo {
		return
	}
	fs.BoolVar(&f.NoNeeds, "no-needs", false, "with --steps: only the steps named, not the steps they need (each need must be selected or recorded done in the state record)")
	if command == "status" || command == "graph" {
		return
	}
	fs.Var(&contextsValue{list: &f.Replace, empty: &f.emptyReplace}, "replace", "re-run these steps (names and glob patterns) even when the state record says they are unchanged, and whatever their triggeredBy says")
	_ = cmd.RegisterFlagCompletionFunc("replace", completeSteps)
}

// check refuses a selection flag given an empty value, and --no-needs
// without --steps, before the spec is read.
func (f *SelectFlags) check() error {
	var errs []error
	if f.emptySteps || len(f.Steps) > 0 && !slices.ContainsFunc(f.Steps, notBlank) {
		errs = append(errs, errors.New("--steps was given an empty value (an unset variable?): it names the steps to run, so it is not taken for its absence (every step); name the steps, or leave the flag out"))
	}
	if f.emptyReplace || len(f.Replace) > 0 && !slices.ContainsFunc(f.Replace, notBlank) {
		errs = append(errs, errors.New("--replace was given an empty value (an unset variable?): name the steps to re-run, or leave the flag out"))
	}
	if f.NoNeeds && len(f.Steps) == 0 && !f.emptySteps {
		errs = append(errs, errors.New("--no-needs needs --steps: it runs the steps --steps names without the steps they need"))
	}
	if len(errs) > 0 {
		return invalid(errors.Join(errs...))
	}
	return nil
}

// resolve resolves the flags against doc for command and writes the
// warnings of what they name that will not happen to w.
func (f *SelectFlags) resolve(doc *load.Document, command engine.Command, w io.Writer) (*engine.Selection, error) {
	sel, err := engine.Resolve(doc, command, engine.SelectOptions{Steps: f.Steps, NoNeeds: f.NoNeeds, Replace: f.Replace, Spelling: flagOf})
	if err != nil {
		return nil, err
	}
	if w != nil {
		for _, m := range sel.Warnings {
			render.Note(w, engine.Note{Kind: engine.NoteWarning, Text: m})
		}
	}
	return sel, nil
}

// flagOf spells a setting the engine's messages name as the CLI's flag.
func flagOf(s engine.Setting) string { return "--" + string(s) }

// completeSteps completes --steps and --replace with the names of the
// steps of the spec -f names, read as written (no variables resolved).
func completeSteps(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	file, _ := cmd.Flags().GetString("file")
	if file == "" || file == "-" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var doc struct {
		Steps []struct {
			Name string `json:"name"`
		} `json:"steps"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, st := range doc.Steps {
		if st.Name != "" {
			names = append(names, st.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
