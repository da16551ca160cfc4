package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/internal/english"
	"khook.io/core/load"
	"khook.io/core/render"
)

// ValidateFlags are validate's flags.
type ValidateFlags struct {
	Spec   SpecFlags
	Output *outputFlag
}

// NewValidateFlags returns validate's flags with their defaults.
func NewValidateFlags() *ValidateFlags {
	return &ValidateFlags{Spec: NewSpecFlags(), Output: newOutputFlag("text", "text", "json")}
}

// AddFlags registers the flags.
func (f *ValidateFlags) AddFlags(cmd *cobra.Command) {
	f.Spec.AddFlags(cmd)
	f.Output.add(cmd, "output", "o", "output format")
}

// ValidateOptions is a ready-to-run validate.
type ValidateOptions struct {
	Spec   *SpecOptions
	Output string
	Out    io.Writer
}

// NewCmdValidate is the validate command.
func NewCmdValidate(name string, streams genericiooptions.IOStreams, src SpecSource) *cobra.Command {
	f := NewValidateFlags()
	cmd := runs(&cobra.Command{
		Use:   "validate -f SPEC",
		Short: "Check a spec without touching a cluster",
		Long: `Check a spec without touching a cluster: variables, YAML, every rule of the
DSL, when: conditions and the needs graph. Every problem is reported at once,
with file:line:col and field path. Exit code 0 when valid, 2 when not.`,
		Example: examples(name, `validate -f bootstrap.yaml
KHOOK_VAR_ENV=prod %s validate -f bootstrap.yaml --set REGION=eu-west-1`),
	}, func() (*ValidateOptions, error) { return f.ToOptions(streams, src) })
	f.AddFlags(cmd)
	return cmd
}

// ToOptions resolves the flags.
func (f *ValidateFlags) ToOptions(streams genericiooptions.IOStreams, src SpecSource) (*ValidateOptions, error) {
	so, err := f.Spec.ToOptions(src)
	if err != nil {
		return nil, err
	}
	return &ValidateOptions{Spec: so, Output: f.Output.value, Out: streams.Out}, nil
}

// validateResult is validate -o json.
type validateResult struct {
	Valid    bool           `json:"valid"`
	File     string         `json:"file"`
	Name     string         `json:"name,omitempty"`
	Steps    int            `json:"steps,omitempty"`
	Levels   int            `json:"levels,omitempty"`
	Problems []problemEntry `json:"problems"`
}

type problemEntry struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Path    string `json:"path,omitempty"`
	Step    string `json:"step,omitempty"` // the name of the step Path is in
	Message string `json:"message"`
}

// Run validates the spec.
func (o *ValidateOptions) Run(_ context.Context) error {
	doc, err := o.Spec.Load()
	if o.Output == "json" {
		res := validateResult{Valid: err == nil, File: o.Spec.Options.File, Problems: []problemEntry{}}
		var inv *load.InvalidError
		switch {
		case err == nil:
			res.Name, res.Steps, res.Levels = doc.Spec.Metadata.Name, len(doc.Spec.Steps), len(doc.Graph.Levels())
		case errors.As(err, &inv):
			for _, p := range inv.Problems {
				res.Problems = append(res.Problems, problemEntry{File: p.Pos.File, Line: p.Pos.Line, Column: p.Pos.Col, Path: p.Path, Step: p.Step, Message: p.Msg})
			}
		default:
			return err
		}
		if jerr := render.JSON(o.Out, res); jerr != nil {
			return jerr
		}
		if err != nil {
			return &ExitError{Code: ExitInvalid, Err: err, Silent: true}
		}
		return nil
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.Out, "%s is valid: %s, %s in %s.\n", displayFile(o.Spec.Options.File), doc.Spec.Metadata.Name,
		english.CountNoun(len(doc.Spec.Steps), "step"), english.CountNoun(len(doc.Graph.Levels()), "level"))
	return err
}

func displayFile(f string) string {
	if f == "-" {
		return "<stdin>"
	}
	return f
}
