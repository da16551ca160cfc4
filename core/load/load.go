// Package load turns a spec file into a checked document: it reads the
// file, resolves variables, substitutes them (keeping positions in the file
// as written), decodes and validates the YAML, decides every when: and
// orders the steps into a DAG. Every problem is reported at once, each with
// file:line:col and field path; secrets are registered with the redactor
// before anything can print them.
package load

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"khook.io/core/cel"
	"khook.io/core/plan"
	"khook.io/core/redact"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/vars"
)

// Options say where the spec and its variables come from.
type Options struct {
	// File is the spec path, or "-" for Stdin.
	File  string
	Stdin io.Reader
	// Vars are the variable sources (--set, --var-file, the environment).
	Vars vars.Options
	// Redactor receives every secret; a new one is made when nil.
	Redactor *redact.Redactor
	// ReadFile reads the spec file; nil means os.ReadFile.
	ReadFile func(string) ([]byte, error)
}

// Document is a loaded, valid spec.
type Document struct {
	Spec       *spec.Spec
	Positions  *spec.Positions
	Vars       *vars.Set
	Redactor   *redact.Redactor
	Graph      *plan.Graph
	Conditions []plan.Condition // by step index
	// BaseDir is the folder local paths in the spec are relative to.
	BaseDir string
}

// Included reports whether step i runs (its when: is absent or true).
func (d *Document) Included(i int) bool { return d.Conditions[i].Included }

// Settings returns step i's effective scheduling fields.
func (d *Document) Settings(i int) plan.Settings {
	return plan.EffectiveSettings(&d.Spec.Steps[i], d.Spec.Defaults)
}

// OfflinePlan is the plan from the spec alone.
func (d *Document) OfflinePlan() *plan.Plan {
	return plan.Offline(d.Spec, d.Graph, d.Conditions)
}

// InvalidError wraps every problem of an invalid spec (or of its variable
// sources): the CLI exits 2 for it.
type InvalidError struct {
	Problems spec.ErrorList
}

func (e *InvalidError) Error() string {
	n := len(e.Problems)
	head := "1 problem"
	if n != 1 {
		head = strconv.Itoa(n) + " problems"
	}
	return "invalid spec: " + head + ":\n" + e.Problems.Error()
}

// Unwrap exposes the problems.
func (e *InvalidError) Unwrap() error { return e.Problems }

// Loader loads specs; it keeps the CEL environment and the step kinds
// between loads. It is safe for concurrent use; do not copy it once used.
type Loader struct {
	// Steps builds the step registry whose kinds (step.Registry.Kinds) a
	// spec's steps may be: the entrypoint's, as for running them
	// (steps/builtin.Registry). It is called once. Nil: no kinds, and
	// every load fails.
	Steps func() (*step.Registry, error)

	cel      cel.Env
	once     sync.Once
	kinds    *spec.StepKinds
	kindsErr error
}

// stepKinds returns the kinds of Steps' registry, built once.
func (l *Loader) stepKinds() (*spec.StepKinds, error) {
	l.once.Do(func() {
		if l.Steps == nil {
			l.kindsErr = errors.New("no step kinds: the spec loader was given no step registry")
			return
		}
		reg, err := l.Steps()
		if err != nil {
			l.kindsErr = err
			return
		}
		l.kinds = reg.Kinds()
	})
	return l.kinds, l.kindsErr
}

// Load reads and checks a spec. An invalid spec or invalid variable sources
// return *InvalidError carrying every problem; an unreadable file returns
// a plain error.
func (l *Loader) Load(opts Options) (*Document, error) {
	red := opts.Redactor
	if red == nil {
		red = redact.New()
	}
	file := opts.File
	if _, err := l.stepKinds(); err != nil {
		return nil, err
	}
	src, baseDir, err := readSpec(opts)
	if err != nil {
		return nil, err
	}
	set, err := vars.Resolve(opts.Vars, red)
	if err == nil {
		return l.parse(src, file, baseDir, set, red)
	}
	problems := varProblems(err, file, red)
	if errors.Is(err, vars.ErrShortSecret) {
		// The short secret is not registered for masking, and masking it
		// would garble every message: nothing the spec holds is printed.
		return nil, &InvalidError{Problems: problems.Sort()}
	}
	// Report the spec's problems too, all at once.
	_, perr := l.parse(src, file, baseDir, set, red)
	var inv *InvalidError
	if errors.As(perr, &inv) {
		problems = append(problems, inv.Problems...)
	}
	return nil, &InvalidError{Problems: problems.Sort()}
}

// varProblems lists the problems of the variable sources: a var file's
// at their positions in it, the others under the spec's name.
func varProblems(err error, file string, red *redact.Redactor) spec.ErrorList {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := make(spec.ErrorList, 0, len(errs))
	for _, e := range errs {
		var fe *vars.FileError
		if errors.As(e, &fe) {
			out = append(out, &spec.FieldError{Pos: spec.Pos{File: fe.File, Line: fe.Line, Col: fe.Col}, Msg: red.String(fe.Msg)})
			continue
		}
		out = append(out, &spec.FieldError{Pos: spec.Pos{File: file}, Msg: red.String(e.Error())})
	}
	return out
}

func readSpec(opts Options) ([]byte, string, error) {
	switch opts.File {
	case "":
		return nil, "", errors.New("no spec file: pass -f <file> (or -f - for stdin)")
	case "-":
		if opts.Stdin == nil {
			return nil, "", errors.New("no standard input to read the spec from")
		}
		src, err := io.ReadAll(opts.Stdin)
		if err != nil {
			return nil, "", fmt.Errorf("read spec from stdin: %w", err)
		}
		wd, err := os.Getwd()
		if err != nil {
			return nil, "", fmt.Errorf("working directory: %w", err)
		}
		return src, wd, nil
	}
	read := opts.ReadFile
	if read == nil {
		read = os.ReadFile
	}
	src, err := read(opts.File)
	if err != nil {
		return nil, "", fmt.Errorf("read spec: %w", err)
	}
	abs, err := filepath.Abs(opts.File)
	if err != nil {
		return nil, "", fmt.Errorf("spec path: %w", err)
	}
	return src, filepath.Dir(abs), nil
}

// Parse checks spec text that was already read: file names it in errors,
// baseDir anchors its local paths.
func (l *Loader) Parse(src []byte, file, baseDir string, set *vars.Set, red *redact.Redactor) (*Document, error) {
	if red == nil {
		red = redact.New()
	}
	return l.parse(src, file, baseDir, set, red)
}

func (l *Loader) parse(src []byte, file, baseDir string, set *vars.Set, red *redact.Redactor) (*Document, error) {
	kinds, err := l.stepKinds()
	if err != nil {
		return nil, err
	}
	sub := vars.Substitute(src, set, red)
	s, pos, problems := spec.Decode(sub.Text, file, sub.SourcePos, kinds)
	placeheld := false
	if len(sub.Problems) > 0 && pos.Failed("") && slices.ContainsFunc(problems, func(p *spec.FieldError) bool { return p.Syntax }) {
		if s2, pos2, problems2, ok := decodePlaceholders(sub, file, kinds); ok {
			s, pos, problems, placeheld = s2, pos2, problems2, true
		} else {
			// A syntax error on the line of a reference that could not be
			// read is what the rest of that reference's line became.
			problems = slices.DeleteFunc(problems, func(p *spec.FieldError) bool {
				return p.Syntax && slices.ContainsFunc(sub.Problems, func(q vars.Problem) bool { return q.Line == p.Pos.Line })
			})
		}
	}
	loc := &locator{sub: sub}
	for _, p := range sub.Problems {
		at := spec.Pos{File: file, Line: p.Line, Col: p.Col}
		w := loc.at(p.Offset)
		if w.comment {
			problems = append(problems, &spec.FieldError{Pos: at, Msg: "in a comment: " + commentHint(p.Msg)})
			continue
		}
		path := w.path
		if !w.found {
			path = pathAt(pos, at)
		}
		msg := p.Msg
		if i := slices.IndexFunc(sub.Refs, func(r vars.Ref) bool { return r.Offset == p.Offset }); i >= 0 && whenRe.MatchString(path) {
			msg += "; " + writeVars([]string{sub.Refs[i].Name})
		}
		problems = append(problems, &spec.FieldError{Pos: at, Path: path, Msg: msg})
		pos.MarkFailed(path)
	}
	problems = append(problems, secretIdentifiers(s, sub, loc, file, kinds)...)
	problems = append(problems, spec.Validate(s, pos, spec.ValidateOptions{BaseDir: baseDir})...)
	if placeheld {
		problems = slices.DeleteFunc(problems, func(p *spec.FieldError) bool {
			return strings.Contains(p.Msg, markerPrefix(sub.Text))
		})
	}

	doc := &Document{Spec: s, Positions: pos, Vars: set, Redactor: red, BaseDir: baseDir}
	doc.Conditions = make([]plan.Condition, len(s.Steps))
	varMap := set.Map()
	for i := range s.Steps {
		st := &s.Steps[i]
		doc.Conditions[i] = plan.Condition{Expr: st.When, Included: true}
		if !pos.Has("steps["+strconv.Itoa(i)+"].when") && st.When == "" {
			continue
		}
		wp := "steps[" + strconv.Itoa(i) + "].when"
		if pos.Failed(wp) {
			continue
		}
		prg, err := l.cel.Compile(st.When)
		if err != nil {
			problems = append(problems, conditionProblem(sub, loc, pos, wp, st.When, err))
			continue
		}
		ok, err := prg.Eval(varMap)
		if err != nil {
			problems = append(problems, &spec.FieldError{Pos: pos.At(wp), Path: wp, Msg: err.Error() + refHint(loc.refNames(wp))})
			continue
		}
		doc.Conditions[i].Included = ok
	}

	nodes := make([]plan.Node, len(s.Steps))
	for i, st := range s.Steps {
		nodes[i] = plan.Node{Name: st.Name, Needs: st.Needs}
	}
	g, cycles := plan.NewGraph(nodes)
	for _, c := range cycles {
		i, _ := g.Index(c.Cycle[0])
		np := "steps[" + strconv.Itoa(i) + "].needs"
		problems = append(problems, &spec.FieldError{Pos: pos.At(np), Path: np, Msg: c.Error()})
	}
	doc.Graph = g

	if len(problems) > 0 {
		for _, p := range problems {
			if i := spec.StepIndex(p.Path); i >= 0 && i < len(s.Steps) && !pos.Failed("steps["+strconv.Itoa(i)+"].name") {
				p.Step = s.Steps[i].Name
			}
			p.Msg, p.Path, p.Step = red.String(p.Msg), red.String(p.Path), red.String(p.Step)
		}
		return nil, &InvalidError{Problems: problems.Sort()}
	}
	return doc, nil
}

// pathAt names the field a substitution problem sits in: the last field
// that starts at or before the position (on the same line when possible).
func pathAt(pos *spec.Positions, at spec.Pos) string {
	type entry struct {
		path string
		p    spec.Pos
	}
	var best entry
	for _, e := range pos.All() {
		if e.Pos.Line > at.Line || (e.Pos.Line == at.Line && e.Pos.Col > at.Col) {
			continue
		}
		later := e.Pos.Line > best.p.Line || (e.Pos.Line == best.p.Line && e.Pos.Col > best.p.Col)
		same := e.Pos.Line == best.p.Line && e.Pos.Col == best.p.Col
		if best.path == "" || later || (same && len(e.Path) > len(best.path)) {
			best = entry{e.Path, e.Pos}
		}
	}
	return best.path
}
