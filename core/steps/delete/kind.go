package delete

import (
	"fmt"
	"strings"

	"khook.io/core/spec"
)

// Type is the action key of delete: steps.
const Type = "delete"

// Delete is a delete: step's block: remove resources by manifests, by
// resource/selector, or uninstall a release.
type Delete struct {
	Manifests      []spec.ManifestSource `yaml:"manifests" doc:"delete what these manifests define"`
	Resource       string                `yaml:"resource" doc:"a type (pods) or kind/name (daemonset/aws-node)"`
	Release        string                `yaml:"release" identifier:"a release name is an identifier: it names the release's objects and history in the cluster and is printed in plans" doc:"Helm release to uninstall"`
	Namespace      string                `yaml:"namespace" schema:"dnslabel" doc:"namespace; for release: the release's namespace (default default)"`
	AllNamespaces  bool                  `yaml:"allNamespaces" doc:"match in every namespace (resource form)"`
	Selector       string                `yaml:"selector" doc:"label selector (resource form)"`
	FieldSelector  string                `yaml:"fieldSelector" doc:"field selector (resource form)"`
	IgnoreNotFound *bool                 `yaml:"ignoreNotFound" default:"true" doc:"absent objects or release are success, not failure"`
}

// Kind describes delete: steps to the spec.
func (*Executor) Kind() spec.StepKind {
	return spec.StepKind{Name: Type, Doc: "remove resources or uninstall a release", Block: new(Delete)}
}

// Delete forms.
const (
	ByManifests = "manifests"
	ByResource  = "resource"
	ByRelease   = "release"
)

// Form returns which of the three delete forms is used ("" when none; the
// first in manifests, resource, release order when several, which is a
// validation error).
func (d *Delete) Form() string {
	switch {
	case d.Manifests != nil:
		return ByManifests
	case d.Resource != "":
		return ByResource
	case d.Release != "":
		return ByRelease
	}
	return ""
}

// IgnoresNotFound reports ignoreNotFound with its default (true).
func (d *Delete) IgnoresNotFound() bool { return d.IgnoreNotFound == nil || *d.IgnoreNotFound }

// Check validates the one form and its fields.
func (d *Delete) Check(c *spec.Check) {
	p := c.Path
	var forms []string
	if d.Manifests != nil || c.Present(p+".manifests") {
		forms = append(forms, ByManifests)
	}
	if d.Resource != "" || c.Present(p+".resource") {
		forms = append(forms, ByResource)
	}
	if d.Release != "" || c.Present(p+".release") {
		forms = append(forms, ByRelease)
	}
	if len(forms) != 1 {
		if len(forms) == 0 {
			c.Errorf(p, "delete needs exactly one of manifests, resource or release")
		} else {
			c.Errorf(p, "delete has exactly one form, but this one has %s", strings.Join(forms, " and "))
		}
		return
	}
	c.Namespace(p+".namespace", d.Namespace)
	notFor := func(form string, fields ...string) {
		for _, f := range fields {
			if c.Present(p + "." + f) {
				c.Errorf(p+"."+f, "%s does not apply to delete by %s", f, form)
			}
		}
	}
	switch forms[0] {
	case ByManifests:
		notFor("manifests", "allNamespaces", "selector", "fieldSelector")
		c.Manifests(p+".manifests", d.Manifests)
	case ByRelease:
		notFor("release", "allNamespaces", "selector", "fieldSelector")
		if d.Release != "" && (len(d.Release) > 53 || !spec.IsDNSSubdomain(d.Release)) {
			c.Errorf(p+".release", "%s", spec.WithNote(fmt.Sprintf("%q is not a valid Helm release name (lowercase DNS name, at most 53 characters)", d.Release), d.Release))
		}
		if d.Release == "" {
			c.Errorf(p+".release", "must not be empty")
		}
	case ByResource:
		c.Selection(p, "resource", d.Resource, d.Namespace, d.AllNamespaces, d.Selector, d.FieldSelector)
	}
}

// Summary says what is deleted or uninstalled.
func (d *Delete) Summary(*spec.Step) string {
	var head string
	switch d.Form() {
	case ByRelease:
		ns := d.Namespace
		if ns == "" {
			ns = "default"
		}
		head = "uninstall release " + d.Release + " in " + ns
	case ByResource:
		head = "delete " + d.Resource + spec.Scope(d.Namespace, d.AllNamespaces, d.Selector, d.FieldSelector)
	case ByManifests:
		head = "delete the objects of " + spec.DescribeSources(d.Manifests)
		if d.Namespace != "" {
			head += " in " + d.Namespace
		}
	}
	if !d.IgnoresNotFound() {
		head += ", fail if absent"
	}
	return head
}

// Hint explains that a delete has no skipIf.
func (*Delete) Hint(field string) string {
	if field == "skipIf" {
		return "delete steps have no skipIf: an absent object is already a no-op (ignoreNotFound defaults to true)"
	}
	return ""
}

// JSONSchema adds the forms to the block's schema: exactly one, and the
// fields a form does not take.
func (*Delete) JSONSchema(s map[string]any) {
	type object = map[string]any
	s["oneOf"] = []any{
		object{"required": []string{"manifests"}},
		object{"required": []string{"resource"}},
		object{"required": []string{"release"}},
	}
	notSelection := object{"properties": object{"selector": false, "fieldSelector": false, "allNamespaces": false}}
	s["dependentSchemas"] = object{"release": notSelection, "manifests": notSelection}
}
