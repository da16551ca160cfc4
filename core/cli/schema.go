package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/schema"
)

// SchemaOptions is a ready-to-run schema (it has no flags).
type SchemaOptions struct {
	Out io.Writer
}

// NewCmdSchema is the schema command.
func NewCmdSchema(streams genericiooptions.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the khook v1 spec",
		Long: fmt.Sprintf(`Print the JSON Schema (draft 2020-12) of the khook v1 spec, $id %s.
Point yaml-language-server at it from the first line of a spec:

  # yaml-language-server: $schema=%s`, schema.ID, schema.ID),
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return (&SchemaOptions{Out: streams.Out}).Run(cmd.Context())
		},
	}
}

// Run prints the schema.
func (o *SchemaOptions) Run(context.Context) error {
	_, err := o.Out.Write(schema.JSON())
	return err
}
