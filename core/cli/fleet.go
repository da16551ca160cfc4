package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"khook.io/core/event"
	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/render"
	"khook.io/core/run"
	"khook.io/core/vars"
)

// ContextVar is the variable that holds, in a fleet run, the name of the
// kubeconfig context of the cluster the spec runs on.
const ContextVar = "KHOOK_CONTEXT"

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

// member is one cluster of a fleet: its context, its connection and the
// spec as its variables make it.
type member struct {
	context string
	getter  genericclioptions.RESTClientGetter
	doc     *load.Document
}

// ContextProblem is what is wrong with the spec, or its variables, for
// one context of a fleet.
type ContextProblem struct {
	Context string
	Err     error
}

// FleetInvalidError is a fleet whose spec is invalid for some of its
// contexts: nothing ran on any cluster. The CLI exits 2 for it.
type FleetInvalidError struct {
	Contexts int // in the fleet
	Problems []ContextProblem
}

func (e *FleetInvalidError) Error() string {
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
func (e *FleetInvalidError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.Err
	}
	return out
}

// loadFleet resolves --contexts against the kubeconfig and loads the spec
// once per context, with that context's variables: KHOOK_CONTEXT, and with
// --var-dir its DIR/<context>.yaml after the --var-file files. Nothing
// contacts a cluster. Every problem of every context is reported at once:
// a context whose variables file is missing, a spec invalid for some
// contexts (a variable missing in one only); then nothing runs anywhere.
func loadFleet(clusters *Clusters, ff *FleetFlags, so *SpecOptions) ([]*member, error) {
	if clusters == nil || clusters.Connection == nil {
		return nil, kube.ErrNoKubeconfig
	}
	base := clusters.Connection.RESTClientGetter()
	if c := kube.ContextFlag(base); c != "" {
		return nil, invalid(fmt.Errorf("--contexts and --%s (%q) both choose the context: pass one", clusters.contextFlag(), c))
	}
	names, files, err := kube.Contexts(base)
	if err != nil {
		return nil, err
	}
	selected, err := kube.SelectContexts(ff.Contexts, names, files)
	if err != nil {
		return nil, err
	}
	if selected, err = ff.sharded(selected); err != nil {
		return nil, err
	}
	opts := so.Options
	// the spec is read once: every cluster runs the same text (standard
	// input can be read only once anyway)
	src, err := readSpecOnce(opts)
	if err != nil {
		return nil, err
	}
	members := make([]*member, len(selected))
	var problems []ContextProblem
	for i, name := range selected {
		getter, err := kube.ForContext(base, name)
		if err != nil {
			return nil, err
		}
		o := opts
		o.Stdin = bytes.NewReader(src)
		o.ReadFile = func(string) ([]byte, error) { return src, nil }
		o.Vars.VarFiles = slices.Clone(opts.Vars.VarFiles)
		o.Vars.Fixed = []vars.Fixed{{Name: ContextVar, Value: name, About: "the name of the cluster's kubeconfig context in a fleet run (--contexts)"}}
		if ff.VarDir != "" {
			file, err := varDirFile(ff.VarDir, name)
			if err != nil {
				problems = append(problems, ContextProblem{Context: name, Err: err})
				continue
			}
			o.Vars.VarFiles = append(o.Vars.VarFiles, file)
		}
		doc, err := so.load(o)
		var inv *load.InvalidError
		switch {
		case errors.As(err, &inv):
			problems = append(problems, ContextProblem{Context: name, Err: err})
			continue
		case err != nil:
			return nil, err
		}
		members[i] = &member{context: name, getter: getter, doc: doc}
	}
	if len(problems) > 0 {
		return nil, &ExitError{Code: ExitInvalid, Err: &FleetInvalidError{Contexts: len(selected), Problems: problems}}
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

// varDirFile is context's variables file in dir: dir/<context>.yaml, a
// "/" in the name making folders (an EKS context
// arn:aws:eks:...:cluster/prod reads dir/arn:aws:eks:...:cluster/prod.yaml).
// It must exist, and stay inside dir.
func varDirFile(dir, context string) (string, error) {
	rel := filepath.FromSlash(context) + ".yaml"
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("--var-dir %s: the context's name does not name a file inside the folder", dir)
	}
	file := filepath.Join(dir, rel)
	info, err := os.Stat(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("no variables for this context: %s does not exist (--var-dir %s holds a file per context of the fleet)", file, dir)
	case err != nil:
		return "", fmt.Errorf("--var-dir: %w", err)
	case info.IsDir():
		return "", fmt.Errorf("no variables for this context: %s is a folder", file)
	}
	return file, nil
}

// fleetInterrupted is why a cluster whose turn never came did not run.
const fleetInterrupted = "not run: the fleet run was interrupted before its turn"

// runFleet runs apply or destroy on every cluster of the fleet, at most
// --fleet-parallelism at once, each with its own connection, state record
// and variables; a cluster that fails (unreachable, a step failed, its
// record not writable) fails alone. Every cluster is connected to (and
// told apart from the others) before any runs: a fleet naming one cluster
// twice with one state record runs nowhere. Ctrl-C cancels every cluster:
// those running stop their steps cleanly, those not started yet never
// start.
func (o *RunOptions) runFleet(ctx context.Context) error {
	members, err := loadFleet(o.Clusters, &o.Fleet, o.Spec)
	if err != nil {
		return err
	}
	doc := members[0].doc
	if _, err := o.Select.resolve(doc, o.Command); err != nil {
		return err
	}
	order := doc.Graph.Order()
	if o.Command == "destroy" {
		order = doc.Graph.Reverse()
	}
	infos := make([]render.ClusterInfo, len(members))
	for i, m := range members {
		infos[i] = render.ClusterInfo{Context: m.context, Steps: stepInfos(m.doc, order)}
	}
	popts, w := o.Progress.options(o.Command)
	progress := render.NewFleetProgress(w, infos, popts)
	start := time.Now()
	runs := make([]render.ClusterRun, len(members))
	conns := o.connectFleet(ctx, members, progress, infos)
	if ctx.Err() == nil {
		if err := sameClusters(members, conns); err != nil {
			for i, c := range conns {
				if c.err == nil {
					progress.Cluster(i).Finished(run.RunFailed, "not run: the fleet names one cluster twice")
				}
			}
			progress.Close()
			return &ExitError{Code: ExitInvalid, Err: err}
		}
	}
	var g errgroup.Group
	if p := o.Fleet.Parallelism; p > 0 {
		g.SetLimit(p)
	}
	for i, m := range members {
		if conns[i].err != nil {
			runs[i] = conns[i].failed
			continue
		}
		g.Go(func() error {
			runs[i] = o.runMember(ctx, m, conns[i].s, progress.Cluster(i), infos[i].Steps)
			return nil // a cluster's error is its result
		})
	}
	_ = g.Wait()
	progress.Close()
	return o.fleetReport(doc.Spec.Metadata.Name, runs, time.Since(start))
}

// memberConn is one cluster's connection, made before any cluster runs,
// and its identity.
type memberConn struct {
	s       *session
	id      kube.ClusterID
	started time.Time
	// err: the cluster cannot be used (unreachable, its identity
	// unreadable, its turn never came); it fails alone, failed its run.
	err    error
	failed render.ClusterRun
}

// connectFleet connects to every cluster of the fleet (checking each up
// front, as a single run does), at most --fleet-parallelism at once, and
// reads each one's identity; each connection serves its cluster's run.
func (o *RunOptions) connectFleet(ctx context.Context, members []*member, progress *render.FleetProgress, infos []render.ClusterInfo) []memberConn {
	conns := make([]memberConn, len(members))
	var g errgroup.Group
	if p := o.Fleet.Parallelism; p > 0 {
		g.SetLimit(p)
	}
	for i, m := range members {
		g.Go(func() error {
			c, cp := &conns[i], progress.Cluster(i)
			c.started = time.Now()
			defer func() {
				if c.err != nil {
					c.failed = o.memberFailed(ctx, m, cp, infos[i].Steps, c.started, c.err)
				}
			}()
			if ctx.Err() != nil {
				c.err = errors.New(fleetInterrupted)
				return nil
			}
			cp.Connecting()
			notes := &linePrefixer{w: o.Streams.ErrOut, prefix: m.context + ": "}
			if c.s, c.err = o.Clusters.newSession(ctx, m.doc, m.getter, notes); c.err != nil {
				return nil
			}
			if c.err = c.s.bindSelection(&o.Select, o.Command, notes); c.err != nil {
				return nil
			}
			pctx, cancel := c.s.preflight(ctx)
			defer cancel()
			c.id, c.err = c.s.clients.ClusterID(pctx)
			return nil
		})
	}
	_ = g.Wait()
	return conns
}

// stateRecord names the state record doc's run writes: "" for none.
func stateRecord(doc *load.Document) string {
	if !doc.Spec.State.IsEnabled() {
		return ""
	}
	return doc.Spec.StateNamespace() + "/" + doc.Spec.StateSecretName()
}

// sameClusters refuses a fleet in which two contexts are one cluster
// (kube.SameCluster) unless both runs have a state record and the records
// differ (a state.name with ${KHOOK_CONTEXT}: the user's word that they
// are separate runs). A run without a record on a cluster another context
// also runs on is refused too. Clusters that could not be connected to
// fail alone and are left out. The error names every such set of
// contexts, with the cluster's server.
func sameClusters(members []*member, conns []memberConn) error {
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
			if conns[i].err != nil || conns[j].err != nil || !kube.SameCluster(conns[i].id, conns[j].id) {
				continue
			}
			ri, rj := stateRecord(members[i].doc), stateRecord(members[j].doc)
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
				names = append(names, strconv.Quote(members[j].context))
				records[stateRecord(members[j].doc)] = true
			}
		}
		if len(names) < 2 {
			continue
		}
		done[root] = true
		fmt.Fprintf(&b, "\ncontexts %s are one cluster (%s) and would run there at once, ", andList(names), conns[i].id)
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
	b.WriteString("\nname each cluster once in --contexts; contexts meant as separate runs of one cluster each need a state record of their own (state.name: khook-state-${KHOOK_CONTEXT})")
	return errors.New(b.String())
}

// fleetReport prints a fleet run's report; its error says whether every
// cluster succeeded.
func (o *RunOptions) fleetReport(name string, runs []render.ClusterRun, elapsed time.Duration) error {
	var err error
	switch o.Output {
	case "json":
		err = render.JSON(o.Streams.Out, render.NewFleetReport(name, o.Command, runs, elapsed))
	case "junit":
		err = render.JUnit(o.Streams.Out, name, o.Command, runs, elapsed, o.Redactor)
	default:
		err = render.FleetSummary(o.Streams.Out, name, o.Command, runs, elapsed)
	}
	if err != nil {
		return err
	}
	if render.FleetStatus(runs) != run.RunOK {
		return &ExitError{Code: ExitFailed, Silent: true}
	}
	return nil
}

// runMember runs the command on one cluster of the fleet, connected (s).
func (o *RunOptions) runMember(ctx context.Context, m *member, s *session, cp *render.ClusterProgress, steps []render.StepInfo) render.ClusterRun {
	started := time.Now()
	if ctx.Err() != nil {
		return o.memberFailed(ctx, m, cp, steps, started, errors.New(fleetInterrupted))
	}
	notes := &linePrefixer{w: o.Streams.ErrOut, prefix: m.context + ": "}
	s.forceCRDs = o.Destroy.ForceCRDs
	s.fieldManager = o.FieldManager
	res, stateErr, err := s.execute(ctx, o.Command, o.LockTimeout, o.Parallelism, notes, func(*execution) (event.Sink, func()) { return cp, func() {} })
	if err != nil {
		return o.memberFailed(ctx, m, cp, steps, started, err)
	}
	cr := render.ClusterRun{Context: m.context, Started: started}
	cr.Result, cr.Status, cr.Duration = res, res.Status, time.Since(cr.Started)
	if stateErr != nil {
		cr.Err = o.Redactor.String(stateErr.Error())
		if cr.Status == run.RunOK {
			cr.Status = run.RunFailed
		}
	}
	cp.Finished(cr.Status, cr.Err)
	return cr
}

// memberFailed ends a cluster's run before its steps ran (interrupted
// when ctx was cancelled).
func (o *RunOptions) memberFailed(ctx context.Context, m *member, cp *render.ClusterProgress, steps []render.StepInfo, started time.Time, err error) render.ClusterRun {
	cr := render.ClusterRun{Context: m.context, Started: started, Status: run.RunFailed, Err: o.Redactor.String(err.Error())}
	if ctx.Err() != nil {
		cr.Status = run.RunInterrupted
	}
	cr.Result = render.NotRun(steps, "not run: "+firstLine(cr.Err))
	cr.Duration = time.Since(cr.Started)
	cp.Finished(cr.Status, cr.Err)
	return cr
}

// andList joins names as a sentence does: "a", "a and b", "a, b and c".
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// linePrefixer writes each line with a prefix (a cluster's API warnings
// say which cluster they come from).
type linePrefixer struct {
	mu      sync.Mutex
	w       io.Writer
	prefix  string
	midLine bool
}

func (p *linePrefixer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	var out bytes.Buffer
	for len(b) > 0 {
		if !p.midLine {
			out.WriteString(p.prefix)
		}
		line, rest, found := bytes.Cut(b, []byte("\n"))
		out.Write(line)
		if found {
			out.WriteByte('\n')
		}
		p.midLine = !found
		b = rest
	}
	_, err := p.w.Write(out.Bytes())
	return n, err
}
