package vars

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"khook.io/core/internal/yamlerr"
	"khook.io/core/redact"
)

// Default environment variable prefixes.
const (
	DefaultVarPrefix    = "KHOOK_VAR_"
	DefaultSecretPrefix = "KHOOK_SECRET_"
)

// Options are the variable sources Resolve merges.
type Options struct {
	Set          []string                     // raw "NAME=value" from --set, in order (later wins over earlier)
	VarFiles     []string                     // --var-file paths, in order (later file wins)
	Environ      []string                     // os.Environ() form "K=V"
	VarPrefix    string                       // default "KHOOK_VAR_" when ""
	SecretPrefix string                       // default "KHOOK_SECRET_" when ""
	ReadFile     func(string) ([]byte, error) // nil = os.ReadFile
	// Fixed are variables khook itself sets (KHOOK_CONTEXT, the context's
	// name, in a fleet run): they win over every source, and any source
	// that also sets one is an error.
	Fixed []Fixed
}

// Fixed is a variable khook sets itself.
type Fixed struct {
	Name, Value string
	// About says what the value is, for the error of a source that sets
	// it too ("the name of the cluster's kubeconfig context in a fleet
	// run").
	About string
}

// Source says where a variable's value came from.
type Source int

// Sources, highest precedence first. The zero Source is not a valid source.
const (
	SourceSet       Source = iota + 1 // --set NAME=value
	SourceVarFile                     // --var-file
	SourceSecretEnv                   // <SecretPrefix>NAME environment variable
	SourceVarEnv                      // <VarPrefix>NAME environment variable
	SourceFixed                       // set by khook itself (Options.Fixed)
)

func (s Source) String() string {
	switch s {
	case SourceSet:
		return "--set"
	case SourceVarFile:
		return "--var-file"
	case SourceSecretEnv:
		return "secret environment variable"
	case SourceVarEnv:
		return "environment variable"
	case SourceFixed:
		return "khook"
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

// Value is a resolved variable.
type Value struct {
	Value  string
	Source Source
	Secret bool // the winning value came from a <SecretPrefix> environment variable
}

// Set is the merged set of variables. A nil *Set is valid and empty. A Set
// is immutable after Resolve and safe for concurrent use.
type Set struct {
	vals         map[string]Value
	varPrefix    string
	secretPrefix string
}

// Lookup returns the variable name's resolved value.
func (s *Set) Lookup(name string) (Value, bool) {
	if s == nil {
		return Value{}, false
	}
	v, ok := s.vals[name]
	return v, ok
}

// Map returns the merged name -> value map (for CEL's vars). It is a fresh
// copy on every call; the caller may keep and modify it.
func (s *Set) Map() map[string]string {
	m := make(map[string]string, s.Len())
	if s != nil {
		for k, v := range s.vals {
			m[k] = v.Value
		}
	}
	return m
}

// Names returns the variable names, sorted.
func (s *Set) Names() []string {
	if s == nil {
		return []string{}
	}
	return slices.Sorted(maps.Keys(s.vals))
}

// Len returns the number of variables.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.vals)
}

// VarPrefix returns the environment prefix of plain variables.
func (s *Set) VarPrefix() string {
	if s == nil || s.varPrefix == "" {
		return DefaultVarPrefix
	}
	return s.varPrefix
}

// SecretPrefix returns the environment prefix of secret variables.
func (s *Set) SecretPrefix() string {
	if s == nil || s.secretPrefix == "" {
		return DefaultSecretPrefix
	}
	return s.secretPrefix
}

// ValidName reports whether name matches [A-Za-z_][A-Za-z0-9_]*.
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i], i == 0) {
			return false
		}
	}
	return true
}

func nameByte(c byte, first bool) bool {
	return c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || !first && '0' <= c && c <= '9'
}

const nameSyntax = "[A-Za-z_][A-Za-z0-9_]*"

// Resolve merges the variable sources of opts (see the package comment for
// the precedence) and registers the value of every <SecretPrefix>
// environment variable with red (which may be nil).
//
// The error joins every problem found: bad --set syntax, invalid names,
// unreadable var files, var files that are not a flat map of scalars
// (reported as file:line:col). Even with an error, the returned Set holds
// every variable that could be resolved, so the caller can go on and report
// problems in the spec too. Error messages never contain values.
//
// When an environment variable carries both prefixes (one prefix extends the
// other), the longer prefix decides whether it is a secret or a plain
// variable; with equal prefixes it is a secret. Either way, a value whose
// name starts with the secret prefix is registered with red.
func Resolve(opts Options, red *redact.Redactor) (*Set, error) {
	set := &Set{
		vals:         make(map[string]Value),
		varPrefix:    opts.VarPrefix,
		secretPrefix: opts.SecretPrefix,
	}
	vp, sp := set.VarPrefix(), set.SecretPrefix()
	readFile := opts.ReadFile
	if readFile == nil {
		readFile = os.ReadFile
	}
	var envErrs, fileErrs, setErrs []error
	fixed := make(map[string]Fixed, len(opts.Fixed))
	for _, f := range opts.Fixed {
		fixed[f.Name] = f
	}

	// Lowest precedence first; each layer overwrites the ones below it.
	varEnv := make(map[string]string)
	secretEnv := make(map[string]string)
	for _, kv := range opts.Environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		isSecret := strings.HasPrefix(k, sp)
		isVar := strings.HasPrefix(k, vp)
		if isSecret {
			plain := ""
			if !isVar {
				plain = vp + k[len(sp):]
			}
			if err := checkSecretLength(k, v, plain); err != nil {
				envErrs = append(envErrs, err)
				continue
			}
			red.Add(v)
		}
		var name string
		var dst map[string]string
		switch {
		case isSecret && (!isVar || len(sp) >= len(vp)):
			name, dst = k[len(sp):], secretEnv
		case isVar:
			name, dst = k[len(vp):], varEnv
		default:
			continue
		}
		if !ValidName(name) {
			envErrs = append(envErrs, fmt.Errorf("environment variable %s: invalid variable name %q (want %s)", k, name, nameSyntax))
			continue
		}
		if f, ok := fixed[name]; ok {
			envErrs = append(envErrs, fmt.Errorf("environment variable %s: %s", k, f.taken()))
			continue
		}
		dst[name] = v
	}
	for name, v := range varEnv {
		set.vals[name] = Value{Value: v, Source: SourceVarEnv}
	}
	for name, v := range secretEnv {
		set.vals[name] = Value{Value: v, Source: SourceSecretEnv, Secret: true}
	}

	for _, path := range opts.VarFiles {
		data, err := readFile(path)
		if err != nil {
			fileErrs = append(fileErrs, fmt.Errorf("--var-file %s: %w", path, err))
			continue
		}
		fileVals, ferrs := parseVarFile(path, data)
		fileErrs = append(fileErrs, ferrs...)
		for _, kv := range fileVals {
			if f, ok := fixed[kv.name]; ok {
				fileErrs = append(fileErrs, &FileError{File: path, Line: kv.line, Col: kv.col, Msg: f.taken()})
				continue
			}
			set.vals[kv.name] = Value{Value: kv.value, Source: SourceVarFile}
		}
	}

	for _, arg := range opts.Set {
		name, v, ok := strings.Cut(arg, "=")
		if !ok {
			setErrs = append(setErrs, fmt.Errorf("--set %s: want NAME=value", arg))
			continue
		}
		if !ValidName(name) {
			setErrs = append(setErrs, fmt.Errorf("--set %s=...: invalid variable name (want %s)", name, nameSyntax))
			continue
		}
		if f, ok := fixed[name]; ok {
			setErrs = append(setErrs, fmt.Errorf("--set %s=...: %s", name, f.taken()))
			continue
		}
		set.vals[name] = Value{Value: v, Source: SourceSet}
	}
	for _, f := range opts.Fixed {
		set.vals[f.Name] = Value{Value: f.Value, Source: SourceFixed}
	}
	// Report in command-line order: --set, --var-file, then the environment.
	return set, errors.Join(slices.Concat(setErrs, fileErrs, envErrs)...)
}

// MinSecretLen is the length, in characters, a secret value must have at
// least (not counting white space around it): every occurrence of a
// secret's text is masked in all khook prints, so a shorter one would
// mask ordinary text everywhere ("Pl***n").
const MinSecretLen = 3

// ErrShortSecret is matched (errors.Is) by the error Resolve returns for a
// secret shorter than MinSecretLen. Such a value is not registered with the
// redactor: the caller must not go on to print anything the value could be
// part of.
var ErrShortSecret = errors.New("secret too short to be masked")

type shortSecretError struct{ env, plain string }

func (e *shortSecretError) Error() string {
	msg := fmt.Sprintf("environment variable %s: a secret must be at least %d characters long (white space around it not counted): "+
		"khook masks every occurrence of a secret's text in everything it prints, so a shorter one would mask ordinary text everywhere", e.env, MinSecretLen)
	if e.plain != "" {
		msg += "; a value that is not secret can be passed as " + e.plain
	}
	return msg
}

func (e *shortSecretError) Is(target error) bool { return target == ErrShortSecret }

// checkSecretLength refuses a non-empty secret value that is too short to
// be masked; env names it, plain is the variable's non-secret spelling.
// The error never contains the value, nor its length.
func checkSecretLength(env, value, plain string) error {
	if value == "" || utf8.RuneCountInString(strings.TrimSpace(value)) >= MinSecretLen {
		return nil
	}
	return &shortSecretError{env: env, plain: plain}
}

// taken is the error of a source that sets a variable khook sets.
func (f Fixed) taken() string {
	return fmt.Sprintf("%s is %s, set by khook; it cannot be set", f.Name, f.About)
}

type nameValue struct {
	name, value string
	line, col   int // of the name
}

// parseVarFile reads a flat NAME: value map. A scalar's text is taken as
// written (5, true, 0x1F, ~ stay as written; an empty value is ""), which is
// what textual substitution wants: YAML interprets it in the spec, in
// context.
func parseVarFile(path string, data []byte) ([]nameValue, []error) {
	var errs []error
	errAt := func(n *yaml.Node, format string, args ...any) {
		errs = append(errs, &FileError{File: path, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(format, args...)})
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // empty file: no variables
		}
		return nil, []error{yamlError(path, data, err)}
	}
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, yamlError(path, data, err))
			break
		}
		if len(extra.Content) > 0 && !(extra.Content[0].Kind == yaml.ScalarNode && extra.Content[0].Tag == "!!null") {
			errAt(&extra, "want a single YAML document, found another")
			break
		}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, errs
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, errs // only comments, or an explicit null
	}
	if root.Kind != yaml.MappingNode {
		errAt(root, "want a flat map of NAME: value, got %s", kindName(root))
		return nil, errs
	}
	var out []nameValue
	seen := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			errAt(k, "want a variable name as key, got %s", kindName(k))
			continue
		}
		if !ValidName(k.Value) {
			errAt(k, "invalid variable name %q (want %s)", k.Value, nameSyntax)
			continue
		}
		if prev, dup := seen[k.Value]; dup {
			errAt(k, "duplicate variable %s (first at line %d)", k.Value, prev.Line)
			continue
		}
		seen[k.Value] = k
		val := v
		if val.Kind == yaml.AliasNode && val.Alias != nil {
			val = val.Alias
		}
		if val.Kind != yaml.ScalarNode {
			errAt(v, "%s: want a scalar value (string, number or bool), got %s", k.Value, kindName(val))
			continue
		}
		out = append(out, nameValue{k.Value, val.Value, k.Line, k.Column})
	}
	return out, errs
}

// FileError is a problem of a var file, at a 1-based line and column (the
// column counts characters).
type FileError struct {
	File      string
	Line, Col int
	Msg       string
}

func (e *FileError) Error() string {
	return e.File + ":" + strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Col) + ": " + e.Msg
}

// yamlError locates go.yaml.in/yaml/v3's error about data, the var file
// at path.
func yamlError(path string, data []byte, err error) error {
	e := yamlerr.Locate(data, err, nil)
	return &FileError{File: path, Line: e.Line, Col: e.Col, Msg: "invalid YAML: " + e.Msg}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.ScalarNode:
		return "a scalar"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	return "an unknown node"
}
