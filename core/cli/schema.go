package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/schema"
	"khook.io/core/step"
)

// SchemaOptions is a ready-to-run schema (it has no flags).
type SchemaOptions struct {
	Out io.Writer
	// Steps builds the step kinds the schema describes (the entrypoint's).
	Steps func() (*step.Registry, error)
}

// NewCmdSchema is the schema command: of a spec whose steps are the kinds
// of steps.
func NewCmdSchema(streams genericiooptions.IOStreams, steps func() (*step.Registry, error)) *cobra.Command {
	return runs(&cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the khook v1 spec",
		Long: fmt.Sprintf(`Print the JSON Schema (draft 2020-12) of the khook v1 spec, $id %s.
Point yaml-language-server at it from the first line of a spec:

  # yaml-language-server: $schema=%s`, schema.ID, schema.ID),
	}, func() (*SchemaOptions, error) { return &SchemaOptions{Out: streams.Out, Steps: steps}, nil })
}

// Run prints the schema.
func (o *SchemaOptions) Run(context.Context) error {
	if o.Steps == nil {
		return errors.New("this build of khook has no step kinds")
	}
	reg, err := o.Steps()
	if err != nil {
		return err
	}
	b, err := schema.JSON(reg.Kinds())
	if err != nil {
		return err
	}
	_, err = o.Out.Write(b)
	return err
}
