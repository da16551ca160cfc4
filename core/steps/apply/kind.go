package apply

import (
	"strings"

	"khook.io/core/spec"
)

// Type is the action key of apply: steps.
const Type = "apply"

// SkipIfExists is the skipIf of an apply: skip (success) when every
// object already exists.
const SkipIfExists = "exists"

// Apply is an apply: step's block: declaratively apply manifests.
type Apply struct {
	Manifests       []spec.ManifestSource `yaml:"manifests" khook:"required" doc:"ordered manifest sources"`
	Namespace       string                `yaml:"namespace" schema:"dnslabel" doc:"default namespace for namespaced objects that set none"`
	CreateNamespace bool                  `yaml:"createNamespace" default:"false" doc:"create the namespace if missing"`
	SkipIf          string                `yaml:"skipIf" enum:"exists" doc:"exists: skip (success) if every object already exists"`
	ServerSide      bool                  `yaml:"serverSide" default:"false" doc:"server-side apply (field manager khook)"`
	WaitFor         string                `yaml:"waitFor" doc:"wait until every applied object meets this: condition=Name[=value] or jsonpath=expr[=value]"`
	// Drift is how to compare, not what to apply: not an input (hash).
	Drift *spec.Drift `yaml:"drift" json:"-" doc:"the drift policy of the applied objects: what a re-run does with what changed in the cluster since khook applied them; adds to defaults.drift"`
}

// Kind describes apply: steps to the spec.
func (*Executor) Kind() spec.StepKind {
	return spec.StepKind{Name: Type, Doc: "declaratively apply manifests", Block: new(Apply)}
}

// Check validates the manifests and waitFor.
func (a *Apply) Check(c *spec.Check) {
	p := c.Path
	c.Namespace(p+".namespace", a.Namespace)
	c.SkipIf(p+".skipIf", a.SkipIf, SkipIfExists)
	c.Drift(p+".drift", a.Drift)
	if a.CreateNamespace && a.Namespace == "" {
		c.Errorf(p+".createNamespace", "createNamespace needs namespace: set the namespace to create")
	}
	if c.Present(p + ".manifests") {
		c.Manifests(p+".manifests", a.Manifests)
	}
	if a.WaitFor != "" {
		w, err := spec.ParseWaitFor(a.WaitFor)
		switch {
		case err != nil:
			c.Errorf(p+".waitFor", "%v", err)
		case w.Kind == spec.ForDelete:
			c.Errorf(p+".waitFor", "waitFor cannot be delete: an apply step waits for what it applied to meet a condition; use a wait: step with for: delete")
		}
	}
}

// Summary says what is applied, and how.
func (a *Apply) Summary(*spec.Step) string {
	head := "apply " + spec.DescribeSources(a.Manifests)
	if a.Namespace != "" {
		head += " in " + a.Namespace
	}
	w := []string{head}
	if a.CreateNamespace {
		w = append(w, "createNamespace")
	}
	if a.ServerSide {
		w = append(w, "server-side")
	}
	if a.SkipIf != "" {
		w = append(w, "skipIf "+a.SkipIf)
	}
	if a.WaitFor != "" {
		w = append(w, "waitFor "+a.WaitFor)
	}
	return strings.Join(w, ", ")
}
