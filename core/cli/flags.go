package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"khook.io/core/load"
	"khook.io/core/vars"
)

// SpecFlags are the flags every command that reads a spec takes.
type SpecFlags struct {
	File         string
	Set          []string
	VarFiles     []string
	VarPrefix    string
	SecretPrefix string
}

// NewSpecFlags returns the spec flags with their defaults.
func NewSpecFlags() SpecFlags {
	return SpecFlags{VarPrefix: vars.DefaultVarPrefix, SecretPrefix: vars.DefaultSecretPrefix}
}

// AddFlags registers the spec flags.
func (f *SpecFlags) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVarP(&f.File, "file", "f", "", "spec file to read, or - for standard input")
	fs.StringArrayVar(&f.Set, "set", nil, "set a variable: NAME=value (repeatable; wins over every other source)")
	fs.StringArrayVar(&f.VarFiles, "var-file", nil, "read variables from a flat YAML map of NAME: value (repeatable; later files win)")
	fs.StringVar(&f.VarPrefix, "var-prefix", vars.DefaultVarPrefix, "prefix of the environment variables read as variables")
	fs.StringVar(&f.SecretPrefix, "secret-prefix", vars.DefaultSecretPrefix, "prefix of the environment variables read as secret variables (redacted from all output)")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	_ = cmd.MarkFlagFilename("var-file", "yaml", "yml")
}

// ToOptions checks the flags and turns them into the options of the
// spec's load.
func (f *SpecFlags) ToOptions(src SpecSource) (*SpecOptions, error) {
	if f.File == "" {
		return nil, invalid(fmt.Errorf("no spec given: pass -f <file> (or -f - to read standard input)"))
	}
	if f.VarPrefix == "" || f.SecretPrefix == "" {
		return nil, invalid(fmt.Errorf("--var-prefix and --secret-prefix must not be empty"))
	}
	if f.VarPrefix == f.SecretPrefix {
		return nil, invalid(fmt.Errorf("--var-prefix and --secret-prefix must differ (both are %q)", f.VarPrefix))
	}
	return &SpecOptions{Loader: src.Loader, Options: load.Options{
		File:     f.File,
		Stdin:    src.Stdin,
		Redactor: src.Redactor,
		Vars: vars.Options{
			Set:          f.Set,
			VarFiles:     f.VarFiles,
			Environ:      src.Environ,
			VarPrefix:    f.VarPrefix,
			SecretPrefix: f.SecretPrefix,
		},
	}}, nil
}

// outputFlag is an -o/--output flag restricted to a set of formats.
type outputFlag struct {
	value   string
	allowed []string
}

func newOutputFlag(def string, allowed ...string) *outputFlag {
	return &outputFlag{value: def, allowed: allowed}
}

func (o *outputFlag) String() string { return o.value }
func (o *outputFlag) Type() string   { return "format" }
func (o *outputFlag) Set(v string) error {
	if !slices.Contains(o.allowed, v) {
		return fmt.Errorf("must be one of %s", strings.Join(o.allowed, "|"))
	}
	o.value = v
	return nil
}

func (o *outputFlag) add(cmd *cobra.Command, name, short, usage string) {
	cmd.Flags().VarP(o, name, short, usage+" ("+strings.Join(o.allowed, "|")+")")
	_ = cmd.RegisterFlagCompletionFunc(name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return o.allowed, cobra.ShellCompDirectiveNoFileComp
	})
}

var _ pflag.Value = (*outputFlag)(nil)

// examples indents each example line and prefixes it with the plugin's
// name; a line holding %s gets the name there instead.
func examples(name, lines string) string {
	out := strings.Split(lines, "\n")
	for i, l := range out {
		if strings.Contains(l, "%s") {
			out[i] = "  " + fmt.Sprintf(l, name)
		} else {
			out[i] = "  " + name + " " + l
		}
	}
	return strings.Join(out, "\n")
}
