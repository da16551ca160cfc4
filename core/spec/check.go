package spec

import (
	"io/fs"
	"net/url"

	yaml "go.yaml.in/yaml/v3"

	"khook.io/core/internal/yamlerr"
)

// Check is how a block reports its problems (Checker): each at a field
// path, positioned where the spec writes it, all of them at once. It also
// holds the rules several kinds share. A problem at a path whose value is
// unknown (it could not be decoded or substituted) is dropped: the problem
// that made it so is reported.
type Check struct {
	// Step is the step whose block is checked.
	Step *Step
	// Path is the block's field path (steps[2].helm); StepPath the
	// step's (steps[2]). Field paths below are whole paths: Path+".chart".
	Path, StepPath string

	v *validator
}

// Errorf reports a problem of the field at path.
func (c *Check) Errorf(path, format string, args ...any) { c.v.errf(path, format, args...) }

// Present reports whether path was written in the spec.
func (c *Check) Present(path string) bool { return c.v.present(path) }

// Required reports the missing required fields (khook:"required") of the
// struct val (or pointer to one) at path: the block's own are checked
// before Check is called, a nested struct's are not.
func (c *Check) Required(path string, val any) { c.v.required(path, val) }

// Enum reports a value that is none of allowed (a present, empty value
// too).
func (c *Check) Enum(path, val string, allowed ...string) { c.v.enum(path, val, allowed...) }

// Namespace reports a namespace that is no RFC 1123 label.
func (c *Check) Namespace(path, ns string) { c.v.namespace(path, ns) }

// SkipIf reports a skipIf that is not the one predicate the kind accepts.
func (c *Check) SkipIf(path, val, allowed string) { c.v.skipIf(path, val, allowed, c.Step.Type()) }

// HTTPURL reports a URL that is not http(s) or whose credentials are not
// a full user:password pair; it returns the parsed URL, or nil.
func (c *Check) HTTPURL(path, raw string) *url.URL { return c.v.httpURL(path, raw) }

// Manifests checks a manifests list: one source per entry, inline and
// file manifests read as apply reads them (each problem at its own line
// for an inline block), url and kustomize sources.
func (c *Check) Manifests(path string, list []ManifestSource) { c.v.manifests(path, list) }

// Selection checks a resource reference (a type, or kind/name) in the
// field named field of the block at path, with its namespace and
// selectors: what delete's resource form and wait share.
func (c *Check) Selection(path, field, res, ns string, all bool, sel, fsel string) {
	c.v.selection(path, field, res, ns, all, sel, fsel)
}

// LocalFile reports a local file (relative to the spec's folder) that is
// missing, a directory or unreadable, what naming it ("manifest file"),
// and returns its content.
func (c *Check) LocalFile(path, p, what string) ([]byte, bool) { return c.v.localFile(path, p, what) }

// LocalMappingFile reports a local YAML file that is not one (its line and
// column), or whose document is not a mapping, what naming it ("values
// file").
func (c *Check) LocalMappingFile(path, p, what string) {
	data, ok := c.v.localFile(path, p, what)
	if !ok {
		return
	}
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		e := yamlerr.Locate(data, err, nil)
		c.v.errf(path, "%s %q, line %d, column %d: invalid YAML: %s", what, p, e.Line, e.Col, e.Msg)
		return
	}
	if len(n.Content) > 0 && n.Content[0].Kind != yaml.MappingNode && !isNull(n.Content[0]) {
		c.v.errf(path, "%s %q must hold a mapping, not %s", what, p, kindName(n.Content[0]))
	}
}

// Stat stats a local path relative to the spec's folder, on the file
// system validation reads.
func (c *Check) Stat(p string) (fs.FileInfo, error) { return c.v.stat(p) }

// FSReason words a file system error for a problem: "no such file or
// directory", "permission denied".
func FSReason(err error) string { return fsReason(err) }

// WithNote appends to msg, in parentheses, what in the value s is not
// plain ASCII (an invisible character, a Cyrillic lookalike), if anything.
func WithNote(msg, s string) string { return withNote(msg, s) }
