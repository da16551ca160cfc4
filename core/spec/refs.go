package spec

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/jsonpath"
)

// ChartSource is the shape of a helm step's chart: field.
type ChartSource int

const (
	ChartFromRepo  ChartSource = iota + 1 // bare name, resolved in repo:
	ChartFromOCI                          // oci:// reference
	ChartFromLocal                        // local directory or packaged .tgz
)

func (c ChartSource) String() string {
	switch c {
	case ChartFromRepo:
		return "repo"
	case ChartFromOCI:
		return "oci"
	case ChartFromLocal:
		return "local"
	}
	return "unknown"
}

// ChartRef is a parsed chart: field.
type ChartRef struct {
	Source ChartSource
	// Name is the chart name (repo), the OCI reference without scheme,
	// userinfo, tag and digest (oci: host/path/name), or the local path.
	Name string
	// InlineVersion is the version written in chart: (name:1.2.3 or an
	// OCI :tag); Digest is an OCI @sha256:... digest.
	InlineVersion string
	Digest        string
	// Username and Password come from OCI userinfo (oci://u:p@host/...);
	// HasUserinfo is set even when the pair is incomplete.
	Username, Password string
	HasUserinfo        bool
	// Packaged is set for a local path ending in .tgz or .tar.gz.
	Packaged bool
}

// IsLocalPath reports whether s is written as a local path (./, ../ or /).
func IsLocalPath(s string) bool {
	return strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.HasPrefix(s, "/") ||
		s == "." || s == ".."
}

var chartNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ParseChart parses the chart: field by its shape.
func ParseChart(chart string) (ChartRef, error) {
	switch {
	case chart == "":
		return ChartRef{}, errors.New("chart is empty")
	case strings.HasPrefix(chart, "oci://"):
		return parseOCIChart(chart)
	case IsLocalPath(chart):
		lower := strings.ToLower(chart)
		return ChartRef{Source: ChartFromLocal, Name: chart,
			Packaged: strings.HasSuffix(lower, ".tgz") || strings.HasSuffix(lower, ".tar.gz")}, nil
	case strings.Contains(chart, "://"):
		return ChartRef{}, fmt.Errorf("chart %q: only oci:// references are charts by URL; for an HTTP repository write the chart name in chart: and the URL in repo:", chart)
	case strings.Contains(chart, "/"):
		return ChartRef{}, fmt.Errorf("chart %q: a local chart path must start with ./, ../ or /; a repository chart is a bare name (without repo/ prefix) with repo: set to the repository URL", chart)
	}
	name, version, hasVersion := strings.Cut(chart, ":")
	if hasVersion && (version == "" || strings.Contains(version, ":")) {
		return ChartRef{}, fmt.Errorf("chart %q: write name:version with exactly one colon (chart names cannot contain \":\")", chart)
	}
	if !chartNameRe.MatchString(name) {
		return ChartRef{}, fmt.Errorf("chart %q: %q is not a valid chart name", chart, name)
	}
	return ChartRef{Source: ChartFromRepo, Name: name, InlineVersion: version}, nil
}

func parseOCIChart(chart string) (ChartRef, error) {
	rest := strings.TrimPrefix(chart, "oci://")
	ref := ChartRef{Source: ChartFromOCI}
	host, path, ok := strings.Cut(rest, "/")
	if !ok || host == "" || path == "" {
		return ChartRef{}, fmt.Errorf("chart %s: an OCI reference is oci://<registry>/<path>/<chart>", redactedChart(chart))
	}
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		ref.HasUserinfo = true
		u, err := url.Parse("oci://" + host)
		if err != nil || u.User == nil {
			return ChartRef{}, fmt.Errorf("chart %s: invalid userinfo (URL-encode special characters with ${VAR|urlquery})", redactedChart(chart))
		}
		ref.Username = u.User.Username()
		ref.Password, _ = u.User.Password()
		host = host[at+1:]
	}
	if at := strings.IndexByte(path, '@'); at >= 0 {
		ref.Digest = path[at+1:]
		path = path[:at]
		if !strings.Contains(ref.Digest, ":") {
			return ChartRef{}, fmt.Errorf("chart %s: digest %q must be algorithm:hex (sha256:...)", redactedChart(chart), ref.Digest)
		}
	}
	last := path[strings.LastIndexByte(path, '/')+1:]
	if i := strings.IndexByte(last, ':'); i >= 0 {
		ref.InlineVersion = last[i+1:]
		path = path[:len(path)-len(last)+i]
		if ref.InlineVersion == "" {
			return ChartRef{}, fmt.Errorf("chart %s: empty tag after \":\"", redactedChart(chart))
		}
	}
	ref.Name = host + "/" + path
	return ref, nil
}

// redactedChart strips userinfo from an oci:// reference for messages.
func redactedChart(chart string) string {
	rest := strings.TrimPrefix(chart, "oci://")
	host, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		return "oci://***@" + host[at+1:] + "/" + path
	}
	return chart
}

// ResourceRef is a parsed resource:, on:, target:, restart: or status:
// field: a type (pods, deployments.apps) or kind/name.
type ResourceRef struct {
	Type string // as written: pods, deployment, Deployment, deployments.apps
	Name string // empty for a bare type
}

func (r ResourceRef) String() string {
	if r.Name == "" {
		return r.Type
	}
	return r.Type + "/" + r.Name
}

var (
	typeRe    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	objNameRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?$`)
)

// ParseResource parses "type" or "type/name".
func ParseResource(s string) (ResourceRef, error) {
	typ, name, hasName := strings.Cut(s, "/")
	if !typeRe.MatchString(typ) {
		return ResourceRef{}, fmt.Errorf("%q: want a resource type (pods, deployments.apps) or kind/name (deployment/coredns)", s)
	}
	if hasName && !objNameRe.MatchString(name) {
		return ResourceRef{}, fmt.Errorf("%q: %q is not a valid object name", s, name)
	}
	return ResourceRef{Type: typ, Name: name}, nil
}

// rolloutKinds are the kinds kubectl rollout supports (group apps), each
// with its plural resource and its short name.
var rolloutKinds = []struct{ kind, plural, short string }{
	{"Deployment", "deployments", "deploy"},
	{"DaemonSet", "daemonsets", "ds"},
	{"StatefulSet", "statefulsets", "sts"},
}

// RolloutKind returns the kind a rollout target's type names, when it is
// one kubectl rollout supports, without asking a cluster: the types that
// kubectl's resource builder resolves to those kinds are a closed set. A
// type is the plural or singular resource or the kind, in any case (the
// RESTMapper lowercases them), or the short name as served (deploy, ds,
// sts), optionally followed by .apps or .<version>.apps:
// deployments.v1.apps, Deployment.apps, deploy, ds.apps. Whether the
// cluster serves that version is decided when the step runs.
func RolloutKind(typ string) (string, bool) {
	name, group, _ := strings.Cut(typ, ".")
	if group != "" && group != "apps" {
		version, g, ok := strings.Cut(group, ".")
		if !ok || version == "" || g != "apps" {
			return "", false
		}
	}
	for _, k := range rolloutKinds {
		if strings.EqualFold(name, k.plural) || strings.EqualFold(name, k.kind) || name == k.short {
			return k.kind, true
		}
	}
	return "", false
}

// ParseRolloutTarget parses a rollout target: a Deployment, DaemonSet or
// StatefulSet as kind/name in any of kubectl's spellings (see
// RolloutKind). It returns the kind and the parsed reference, whose Type
// is resolved against the cluster when the step runs.
func ParseRolloutTarget(s string) (kind string, ref ResourceRef, err error) {
	ref, err = ParseResource(s)
	if err != nil {
		return "", ResourceRef{}, err
	}
	if ref.Name == "" {
		return "", ResourceRef{}, fmt.Errorf("%q: want kind/name, for example deployment/coredns", s)
	}
	kind, ok := RolloutKind(ref.Type)
	if !ok {
		return "", ResourceRef{}, fmt.Errorf("%q: rollout supports deployment, daemonset and statefulset, not %q", s, ref.Type)
	}
	return kind, ref, nil
}

// Wait condition kinds.
const (
	ForCondition = "condition"
	ForJSONPath  = "jsonpath"
	ForDelete    = "delete"
)

// WaitFor is a parsed wait.for / apply.waitFor expression.
type WaitFor struct {
	Kind string // condition, jsonpath or delete
	// Condition: Name and Value (default "True").
	// JSONPath: Path is the braced expression ({.status.phase}); Value is
	// the wanted value, empty when any non-empty result will do.
	Name  string
	Path  string
	Value string
}

func (w WaitFor) String() string {
	switch w.Kind {
	case ForCondition:
		return "condition=" + w.Name + "=" + w.Value
	case ForJSONPath:
		if w.Value == "" {
			return "jsonpath=" + w.Path
		}
		return "jsonpath=" + w.Path + "=" + w.Value
	}
	return w.Kind
}

// ParseWaitFor parses kubectl wait's --for grammar: condition=Name[=value],
// jsonpath=expr[=value] (relaxed: {.a.b}, .a.b and a.b are equal; a
// filter, which contains "=", needs the braced form), or delete.
func ParseWaitFor(s string) (WaitFor, error) {
	switch {
	case strings.EqualFold(s, "delete"):
		return WaitFor{Kind: ForDelete}, nil
	case strings.HasPrefix(s, "condition="):
		rest := strings.TrimPrefix(s, "condition=")
		name, value, hasValue := strings.Cut(rest, "=")
		if name == "" {
			return WaitFor{}, fmt.Errorf("%q: want condition=<Name> or condition=<Name>=<value>", s)
		}
		if !hasValue {
			value = "True"
		} else if value == "" {
			return WaitFor{}, fmt.Errorf("%q: empty value after %q", s, "condition="+name+"=")
		}
		return WaitFor{Kind: ForCondition, Name: name, Value: value}, nil
	case strings.HasPrefix(s, "jsonpath="):
		expr, value, err := splitJSONPath(strings.TrimPrefix(s, "jsonpath="))
		if err != nil {
			return WaitFor{}, fmt.Errorf("%q: %w", s, err)
		}
		braced, err := relaxedJSONPath(expr)
		if err != nil {
			return WaitFor{}, fmt.Errorf("%q: %w", s, err)
		}
		if err := jsonpath.New("for").AllowMissingKeys(true).Parse(braced); err != nil {
			return WaitFor{}, fmt.Errorf("%q: invalid jsonpath: %w", s, err)
		}
		return WaitFor{Kind: ForJSONPath, Path: braced, Value: value}, nil
	}
	return WaitFor{}, fmt.Errorf("%q: want condition=<Name>[=<value>], jsonpath=<expr>[=<value>] or delete", s)
}

// splitJSONPath separates expr from =value. A braced expression ends at its
// matching brace (quotes respected), so filters may contain "=" and "==";
// an unbraced one splits on a single "=" like kubectl ("==" stays).
func splitJSONPath(in string) (expr, value string, err error) {
	if in == "" {
		return "", "", errors.New("empty jsonpath expression")
	}
	if in[0] == '{' {
		end, err := matchingBrace(in)
		if err != nil {
			return "", "", err
		}
		expr, rest := in[:end+1], in[end+1:]
		if rest == "" {
			return expr, "", nil
		}
		if rest[0] != '=' {
			return "", "", fmt.Errorf("unexpected %q after the jsonpath expression; want {expr} or {expr}=value", rest)
		}
		if strings.Contains(rest[1:], "=") {
			return "", "", fmt.Errorf("unexpected \"=\" in the wanted value %q", rest[1:])
		}
		v, err := trimValue(rest[1:])
		return expr, v, err
	}
	var parts []string
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		if in[i] == '=' {
			if i+1 < len(in) && in[i+1] == '=' {
				b.WriteString("==")
				i++
				continue
			}
			parts = append(parts, b.String())
			b.Reset()
			continue
		}
		b.WriteByte(in[i])
	}
	parts = append(parts, b.String())
	switch len(parts) {
	case 1:
		return parts[0], "", nil
	case 2:
		v, err := trimValue(parts[1])
		return parts[0], v, err
	}
	return "", "", errors.New("too many \"=\": an expression with a filter needs the braced form, {.a[?(@.b==\"c\")].d}=value")
}

// trimValue strips quotes around a wanted value, like kubectl.
func trimValue(v string) (string, error) {
	t := strings.Trim(v, `'"`)
	if t == "" {
		return "", errors.New("empty value after \"=\"")
	}
	return t, nil
}

func matchingBrace(s string) (int, error) {
	depth := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	return 0, errors.New("unbalanced braces in the jsonpath expression")
}

var relaxedRe = regexp.MustCompile(`^\{\.?([^{}]+)\}$|^\.?([^{}]+)$`)

// relaxedJSONPath turns {.a.b}, .a.b or a.b into {.a.b}, like kubectl.
func relaxedJSONPath(expr string) (string, error) {
	m := relaxedRe.FindStringSubmatch(expr)
	if m == nil {
		return "", errors.New("want a path like {.status.phase}, .status.phase or status.phase")
	}
	field := m[1]
	if field == "" {
		field = m[2]
	}
	return "{." + field + "}", nil
}

func checkLabelSelector(s string) error {
	if _, err := labels.Parse(s); err != nil {
		return fmt.Errorf("invalid label selector %q: %w", s, err)
	}
	return nil
}

func checkFieldSelector(s string) error {
	if _, err := fields.ParseSelector(s); err != nil {
		return fmt.Errorf("invalid field selector %q: %w", s, err)
	}
	return nil
}
