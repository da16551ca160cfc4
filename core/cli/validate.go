package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

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

// Run validates the spec.
func (o *ValidateOptions) Run(_ context.Context) error {
	doc, err := o.Spec.Load()
	if o.Output != "json" {
		if err != nil {
			return err
		}
		return render.Valid(o.Out, o.Spec.Options.File, doc)
	}
	res, ok := render.NewValidateReport(o.Spec.Options.File, doc, err)
	if !ok {
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
