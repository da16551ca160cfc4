package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"khook.io/core/manifest/kubeyaml"
)

// ValidateOptions tunes the checks that look at the local file system.
type ValidateOptions struct {
	// BaseDir is the folder local paths are relative to: the spec file's
	// folder, or the working directory for a spec read from stdin.
	BaseDir string
	// FS reads local files; nil means the operating system's.
	FS fs.StatFS
}

// Validate checks every rule of the v1 DSL that needs no cluster and no
// variables (those are checked while loading: see package load) and
// returns every problem found, positioned by pos.
func Validate(s *Spec, pos *Positions, opts ValidateOptions) ErrorList {
	v := &validator{pos: pos, opts: opts, kinds: s.kinds}
	if pos.Failed("") {
		return nil // not a YAML document: nothing to check
	}
	v.spec(s)
	return v.errs
}

type validator struct {
	pos   *Positions
	opts  ValidateOptions
	kinds *StepKinds
	errs  ErrorList
}

func (v *validator) errf(path, format string, args ...any) {
	if v.pos.Failed(path) {
		return // its value is unknown: the problem that made it so is reported
	}
	v.errs = append(v.errs, &FieldError{Pos: v.pos.At(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// present reports whether path was written in the document.
func (v *validator) present(path string) bool { return v.pos.Has(path) }

var (
	dnsLabelRe     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomainRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// IsDNSLabel reports whether s is an RFC 1123 label (at most 63 characters).
func IsDNSLabel(s string) bool { return len(s) <= 63 && dnsLabelRe.MatchString(s) }

// IsDNSSubdomain reports whether s is an RFC 1123 subdomain (at most 253).
func IsDNSSubdomain(s string) bool { return len(s) <= 253 && dnsSubdomainRe.MatchString(s) }

// StateSecretName is the record Secret's name: state.name, or
// khook-state-<metadata.name>.
func (s *Spec) StateSecretName() string {
	if s.State != nil && s.State.Name != "" {
		return s.State.Name
	}
	return "khook-state-" + s.Metadata.Name
}

// StateNamespace is the record Secret's namespace (default "default").
func (s *Spec) StateNamespace() string {
	if s.State != nil && s.State.Namespace != "" {
		return s.State.Namespace
	}
	return "default"
}

// required reports (and records) a missing required field of the struct at
// path. It checks the khook:"required" tags of val's type.
func (v *validator) required(path string, val any) {
	rv := reflect.ValueOf(val)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	info := structInfoOf(rv.Type())
	for _, f := range info.Fields {
		if !f.Required {
			continue
		}
		fp := joinPath(path, f.Name)
		fv := rv.FieldByName(f.GoName)
		if !v.present(fp) {
			v.errf(path, "%s is required", f.Name)
			continue
		}
		if fv.Kind() == reflect.String && fv.Len() == 0 {
			v.errf(fp, "must not be empty")
		}
	}
}

func (v *validator) spec(s *Spec) {
	v.required("", s)
	if v.present("apiVersion") && s.APIVersion != APIVersion {
		v.errf("apiVersion", "must be %q, not %q", APIVersion, s.APIVersion)
	}
	if v.present("kind") && s.Kind != Kind {
		v.errf("kind", "must be %q, not %q", Kind, s.Kind)
	}
	if v.present("metadata") {
		v.required("metadata", &s.Metadata)
	}
	if d := s.Defaults; d != nil {
		v.durationPositive("defaults.timeout", d.Timeout)
		v.durationNonNegative("defaults.retryDelay", d.RetryDelay)
		v.nonNegative("defaults.retries", d.Retries)
		v.enum("defaults.onError", d.OnError, OnErrorFail, OnErrorContinue)
		v.drift("defaults.drift", d.Drift)
	}
	if st := s.State; st != nil {
		if st.Namespace != "" && !IsDNSLabel(st.Namespace) {
			v.errf("state.namespace", "%s", withNote(fmt.Sprintf("%q is not a valid namespace (RFC 1123 label: lowercase letters, digits and '-', at most 63)", st.Namespace), st.Namespace))
		}
		if st.Name != "" && !IsDNSSubdomain(st.Name) {
			v.errf("state.name", "%s", withNote(fmt.Sprintf("%q is not a valid Secret name (RFC 1123 subdomain: lowercase letters, digits, '-' and '.')", st.Name), st.Name))
		}
		if st.IsEnabled() && st.Name == "" && s.Metadata.Name != "" && !IsDNSSubdomain(s.StateSecretName()) {
			v.errf("metadata.name", "%s", withNote(fmt.Sprintf("the state record would be named %q, which is not a valid Secret name: use a lowercase DNS name here or set state.name", s.StateSecretName()), s.Metadata.Name))
		}
	}
	if v.present("steps") && len(s.Steps) == 0 {
		v.errf("steps", "at least one step is required")
	}
	names := make(map[string]int, len(s.Steps))
	for i := range s.Steps {
		st := &s.Steps[i]
		p := "steps[" + strconv.Itoa(i) + "]"
		if st.Name != "" {
			if j, dup := names[st.Name]; dup {
				v.errf(p+".name", "duplicate step name %q (also steps[%d])", st.Name, j)
			} else {
				names[st.Name] = i
			}
		}
	}
	for i := range s.Steps {
		v.step(&s.Steps[i], "steps["+strconv.Itoa(i)+"]", names)
		v.triggers(s.Steps, i, names)
	}
}

func (v *validator) step(st *Step, p string, names map[string]int) {
	v.required(p, st)
	if st.Name != "" && !IsDNSLabel(st.Name) {
		v.errf(p+".name", "%s", withNote(fmt.Sprintf("%q is not a valid step name: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters", st.Name), st.Name))
	}
	seen := map[string]bool{}
	for j, n := range st.Needs {
		np := p + ".needs[" + strconv.Itoa(j) + "]"
		switch _, ok := names[n]; {
		case n == "":
			v.errf(np, "must not be empty")
		case n == st.Name:
			v.errf(np, "a step cannot need itself")
		case !ok:
			if note := nonASCIINote(n); note != "" {
				v.errf(np, "no step named %q: %s%s", n, note, didYouMean(n, names))
			} else {
				v.errf(np, "no step named %q%s", n, didYouMean(n, names))
			}
		case seen[n]:
			v.errf(np, "%q is listed twice", n)
		}
		seen[n] = true
	}
	v.durationPositive(p+".timeout", st.Timeout)
	v.durationNonNegative(p+".retryDelay", st.RetryDelay)
	v.nonNegative(p+".retries", st.Retries)
	v.enum(p+".onError", st.OnError, OnErrorFail, OnErrorContinue)

	var actions []string
	for _, k := range v.kinds.nameList() {
		if v.present(p + "." + k) {
			actions = append(actions, k)
		}
	}
	switch len(actions) {
	case 0:
		if !v.misspelledAction(p) {
			v.errf(p, "a step needs exactly one action key: %s", orList(v.kinds.nameList()))
		}
		return
	case 1:
	default:
		v.errf(p+"."+actions[1], "a step has exactly one action key, but this one has %s", strings.Join(actions, " and "))
		return
	}
	if st.Type() != actions[0] || st.Action() == nil {
		return // not decoded with these kinds
	}
	c := &Check{Step: st, Path: p + "." + actions[0], StepPath: p, v: v}
	v.required(c.Path, st.Action())
	if b, ok := st.Action().(Checker); ok {
		b.Check(c)
	}
}

// misspelledAction reports whether the step at p has an unknown field that
// is a misspelled action key: its problem already says which one was meant.
func (v *validator) misspelledAction(p string) bool {
	for path := range v.pos.failed {
		key, ok := strings.CutPrefix(path, p+".")
		if ok && !strings.ContainsAny(key, ".[") && !v.present(path) && closest(key, v.kinds.nameList()) != "" {
			return true
		}
	}
	return false
}

// didYouMean suggests the step name (names: each step's index) nearest
// to s; of names equally near, the first in the spec, so that the
// message is the same on every run.
func didYouMean(s string, names map[string]int) string {
	cands := make([]string, 0, len(names))
	for n := range names {
		cands = append(cands, n)
	}
	slices.SortFunc(cands, func(a, b string) int { return names[a] - names[b] })
	if c := closest(s, cands); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

func (v *validator) durationPositive(path string, d *Duration) {
	if d != nil && d.Duration <= 0 {
		v.errf(path, "must be greater than zero, not %q", d.Raw)
	}
}

func (v *validator) durationNonNegative(path string, d *Duration) {
	if d != nil && d.Duration < 0 {
		v.errf(path, "must not be negative, not %q", d.Raw)
	}
}

func (v *validator) nonNegative(path string, n *int) {
	if n != nil && *n < 0 {
		v.errf(path, "must not be negative, not %d", *n)
	}
}

func (v *validator) enum(path, val string, allowed ...string) {
	if val == "" {
		if v.present(path) {
			v.errf(path, "must be one of %s", quoteList(allowed))
		}
		return
	}
	for _, a := range allowed {
		if val == a {
			return
		}
	}
	v.errf(path, "%s", withNote(fmt.Sprintf("must be one of %s, not %q", quoteList(allowed), val), val))
}

func quoteList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = strconv.Quote(s)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

func (v *validator) skipIf(path, val, allowed, typ string) {
	if val != "" && val != allowed {
		v.errf(path, "%s steps accept only skipIf: %s, not %q", typ, allowed, val)
	} else if val == "" && v.present(path) {
		v.errf(path, "%s steps accept only skipIf: %s", typ, allowed)
	}
}

func (v *validator) namespace(path, ns string) {
	if ns != "" && !IsDNSLabel(ns) {
		v.errf(path, "%s", withNote(fmt.Sprintf("%q is not a valid namespace (RFC 1123 label: lowercase letters, digits and '-', at most 63)", ns), ns))
	}
}

// httpURL checks an http(s) URL and reports its userinfo problems.
func (v *validator) httpURL(path, raw string) *url.URL {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.errf(path, "%q is not an http:// or https:// URL", stripUserinfo(raw))
		return nil
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); !ok || pw == "" || u.User.Username() == "" {
			v.errf(path, "URL credentials must be a full user:password@ pair (URL-encode special characters with ${VAR|urlquery})")
		}
	}
	return u
}

// stripUserinfo hides credentials in a URL quoted in an error message.
func stripUserinfo(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	host, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		host = "***@" + host[at+1:]
	}
	if path == "" && !strings.Contains(rest, "/") {
		return scheme + "://" + host
	}
	return scheme + "://" + host + "/" + path
}

func (v *validator) manifests(p string, list []ManifestSource) {
	if len(list) == 0 {
		v.errf(p, "at least one manifest source is required")
	}
	for i, m := range list {
		mp := p + "[" + strconv.Itoa(i) + "]"
		var set []string
		for _, f := range []struct{ name, val string }{{"inline", m.Inline}, {"file", m.File}, {"url", m.URL}, {"kustomize", m.Kustomize}} {
			if f.val != "" || v.present(mp+"."+f.name) {
				set = append(set, f.name)
			}
		}
		if len(set) != 1 {
			if len(set) == 0 {
				v.errf(mp, "a manifests entry needs exactly one of inline, file, url or kustomize")
			} else {
				v.errf(mp, "a manifests entry has exactly one source, but this one has %s", strings.Join(set, " and "))
			}
			continue
		}
		switch set[0] {
		case "inline":
			if strings.TrimSpace(m.Inline) == "" {
				v.errf(mp+".inline", "must not be empty")
			} else {
				v.manifestDocs(mp+".inline", []byte(m.Inline), "")
			}
		case "file":
			if data, ok := v.localFile(mp+".file", m.File, "manifest file"); ok {
				v.manifestDocs(mp+".file", kubeyaml.FileText(data), m.File)
			}
		case "url":
			v.httpURL(mp+".url", m.URL)
		case "kustomize":
			if !IsLocalPath(m.Kustomize) {
				v.errf(mp+".kustomize", "%q: kustomize sources must be local paths starting with ./, ../ or / (remote bases would need git)", m.Kustomize)
			} else {
				v.kustomizeDir(mp+".kustomize", m.Kustomize)
			}
		}
	}
}

// manifestDocs checks that data is a stream of Kubernetes objects, read
// exactly as apply reads it (package kubeyaml, kubectl's splitting and
// decoding): every document parses, holds apiVersion, kind and
// metadata.name, and nothing is left that kubectl would silently drop.
// name names a file source; for an inline manifest written as a literal
// block (inline: |) each problem is placed at its own line of the spec.
func (v *validator) manifestDocs(path string, data []byte, name string) {
	_, err := kubeyaml.Decode(data)
	if err == nil {
		if unnamed := kubeyaml.Unnamed(data); len(unnamed) > 0 {
			err = unnamed
		}
	}
	if err == nil || v.pos.Failed(path) {
		return
	}
	where := "inline manifest"
	if name != "" {
		where = name
	}
	var list kubeyaml.Errors
	if !errors.As(err, &list) {
		v.errf(path, "%s: %v", where, err)
		return
	}
	for _, de := range list {
		if pos, ok := v.pos.InBlock(path, de.ProblemLine()); ok && name == "" {
			v.errs = append(v.errs, &FieldError{Pos: pos, Path: path, Msg: where + ", " + de.Error()})
			continue
		}
		v.errf(path, "%s, %s", where, de)
	}
}

// Resolve returns a local path relative to base (absolute paths stay).
func Resolve(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

func (v *validator) stat(p string) (fs.FileInfo, error) {
	full := Resolve(v.opts.BaseDir, p)
	if v.opts.FS != nil {
		return v.opts.FS.Stat(full)
	}
	return os.Stat(full)
}

func (v *validator) readFile(p string) ([]byte, error) {
	full := Resolve(v.opts.BaseDir, p)
	if v.opts.FS != nil {
		return fs.ReadFile(v.opts.FS, full)
	}
	return os.ReadFile(full)
}

// localFile checks a local file exists and returns its content.
func (v *validator) localFile(path, p, what string) ([]byte, bool) {
	fi, err := v.stat(p)
	if err != nil {
		v.errf(path, "%s %q: %s", what, p, fsReason(err))
		return nil, false
	}
	if fi.IsDir() {
		v.errf(path, "%s %q is a directory, not a file", what, p)
		return nil, false
	}
	data, err := v.readFile(p)
	if err != nil {
		v.errf(path, "%s %q: %s", what, p, fsReason(err))
		return nil, false
	}
	return data, true
}

func (v *validator) kustomizeDir(path, p string) {
	fi, err := v.stat(p)
	if err != nil {
		v.errf(path, "kustomization %q: %s", p, fsReason(err))
		return
	}
	if !fi.IsDir() {
		v.errf(path, "kustomization %q is a file: point at the directory holding kustomization.yaml", p)
		return
	}
	for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if _, err := v.stat(filepath.Join(p, name)); err == nil {
			return
		}
	}
	v.errf(path, "kustomization %q has no kustomization.yaml", p)
}

func fsReason(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// selection checks the type-or-kind/name plus namespace and selector
// fields shared by delete (resource form) and wait.
func (v *validator) selection(p, field, res, ns string, all bool, sel, fsel string) {
	if res == "" {
		v.errf(p+"."+field, "must not be empty")
		return
	}
	ref, err := ParseResource(res)
	if err != nil {
		v.errf(p+"."+field, "%v", err)
		return
	}
	if ns != "" && all {
		v.errf(p+".allNamespaces", "namespace and allNamespaces are mutually exclusive")
	}
	if ref.Name != "" {
		if sel != "" || fsel != "" {
			v.errf(p+"."+field, "%q names one object, so selector and fieldSelector cannot apply: use a bare type (%s) with a selector, or drop the selector", res, ref.Type)
		}
		if all {
			v.errf(p+".allNamespaces", "%q names one object, which cannot be looked up across all namespaces: set namespace", res)
		}
	}
	if sel != "" {
		if err := checkLabelSelector(sel); err != nil {
			v.errf(p+".selector", "%v", err)
		}
	}
	if fsel != "" {
		if err := checkFieldSelector(fsel); err != nil {
			v.errf(p+".fieldSelector", "%v", err)
		}
	}
}
