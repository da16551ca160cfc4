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
//	identifier:"why"    the field names something khook keys records and
//	                    objects by, so it cannot hold a secret (why says so)
//
// A struct whose exactly-one-of fields are listed in a blank field
// `_ struct{} khook:"oneof=a,b,c"` gets that rule from the decoder's callers
// (validation) and from the schema (oneOf).
//
// The step kinds (helm, apply, ...) are not here: each kind's package
// describes its block to this package (StepKind), and the decoder, the
// validator, the schema and the input hash read the kinds they are given.
// A step holds its block as the kind's own type (BlockOf). The shapes
// several kinds share (ManifestSource, Duration) and the references they
// parse (ParseChart, ParseResource, ParseWaitFor) stay here.
package spec

// APIVersion and Kind are the fixed envelope values of a v1 spec.
const (
	APIVersion = "khook.io/v1"
	Kind       = "Khook"
)

// OnError policies.
const (
	OnErrorFail     = "fail"
	OnErrorContinue = "continue"
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

	// kinds are the step kinds the spec was decoded with: Validate checks
	// its steps' action keys against them.
	kinds *StepKinds
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
	Drift      *Drift    `yaml:"drift" doc:"the drift policy of every helm: and apply: step; a step's own drift: block adds to it and overrides its mode"`
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

// Step is one node of the DAG: common fields plus exactly one action, the
// block written under its kind's action key (see Kind). The decoder sets
// the action; Type, Action and BlockOf read it.
type Step struct {
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

	kind  string // the action key
	block any    // a pointer to the kind's block struct
}

// ManifestSource is one manifests entry: exactly one source.
type ManifestSource struct {
	_         struct{} `khook:"oneof=inline,file,url,kustomize"`
	Inline    string   `yaml:"inline" doc:"YAML manifests (one or more documents)"`
	File      string   `yaml:"file" doc:"local manifest file, relative to the spec file's folder"`
	URL       string   `yaml:"url" schema:"url" doc:"HTTP(S) URL of a manifest file"`
	Kustomize string   `yaml:"kustomize" schema:"localpath" doc:"local kustomization directory (./, ../ or /), built in-process"`
}
