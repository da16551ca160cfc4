package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/engine/fleet"
	"khook.io/core/redact"
	"khook.io/core/render"
)

// defaultFleetParallelism is how many clusters a fleet run runs at once.
const defaultFleetParallelism = 4

// ContextFlagger is a Connection whose flag for one kubeconfig context is
// not kubectl's --context (helm's --kube-context).
type ContextFlagger interface {
	ContextFlag() string
}

// FleetFlags make a command run on several clusters, a fleet: the
// kubeconfig contexts --contexts names, each with variables of its own.
type FleetFlags struct {
	Contexts []string
	VarDir   string
	// Parallelism bounds how many clusters run at once (0: no bound).
	Parallelism int
	// Shard is --shard I/N: one slice of the contexts (shard.go).
	Shard string

	// emptyContexts and emptyVarDir record a flag given an empty value
	// (--contexts '', an unset CI variable): refused, never taken for
	// the flag's absence.
	emptyContexts, emptyVarDir bool
	emptyShard                 bool
}

// AddFlags registers the fleet flags; contextFlag is the name of the
// connection's own flag for one context (--contexts is refused with it).
func (f *FleetFlags) AddFlags(cmd *cobra.Command, contextFlag string) {
	fs := cmd.Flags()
	fs.Var(&contextsValue{list: &f.Contexts, empty: &f.emptyContexts}, "contexts", fmt.Sprintf("run on each of these kubeconfig contexts (a fleet): names and glob patterns (*, ?, [...]; * does not match /), comma-separated or repeated, e.g. 'prod-*,staging-eu'; not with --%s", contextFlag))
	fs.Var(&nonEmptyValue{value: &f.VarDir, empty: &f.emptyVarDir}, "var-dir", "with --contexts: each context's variables from DIR/<context>.yaml (a flat map, like --var-file, winning over the --var-file files); one must exist for every context")
	fs.IntVar(&f.Parallelism, "fleet-parallelism", defaultFleetParallelism, "with --contexts: how many clusters run at once (0: no limit)")
	fs.Var(&nonEmptyValue{value: &f.Shard, empty: &f.emptyShard}, "shard", "with --contexts: run only slice I of N (I/N, from 1; or K+1/N with K from 0, as an Indexed Job's $(JOB_COMPLETION_INDEX)+1/N) of the matched contexts sorted by name")
	_ = cmd.MarkFlagDirname("var-dir")
}

// NewFleetFlags returns the fleet flags with their defaults.
func NewFleetFlags() FleetFlags { return FleetFlags{Parallelism: defaultFleetParallelism} }

func (f *FleetFlags) enabled() bool { return len(f.Contexts) > 0 }

// check refuses a fleet flag given an empty value, fleet flags without
// --contexts, and a negative bound.
func (f *FleetFlags) check() error {
	var empty []error
	if f.emptyContexts || len(f.Contexts) > 0 && !slices.ContainsFunc(f.Contexts, notBlank) {
		empty = append(empty, errors.New("--contexts was given an empty value (an unset variable?): it names the clusters to run on, so it is not taken for its absence (the current context); name the contexts, or leave the flag out"))
	}
	if f.emptyVarDir {
		empty = append(empty, errors.New("--var-dir was given an empty value (an unset variable?): name the folder of the contexts' variables files, or leave the flag out"))
	}
	if err := f.checkShard(); err != nil {
		empty = append(empty, err)
	}
	switch {
	case len(empty) > 0:
		return invalid(errors.Join(empty...))
	case f.Parallelism < 0:
		return invalid(errors.New("--fleet-parallelism must not be negative"))
	case f.enabled():
		return nil
	case f.VarDir != "":
		return invalid(errors.New("--var-dir needs --contexts: it holds a variables file per context of a fleet"))
	case f.Parallelism != defaultFleetParallelism:
		return invalid(errors.New("--fleet-parallelism needs --contexts"))
	}
	return nil
}

func notBlank(s string) bool { return strings.TrimSpace(s) != "" }

// contextsValue is --contexts: pflag's string slice (comma-separated, CSV
// quoting, repeatable), which also records a value naming no context at
// all ("", ",", " "), which pflag's would take for the flag's absence.
type contextsValue struct {
	list    *[]string
	empty   *bool
	changed bool
}

func (v *contextsValue) Set(val string) error {
	var entries []string
	if val != "" {
		var err error
		if entries, err = csv.NewReader(strings.NewReader(val)).Read(); err != nil {
			return err
		}
	}
	if !slices.ContainsFunc(entries, notBlank) {
		*v.empty = true
	}
	if !v.changed {
		*v.list = entries
		v.changed = true
	} else {
		*v.list = append(*v.list, entries...)
	}
	return nil
}

func (v *contextsValue) Type() string { return "stringSlice" }

func (v *contextsValue) String() string { return "[" + strings.Join(*v.list, ",") + "]" }

// nonEmptyValue is a string flag that records being given a blank value.
type nonEmptyValue struct {
	value *string
	empty *bool
}

func (v *nonEmptyValue) Set(val string) error {
	*v.value = val
	if !notBlank(val) {
		*v.empty = true
	}
	return nil
}

func (v *nonEmptyValue) Type() string { return "string" }

func (v *nonEmptyValue) String() string { return *v.value }

// checkShard checks --shard: a blank value is refused (an unset
// variable), --shard without --contexts is a usage error.
func (f *FleetFlags) checkShard() error {
	switch {
	case f.emptyShard:
		return invalid(errors.New("--shard was given an empty value (an unset variable?): it names the slice of the contexts to run, so it is not taken for its absence (every context); give I/N, or leave the flag out"))
	case f.Shard == "":
		return nil
	case !f.enabled():
		return invalid(errors.New("--shard needs --contexts: it runs one slice of the contexts of a fleet"))
	}
	if _, err := fleet.ParseShard(f.Shard, flagOf); err != nil {
		return invalid(err)
	}
	return nil
}

// loadFleet resolves the fleet flags against the connection's kubeconfig
// and loads the spec once per context (fleet.Resolve): every problem of
// every context at once, nothing contacted.
func loadFleet(clusters *Clusters, ff *FleetFlags, so *SpecOptions) ([]*fleet.Member, error) {
	return fleet.Resolve(clusters.getter(), fleetOptions(ff, clusters), so.Options, so.loader())
}

// fleetOptions are the fleet flags for fleet.Resolve.
func fleetOptions(ff *FleetFlags, clusters *Clusters) fleet.Options {
	return fleet.Options{Contexts: ff.Contexts, VarDir: ff.VarDir, Shard: ff.Shard, Spelling: clusters.spelling()}
}

// memberOut is where a member's warnings and notes go: standard error,
// each line naming its context.
func memberOut(w io.Writer, m *fleet.Member) io.Writer {
	return render.PrefixLines(w, m.Context+": ")
}

// memberOutput is what one cluster of a fleet printed, and its error.
type memberOutput struct {
	out, errOut bytes.Buffer
	err         error
}

// silent reports whether err was already said in the output (diff's
// "there are differences").
func silent(err error) bool {
	var ee *ExitError
	return errors.As(err, &ee) && ee.Silent
}

// forEachMember runs fn on every cluster of a fleet (fleet.Visit), each
// printing into buffers of its own, never interleaved. With sections,
// each cluster's output is printed in a section of its own
// (render.Section), in the fleet's order, as soon as it and the clusters
// before it are done.
func forEachMember(ctx context.Context, streams genericiooptions.IOStreams, red *redact.Redactor, members []*fleet.Member, parallelism int, sections bool,
	fn func(ctx context.Context, i int, m *fleet.Member, out, errOut io.Writer) error) []*memberOutput {
	outs := make([]*memberOutput, len(members))
	for i := range outs {
		outs[i] = &memberOutput{}
	}
	fleet.Visit(ctx, len(members), parallelism, func(ctx context.Context, i int) error {
		return fn(ctx, i, members[i], &outs[i].out, &outs[i].errOut)
	}, func(i int, err error) {
		outs[i].err = err
		if sections {
			if silent(err) {
				err = nil
			}
			render.Section(streams.Out, streams.ErrOut, i == 0, members[i].Context, outs[i].out.Bytes(), outs[i].errOut.Bytes(), errorText(red, err))
		}
	})
	return outs
}

// fleetError is the error of a fleet command whose clusters failed (code
// is the exit code; ExitInvalid when one was refused as the command's
// usage), or nil.
func fleetError(members []*fleet.Member, outs []*memberOutput, code int) error {
	var failed []string
	for i, o := range outs {
		if o.err != nil && !silent(o.err) {
			failed = append(failed, members[i].Context)
			if exitCode(o.err, code) == ExitInvalid {
				code = ExitInvalid
			}
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &ExitError{Code: code, Err: fmt.Errorf("%d of %d clusters failed: %s", len(failed), len(members), strings.Join(failed, ", "))}
}

// errorText is err's text for a report, redacted; "" for nil.
func errorText(red *redact.Redactor, err error) string {
	if err == nil {
		return ""
	}
	return red.String(err.Error())
}
