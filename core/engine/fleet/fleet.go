// Package fleet runs one spec on several clusters, a fleet: it resolves
// the kubeconfig contexts its settings name (and a shard's slice of
// them), loads the spec once per context with that context's variables,
// refuses a fleet that names one cluster twice, visits the members, a
// bounded number at once, and runs apply or destroy on each (Run). It has
// no flags and prints nothing: its messages name settings, which the
// caller spells (engine.Spelling); the CLI renders what each member did.
package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"khook.io/core/engine"
	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/state"
	"khook.io/core/vars"
)

// ContextVar is the variable that holds, in a fleet run, the name of the
// kubeconfig context of the cluster the spec runs on.
const ContextVar = "KHOOK_CONTEXT"

// The fleet's settings its messages name, as engine.Settings.
const (
	// SettingContexts names the contexts of the fleet.
	SettingContexts engine.Setting = "contexts"
	// SettingContext is the connection's own choice of one context
	// (kubectl's --context, helm's --kube-context), which a fleet
	// excludes.
	SettingContext engine.Setting = "context"
	// SettingVarDir is the folder of a variables file per context.
	SettingVarDir engine.Setting = "var-dir"
	// SettingShard is one slice of the contexts.
	SettingShard engine.Setting = "shard"
)

// Options are the fleet's settings, as given.
type Options struct {
	// Contexts are the context names and glob patterns (SettingContexts).
	Contexts []string
	// VarDir holds a variables file per context (SettingVarDir).
	VarDir string
	// Shard is I/N: one slice of the contexts ("": all; SettingShard).
	Shard string
	// Spelling is how the caller spells the settings the messages name
	// (nil: neutrally).
	Spelling engine.Spelling
}

// Member is one cluster of a fleet: its context, its connection and the
// spec as its variables make it.
type Member struct {
	Context string
	Getter  genericclioptions.RESTClientGetter
	Doc     *load.Document
}

// ContextProblem is what is wrong with the spec, or its variables, for
// one context of a fleet.
type ContextProblem struct {
	Context string
	Err     error
}

// InvalidError is a fleet whose spec is invalid for some of its contexts,
// or whose flags do not fit it: nothing ran on any cluster. The CLI exits
// 2 for it.
type InvalidError struct {
	Contexts int // in the fleet
	Problems []ContextProblem
}

func (e *InvalidError) Error() string {
	first := e.Problems[0].Err.Error()
	same := len(e.Problems) == e.Contexts && !slices.ContainsFunc(e.Problems, func(p ContextProblem) bool { return p.Err.Error() != first })
	if same && e.Contexts > 1 {
		return fmt.Sprintf("in every context of the fleet (%d), nothing was run: %s", e.Contexts, first)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d contexts of the fleet cannot run the spec, so nothing was run on any:", len(e.Problems), e.Contexts)
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "\ncontext %q: %s", p.Context, p.Err)
	}
	return b.String()
}

// Unwrap exposes each context's error.
func (e *InvalidError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.Err
	}
	return out
}

// UsageError is a problem of the fleet's settings (both contexts and one
// context chosen, a shard that makes no slice): the CLI exits 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }

func (e *UsageError) Unwrap() error { return e.Err }

// Check refuses what the members cannot run, for every context at once
// (check: a command's own requirement of the spec, status's state:
// block): an *InvalidError naming each.
func Check(members []*Member, check func(*load.Document) error) error {
	var problems []ContextProblem
	for _, m := range members {
		if err := check(m.Doc); err != nil {
			problems = append(problems, ContextProblem{Context: m.Context, Err: err})
		}
	}
	if len(problems) > 0 {
		return &InvalidError{Contexts: len(members), Problems: problems}
	}
	return nil
}

// Resolve resolves o.Contexts against base's kubeconfig (cut to the
// shard's slice) and loads the spec once per context with loader, with
// opts and that context's variables: KHOOK_CONTEXT, and with a VarDir its
// DIR/<context>.yaml after opts' variables files. Nothing contacts a
// cluster. Every problem of every context is reported at once (an
// *InvalidError): a context whose variables file is missing, a spec
// invalid for some contexts (a variable missing in one only); then
// nothing runs anywhere.
func Resolve(base genericclioptions.RESTClientGetter, o Options, opts load.Options, loader *load.Loader) ([]*Member, error) {
	if base == nil {
		return nil, kube.ErrNoKubeconfig
	}
	if c := kube.ContextFlag(base); c != "" {
		return nil, &UsageError{Err: fmt.Errorf("%s and %s (%q) both choose the context: pass one", o.Spelling.Of(SettingContexts), o.Spelling.Of(SettingContext), c)}
	}
	names, files, err := kube.Contexts(base)
	if err != nil {
		return nil, err
	}
	selected, err := kube.SelectContexts(o.Contexts, names, files)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Spelling.Of(SettingContexts), err)
	}
	if o.Shard != "" {
		s, err := ParseShard(o.Shard, o.Spelling)
		if err != nil {
			return nil, &UsageError{Err: err}
		}
		if selected, err = s.Of(selected); err != nil {
			return nil, &UsageError{Err: err}
		}
	}
	// the spec is read once: every cluster runs the same text (standard
	// input can be read only once anyway)
	src, err := readSpecOnce(opts)
	if err != nil {
		return nil, err
	}
	if loader == nil {
		loader = &load.Loader{}
	}
	members := make([]*Member, len(selected))
	var problems []ContextProblem
	for i, name := range selected {
		getter, err := kube.ForContext(base, name)
		if err != nil {
			return nil, err
		}
		lo := opts
		lo.Stdin = bytes.NewReader(src)
		lo.ReadFile = func(string) ([]byte, error) { return src, nil }
		lo.Vars.VarFiles = slices.Clone(opts.Vars.VarFiles)
		lo.Vars.Fixed = []vars.Fixed{{Name: ContextVar, Value: name, About: "the name of the cluster's kubeconfig context in a fleet run (" + o.Spelling.Of(SettingContexts) + ")"}}
		if o.VarDir != "" {
			file, err := o.VarDirFile(name)
			if err != nil {
				problems = append(problems, ContextProblem{Context: name, Err: err})
				continue
			}
			lo.Vars.VarFiles = append(lo.Vars.VarFiles, file)
		}
		doc, err := loader.Load(lo)
		var inv *load.InvalidError
		switch {
		case errors.As(err, &inv):
			problems = append(problems, ContextProblem{Context: name, Err: err})
			continue
		case err != nil:
			return nil, err
		}
		members[i] = &Member{Context: name, Getter: getter, Doc: doc}
	}
	if len(problems) > 0 {
		return nil, &InvalidError{Contexts: len(selected), Problems: problems}
	}
	return members, nil
}

// readSpecOnce reads the spec opts names (standard input for "-").
func readSpecOnce(opts load.Options) ([]byte, error) {
	if opts.File == "-" {
		if opts.Stdin == nil {
			return nil, errors.New("no standard input to read the spec from")
		}
		src, err := io.ReadAll(opts.Stdin)
		if err != nil {
			return nil, fmt.Errorf("read spec from stdin: %w", err)
		}
		return src, nil
	}
	src, err := os.ReadFile(opts.File)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	return src, nil
}

// VarDirFile is context's variables file in o.VarDir, dir:
// dir/<context>.yaml, a "/" in the name making folders (an EKS context
// arn:aws:eks:...:cluster/prod reads dir/arn:aws:eks:...:cluster/prod.yaml).
// It must exist, and stay inside dir.
func (o Options) VarDirFile(context string) (string, error) {
	dir, varDir := o.VarDir, o.Spelling.Of(SettingVarDir)
	rel := filepath.FromSlash(context) + ".yaml"
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%s %s: the context's name does not name a file inside the folder", varDir, dir)
	}
	file := filepath.Join(dir, rel)
	info, err := os.Stat(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("no variables for this context: %s does not exist (%s %s holds a file per context of the fleet)", file, varDir, dir)
	case err != nil:
		return "", fmt.Errorf("%s: %w", varDir, err)
	case info.IsDir():
		return "", fmt.Errorf("no variables for this context: %s is a folder", file)
	}
	return file, nil
}

// ErrInterrupted is why a member whose turn never came did not run.
var ErrInterrupted = errors.New("not run: the fleet run was interrupted before its turn")

// Visit calls fn for every member index of a fleet of n, at most
// parallelism at once (0: no bound); a member whose turn comes after ctx
// is cancelled is not visited, its error ErrInterrupted. done, when set,
// is called with each member's error in the fleet's order, as soon as it
// and every member before it are done (a caller prints each member's
// output in order while later ones still run). It returns every member's
// error, by index: the one fan-out of a fleet.
func Visit(ctx context.Context, n, parallelism int, fn func(ctx context.Context, i int) error, done func(i int, err error)) []error {
	errs := make([]error, n)
	finished := make([]chan struct{}, n)
	for i := range finished {
		finished[i] = make(chan struct{})
	}
	go func() {
		var g errgroup.Group
		if parallelism > 0 {
			g.SetLimit(parallelism)
		}
		for i := range n {
			g.Go(func() error {
				defer close(finished[i])
				if ctx.Err() != nil {
					errs[i] = ErrInterrupted
					return nil
				}
				errs[i] = fn(ctx, i)
				return nil // a member's error is its result
			})
		}
		_ = g.Wait()
	}()
	for i := range n {
		<-finished[i]
		if done != nil {
			done(i, errs[i])
		}
	}
	return errs
}

// stateRecord names the state record doc's run writes: "" for none.
func stateRecord(doc *load.Document) string {
	if !doc.Spec.State.IsEnabled() {
		return ""
	}
	return state.LocationOf(doc.Spec).String()
}

// SameClusters refuses a fleet in which two contexts are one cluster
// (kube.SameCluster of ids, by member) unless both runs have a state
// record and the records differ (a state.name with ${KHOOK_CONTEXT}: the
// user's word that they are separate runs). A run without a record on a
// cluster another context also runs on is refused too. Members whose
// identity is unknown (known[i] false: they could not be connected to)
// fail alone and are left out. The error names every such set of
// contexts, with the cluster's server.
func SameClusters(members []*Member, ids []kube.ClusterID, known []bool, spell engine.Spelling) error {
	n := len(members)
	group := make([]int, n) // union-find over the clashes
	for i := range group {
		group[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if group[i] != i {
			group[i] = find(group[i])
		}
		return group[i]
	}
	clash := false
	for i := range n {
		for j := i + 1; j < n; j++ {
			if !known[i] || !known[j] || !kube.SameCluster(ids[i], ids[j]) {
				continue
			}
			ri, rj := stateRecord(members[i].Doc), stateRecord(members[j].Doc)
			if ri != "" && rj != "" && ri != rj {
				continue
			}
			clash = true
			group[find(j)] = find(i)
		}
	}
	if !clash {
		return nil
	}
	var b strings.Builder
	b.WriteString("the fleet names one cluster under several contexts, so nothing was run on any cluster:")
	done := map[int]bool{}
	for i := range n {
		root := find(i)
		if done[root] {
			continue
		}
		var names []string
		records := map[string]bool{}
		for j := range n {
			if find(j) == root {
				names = append(names, strconv.Quote(members[j].Context))
				records[stateRecord(members[j].Doc)] = true
			}
		}
		if len(names) < 2 {
			continue
		}
		done[root] = true
		fmt.Fprintf(&b, "\ncontexts %s are one cluster (%s) and would run there at once, ", AndList(names), ids[i])
		switch {
		case len(records) == 1 && records[""]:
			b.WriteString("without a state record")
		case len(records) == 1:
			for r := range records {
				fmt.Fprintf(&b, "sharing the state record %s", r)
			}
		default:
			b.WriteString("not each with a state record of its own")
		}
	}
	b.WriteString("\nname each cluster once in " + spell.Of(SettingContexts) + "; contexts meant as separate runs of one cluster each need a state record of their own (state.name: khook-state-${KHOOK_CONTEXT})")
	return &UsageError{Err: errors.New(b.String())}
}

// AndList joins names as a sentence does: "a", "a and b", "a, b and c".
func AndList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
