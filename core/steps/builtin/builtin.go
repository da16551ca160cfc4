// Package builtin lists the step kinds khook ships. The entrypoints
// register them explicitly by calling Registry; nothing registers itself.
// Adding a kind is one package and one line in Executors
// (docs/step-kinds.md).
package builtin

import (
	"khook.io/core/step"
	"khook.io/core/steps/apply"
	deletestep "khook.io/core/steps/delete"
	helmstep "khook.io/core/steps/helm"
	"khook.io/core/steps/job"
	"khook.io/core/steps/patch"
	"khook.io/core/steps/rollout"
	"khook.io/core/steps/wait"
)

// Executors returns a new executor of every built-in kind, in the order
// the spec documents the kinds (the order messages list them in). The
// helm executor also uninstalls releases for delete's release form.
func Executors() []step.Executor {
	h := helmstep.New(helmstep.Options{})
	return []step.Executor{
		h,
		apply.New(apply.Options{}),
		deletestep.New(deletestep.Options{Releases: h}),
		patch.New(),
		wait.New(),
		rollout.New(),
		job.New(),
	}
}

// Registry registers every built-in executor.
func Registry() (*step.Registry, error) {
	return step.NewRegistry(Executors()...)
}
