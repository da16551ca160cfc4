package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/render"
	"khook.io/core/version"
)

// VersionFlags are version's flags.
type VersionFlags struct {
	Output *outputFlag
}

// NewVersionFlags returns version's flags with their defaults.
func NewVersionFlags() *VersionFlags {
	return &VersionFlags{Output: newOutputFlag("text", "text", "json")}
}

// VersionOptions is a ready-to-run version.
type VersionOptions struct {
	// Name is how users invoke the plugin ("kubectl khook").
	Name   string
	Output string
	Out    io.Writer
	// Info is the build's version (version.Get).
	Info version.Info
}

// ToOptions resolves the flags.
func (f *VersionFlags) ToOptions(name string, streams genericiooptions.IOStreams) (*VersionOptions, error) {
	return &VersionOptions{Name: name, Output: f.Output.value, Out: streams.Out, Info: version.Get()}, nil
}

// NewCmdVersion is the version command.
func NewCmdVersion(name string, streams genericiooptions.IOStreams) *cobra.Command {
	f := NewVersionFlags()
	cmd := runs(&cobra.Command{
		Use:   "version",
		Short: "Print khook's version, commit, build date and platform",
	}, func() (*VersionOptions, error) { return f.ToOptions(name, streams) })
	f.Output.add(cmd, "output", "o", "output format")
	return cmd
}

// Run prints the version.
func (o *VersionOptions) Run(context.Context) error {
	info := o.Info
	if o.Output == "json" {
		return render.JSON(o.Out, info)
	}
	_, err := fmt.Fprintf(o.Out, "%s %s\ncommit: %s\ndate: %s\nplatform: %s\ngo: %s\n",
		o.Name, info.Version, info.Commit, info.Date, info.Platform, info.GoVersion)
	return err
}
