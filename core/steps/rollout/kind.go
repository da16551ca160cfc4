package rollout

import "khook.io/core/spec"

// Type is the action key of rollout: steps.
const Type = "rollout"

// Rollout is a rollout: step's block: restart a workload or wait for its
// rollout.
type Rollout struct {
	_         struct{} `khook:"oneof=restart,status"`
	Restart   string   `yaml:"restart" doc:"deployment/x, daemonset/x or statefulset/x to restart"`
	Status    string   `yaml:"status" doc:"deployment/x, daemonset/x or statefulset/x to wait for"`
	Namespace string   `yaml:"namespace" khook:"required" schema:"dnslabel" doc:"the workload's namespace"`
}

// Kind describes rollout: steps to the spec.
func (*Executor) Kind() spec.StepKind {
	return spec.StepKind{Name: Type, Doc: "restart a workload or wait for its rollout", Block: new(Rollout)}
}

// Target returns the kind/name the rollout acts on, whichever form is used.
func (r *Rollout) Target() string {
	if r.Restart != "" {
		return r.Restart
	}
	return r.Status
}

// Check validates the form and the target.
func (r *Rollout) Check(c *spec.Check) {
	p := c.Path
	c.Namespace(p+".namespace", r.Namespace)
	hasRestart, hasStatus := c.Present(p+".restart"), c.Present(p+".status")
	switch {
	case hasRestart && hasStatus:
		c.Errorf(p, "rollout takes exactly one of restart or status, not both")
		return
	case !hasRestart && !hasStatus:
		c.Errorf(p, "rollout needs one of restart or status")
		return
	}
	field := "restart"
	if hasStatus {
		field = "status"
	}
	if r.Target() == "" {
		c.Errorf(p+"."+field, "must not be empty")
		return
	}
	if _, _, err := spec.ParseRolloutTarget(r.Target()); err != nil {
		c.Errorf(p+"."+field, "%v", err)
	}
}

// Summary says what is restarted or waited for.
func (r *Rollout) Summary(*spec.Step) string {
	if r.Restart != "" {
		return "restart " + r.Restart + " in " + r.Namespace
	}
	return "wait for the rollout of " + r.Status + " in " + r.Namespace
}

// Hint explains that a rollout has no skipIf.
func (*Rollout) Hint(field string) string {
	if field == "skipIf" {
		return "rollout steps have no skipIf: rollout status returns at once when the rollout is complete"
	}
	return ""
}

// OnlyWaits: a rollout status changes nothing; a restart does.
func (r *Rollout) OnlyWaits() bool { return r.Restart == "" }
