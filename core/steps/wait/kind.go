package wait

import "khook.io/core/spec"

// Type is the action key of wait: steps.
const Type = "wait"

// Wait is a wait: step's block: block until a condition holds.
type Wait struct {
	For           string `yaml:"for" khook:"required" doc:"condition=Name[=value], jsonpath=expr[=value], or delete"`
	On            string `yaml:"on" khook:"required" doc:"a type (pods) or kind/name (deployment/argocd-server)"`
	Namespace     string `yaml:"namespace" schema:"dnslabel" doc:"namespace; mutually exclusive with allNamespaces"`
	AllNamespaces bool   `yaml:"allNamespaces" doc:"match in every namespace"`
	Selector      string `yaml:"selector" doc:"label selector"`
	FieldSelector string `yaml:"fieldSelector" doc:"field selector"`
}

// Kind describes wait: steps to the spec.
func (*Executor) Kind() spec.StepKind {
	return spec.StepKind{Name: Type, Doc: "block until a condition holds", Block: new(Wait)}
}

// Check validates the condition and the selection.
func (w *Wait) Check(c *spec.Check) {
	p := c.Path
	c.Namespace(p+".namespace", w.Namespace)
	if w.For != "" {
		if _, err := spec.ParseWaitFor(w.For); err != nil {
			c.Errorf(p+".for", "%v", err)
		}
	}
	if w.On != "" {
		c.Selection(p, "on", w.On, w.Namespace, w.AllNamespaces, w.Selector, w.FieldSelector)
	}
}

// Summary says what is waited for, on what.
func (w *Wait) Summary(*spec.Step) string {
	return "wait for " + w.For + " on " + w.On + spec.Scope(w.Namespace, w.AllNamespaces, w.Selector, w.FieldSelector)
}

// Hint explains that a wait has no skipIf.
func (*Wait) Hint(field string) string {
	if field == "skipIf" {
		return "wait steps have no skipIf: a wait whose condition holds returns at once"
	}
	return ""
}

// OnlyWaits: a wait changes nothing.
func (*Wait) OnlyWaits() bool { return true }
