// Package spec holds the khook DSL v1 model (apiVersion khook.io/v1, kind
// Khook), its YAML decoding with source positions, and its validation.
//
// The struct tags below are the single source of truth for the field names
// the decoder accepts, for the field paths errors report, and for the JSON
// Schema (package schema):
//
//	yaml:"name"         the field's key
//	khook:"required"    the field must be present (and non-empty)
//	doc:"..."           a one-line description (schema "description")
//	enum:"a,b"          the allowed values (schema "enum")
//	default:"..."       the documented default (schema "default")
//	schema:"..."        a named schema shape, see package schema
//
// A struct whose exactly-one-of fields are listed in a blank field
// `_ struct{} khook:"oneof=a,b,c"` gets that rule from the decoder's callers
// (validation) and from the schema (oneOf).
package spec

// APIVersion and Kind are the fixed envelope values of a v1 spec.
const (
	APIVersion = "khook.io/v1"
	Kind       = "Khook"
)

// Step types, named after their action keys.
const (
	TypeHelm    = "helm"
	TypeApply   = "apply"
	TypeDelete  = "delete"
	TypePatch   = "patch"
	TypeWait    = "wait"
	TypeRollout = "rollout"
	TypeJob     = "job"
)

// StepTypes lists the action keys in the order the spec documents them.
var StepTypes = []string{TypeHelm, TypeApply, TypeDelete, TypePatch, TypeWait, TypeRollout, TypeJob}

// OnError policies.
const (
	OnErrorFail     = "fail"
	OnErrorContinue = "continue"
)

// Patch types.
const (
	PatchStrategic = "strategic"
	PatchMerge     = "merge"
	PatchJSON      = "json"
)

// SkipIf predicates, one per step type that has one.
const (
	SkipIfInstalled = "installed"
	SkipIfExists    = "exists"
	SkipIfSucceeded = "succeeded"
)

// Spec is one parsed khook document.
type Spec struct {
	APIVersion string    `yaml:"apiVersion" khook:"required" enum:"khook.io/v1" doc:"fixed: khook.io/v1"`
	Kind       string    `yaml:"kind" khook:"required" enum:"Khook" doc:"fixed: Khook"`
	Metadata   Metadata  `yaml:"metadata" khook:"required" doc:"identifies the spec in logs and in the state record"`
	Defaults   *Defaults `yaml:"defaults" doc:"fallbacks for the per-step fields of the same name"`
	State      *State    `yaml:"state" doc:"the optional run-state record (resume journal); writing state: {} opts in"`
	Steps      []Step    `yaml:"steps" khook:"required" doc:"the steps, ordered by their needs into a DAG; at least one"`

	// File is the path the spec was read from ("-" or "" for stdin); local
	// paths in the spec are relative to its folder. Not part of the document.
	File string `yaml:"-"`
}

// Metadata names the spec.
type Metadata struct {
	Name string `yaml:"name" khook:"required" doc:"the spec's name, used in logs and for the state record's default name"`
}

// Defaults are fallbacks for the per-step scheduling fields.
type Defaults struct {
	Timeout    *Duration `yaml:"timeout" default:"5m" doc:"per-step execution timeout (a Go duration: 90s, 10m, 1h)"`
	Retries    *int      `yaml:"retries" default:"0" doc:"retry attempts after a failed try"`
	RetryDelay *Duration `yaml:"retryDelay" default:"10s" doc:"pause between tries"`
	OnError    string    `yaml:"onError" enum:"fail,continue" default:"fail" doc:"fail stops scheduling new steps; continue marks the step failed and keeps going"`
}

// State configures the run-state record.
type State struct {
	Enabled   *bool  `yaml:"enabled" default:"true" doc:"true when the block is present; enabled: ${USE_STATE:-false} toggles per environment"`
	Namespace string `yaml:"namespace" default:"default" doc:"namespace of the record Secret (RFC 1123 label)"`
	Name      string `yaml:"name" doc:"record Secret name (RFC 1123 subdomain); default khook-state-<metadata.name>"`
}

// IsEnabled reports whether the record is on: a present block is on unless
// enabled says false.
func (s *State) IsEnabled() bool {
	return s != nil && (s.Enabled == nil || *s.Enabled)
}

// Step is one node of the DAG: common fields plus exactly one action.
type Step struct {
	_ struct{} `khook:"oneof=helm,apply,delete,patch,wait,rollout,job"`

	Name  string   `yaml:"name" khook:"required" schema:"dnslabel" doc:"unique step name, a DNS label ([a-z0-9-], at most 63 characters)"`
	Needs []string `yaml:"needs" doc:"steps that must succeed (or be excluded by when:) before this one starts"`
	When  string   `yaml:"when" doc:"CEL condition over vars; the step runs only when it is true"`
	// TriggeredBy names steps among Needs (transitively); the step then
	// runs only when one of them changed something in this run, or (with
	// state:) its own inputs changed since the record or it never ran.
	TriggeredBy []string  `yaml:"triggeredBy" doc:"steps among its needs (transitively): this step runs only when one of them changed something in this run (created, configured, upgraded, patched, deleted, restarted, ran a Job), or, with state:, when its own inputs changed or it never succeeded"`
	Timeout     *Duration `yaml:"timeout" doc:"per-attempt timeout; overrides defaults.timeout"`
	Retries     *int      `yaml:"retries" doc:"retry attempts after a failed try; overrides defaults.retries"`
	RetryDelay  *Duration `yaml:"retryDelay" doc:"pause between tries; overrides defaults.retryDelay"`
	OnError     string    `yaml:"onError" enum:"fail,continue" doc:"overrides defaults.onError"`

	Helm    *Helm    `yaml:"helm" doc:"install or upgrade a chart release"`
	Apply   *Apply   `yaml:"apply" doc:"declaratively apply manifests"`
	Delete  *Delete  `yaml:"delete" doc:"remove resources or uninstall a release"`
	Patch   *Patch   `yaml:"patch" doc:"modify a resource in place"`
	Wait    *Wait    `yaml:"wait" doc:"block until a condition holds"`
	Rollout *Rollout `yaml:"rollout" doc:"restart a workload or wait for its rollout"`
	Job     *Job     `yaml:"job" doc:"run a container to completion"`
}

// Type returns the step's action key, or "" when it has none. With several
// action keys (a validation error) it returns the first in StepTypes order.
func (s *Step) Type() string {
	switch {
	case s.Helm != nil:
		return TypeHelm
	case s.Apply != nil:
		return TypeApply
	case s.Delete != nil:
		return TypeDelete
	case s.Patch != nil:
		return TypePatch
	case s.Wait != nil:
		return TypeWait
	case s.Rollout != nil:
		return TypeRollout
	case s.Job != nil:
		return TypeJob
	}
	return ""
}

// Action returns the step's action block (one of *Helm, *Apply, ...), or
// nil when it has none.
func (s *Step) Action() any {
	switch s.Type() {
	case TypeHelm:
		return s.Helm
	case TypeApply:
		return s.Apply
	case TypeDelete:
		return s.Delete
	case TypePatch:
		return s.Patch
	case TypeWait:
		return s.Wait
	case TypeRollout:
		return s.Rollout
	case TypeJob:
		return s.Job
	}
	return nil
}

// Helm installs or upgrades a chart release.
type Helm struct {
	Chart           string         `yaml:"chart" khook:"required" doc:"chart source: bare name (with repo), name:version, oci:// reference, or a local path (./, ../, /) to a directory or .tgz"`
	Repo            string         `yaml:"repo" schema:"url" doc:"HTTP(S) chart repository URL, required for a bare chart name"`
	Version         string         `yaml:"version" doc:"exact chart version (recommended: always pin); or write chart: name:1.2.3"`
	Auth            *Auth          `yaml:"auth" doc:"credentials for a private repository or registry"`
	Release         string         `yaml:"release" doc:"Helm release name; default: the step name"`
	Namespace       string         `yaml:"namespace" schema:"dnslabel" default:"default" doc:"target namespace"`
	CreateNamespace bool           `yaml:"createNamespace" default:"false" doc:"create the namespace if missing"`
	SkipIf          string         `yaml:"skipIf" enum:"installed" doc:"installed: skip (success) if the release already exists, regardless of version or values"`
	Atomic          bool           `yaml:"atomic" default:"false" doc:"roll back a failed upgrade, uninstall a failed install"`
	Wait            bool           `yaml:"wait" default:"false" doc:"wait for the release's resources to be ready before the step succeeds"`
	Values          map[string]any `yaml:"values" doc:"inline values, merged over the chart defaults and valuesFrom"`
	ValuesFrom      []ValuesSource `yaml:"valuesFrom" doc:"ordered values sources; later entries and values override earlier ones"`
}

// Auth holds basic-auth credentials for a chart repository or registry.
type Auth struct {
	Username string `yaml:"username" khook:"required" doc:"user name (for ECR: AWS)"`
	Password string `yaml:"password" khook:"required" doc:"password or token; pass it as ${VAR} from KHOOK_SECRET_*"`
}

// ValuesSource is one valuesFrom entry: exactly one of file or url.
type ValuesSource struct {
	_    struct{} `khook:"oneof=file,url"`
	File string   `yaml:"file" doc:"local values file, relative to the spec file's folder"`
	URL  string   `yaml:"url" schema:"url" doc:"HTTP(S) URL of a values file"`
}

// ManifestSource is one manifests entry: exactly one source.
type ManifestSource struct {
	_         struct{} `khook:"oneof=inline,file,url,kustomize"`
	Inline    string   `yaml:"inline" doc:"YAML manifests (one or more documents)"`
	File      string   `yaml:"file" doc:"local manifest file, relative to the spec file's folder"`
	URL       string   `yaml:"url" schema:"url" doc:"HTTP(S) URL of a manifest file"`
	Kustomize string   `yaml:"kustomize" schema:"localpath" doc:"local kustomization directory (./, ../ or /), built in-process"`
}

// Apply applies manifests.
type Apply struct {
	Manifests       []ManifestSource `yaml:"manifests" khook:"required" doc:"ordered manifest sources"`
	Namespace       string           `yaml:"namespace" schema:"dnslabel" doc:"default namespace for namespaced objects that set none"`
	CreateNamespace bool             `yaml:"createNamespace" default:"false" doc:"create the namespace if missing"`
	SkipIf          string           `yaml:"skipIf" enum:"exists" doc:"exists: skip (success) if every object already exists"`
	ServerSide      bool             `yaml:"serverSide" default:"false" doc:"server-side apply (field manager khook)"`
	WaitFor         string           `yaml:"waitFor" doc:"wait until every applied object meets this: condition=Name[=value] or jsonpath=expr[=value]"`
}

// Delete removes resources: by manifests, by resource/selector, or a release.
type Delete struct {
	Manifests      []ManifestSource `yaml:"manifests" doc:"delete what these manifests define"`
	Resource       string           `yaml:"resource" doc:"a type (pods) or kind/name (daemonset/aws-node)"`
	Release        string           `yaml:"release" doc:"Helm release to uninstall"`
	Namespace      string           `yaml:"namespace" schema:"dnslabel" doc:"namespace; for release: the release's namespace (default default)"`
	AllNamespaces  bool             `yaml:"allNamespaces" doc:"match in every namespace (resource form)"`
	Selector       string           `yaml:"selector" doc:"label selector (resource form)"`
	FieldSelector  string           `yaml:"fieldSelector" doc:"field selector (resource form)"`
	IgnoreNotFound *bool            `yaml:"ignoreNotFound" default:"true" doc:"absent objects or release are success, not failure"`
}

// Delete forms.
const (
	DeleteByManifests = "manifests"
	DeleteByResource  = "resource"
	DeleteByRelease   = "release"
)

// Form returns which of the three delete forms is used ("" when none; the
// first in manifests, resource, release order when several, which is a
// validation error).
func (d *Delete) Form() string {
	switch {
	case d.Manifests != nil:
		return DeleteByManifests
	case d.Resource != "":
		return DeleteByResource
	case d.Release != "":
		return DeleteByRelease
	}
	return ""
}

// IgnoresNotFound reports ignoreNotFound with its default (true).
func (d *Delete) IgnoresNotFound() bool { return d.IgnoreNotFound == nil || *d.IgnoreNotFound }

// Patch modifies a resource in place.
type Patch struct {
	Target    string `yaml:"target" khook:"required" doc:"kind/name of the object to patch"`
	Namespace string `yaml:"namespace" schema:"dnslabel" default:"default" doc:"namespace; ignored for cluster-scoped kinds"`
	Type      string `yaml:"type" enum:"strategic,merge,json" default:"strategic" doc:"strategic (built-in kinds), merge (RFC 7386, any kind) or json (RFC 6902)"`
	Patch     any    `yaml:"patch" khook:"required" schema:"patchbody" doc:"the patch body: a mapping for strategic/merge, a list of operations for json"`
}

// PatchType returns the patch type with its default.
func (p *Patch) PatchType() string {
	if p.Type == "" {
		return PatchStrategic
	}
	return p.Type
}

// Wait blocks until a condition holds.
type Wait struct {
	For           string `yaml:"for" khook:"required" doc:"condition=Name[=value], jsonpath=expr[=value], or delete"`
	On            string `yaml:"on" khook:"required" doc:"a type (pods) or kind/name (deployment/argocd-server)"`
	Namespace     string `yaml:"namespace" schema:"dnslabel" doc:"namespace; mutually exclusive with allNamespaces"`
	AllNamespaces bool   `yaml:"allNamespaces" doc:"match in every namespace"`
	Selector      string `yaml:"selector" doc:"label selector"`
	FieldSelector string `yaml:"fieldSelector" doc:"field selector"`
}

// Rollout restarts a workload or waits for its rollout.
type Rollout struct {
	_         struct{} `khook:"oneof=restart,status"`
	Restart   string   `yaml:"restart" doc:"deployment/x, daemonset/x or statefulset/x to restart"`
	Status    string   `yaml:"status" doc:"deployment/x, daemonset/x or statefulset/x to wait for"`
	Namespace string   `yaml:"namespace" khook:"required" schema:"dnslabel" doc:"the workload's namespace"`
}

// Target returns the kind/name the rollout acts on, whichever form is used.
func (r *Rollout) Target() string {
	if r.Restart != "" {
		return r.Restart
	}
	return r.Status
}

// Job runs a container to completion.
type Job struct {
	Image           string            `yaml:"image" khook:"required" doc:"container image to run"`
	Command         []string          `yaml:"command" doc:"container command (entrypoint override)"`
	Args            []string          `yaml:"args" doc:"container args"`
	Env             map[string]string `yaml:"env" doc:"environment variables (NAME: value)"`
	Namespace       string            `yaml:"namespace" schema:"dnslabel" default:"default" doc:"namespace the Job runs in"`
	CreateNamespace bool              `yaml:"createNamespace" default:"false" doc:"create the namespace if missing"`
	ServiceAccount  string            `yaml:"serviceAccount" doc:"ServiceAccount for the pod; default: the namespace's default"`
	SkipIf          string            `yaml:"skipIf" enum:"succeeded" doc:"succeeded: skip (success) if this step's Job already completed successfully"`
}
