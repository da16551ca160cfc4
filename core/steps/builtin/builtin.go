// Package builtin lists the step executors khook ships. The entrypoints
// register them explicitly by calling Registry; nothing registers itself.
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

// Registry returns every built-in executor. The helm executor also
// uninstalls releases for delete's release form.
func Registry() (*step.Registry, error) {
	h := helmstep.New(helmstep.Options{})
	return step.NewRegistry(
		h,
		apply.New(apply.Options{}),
		deletestep.New(deletestep.Options{Releases: h}),
		patch.New(),
		wait.New(),
		rollout.New(),
		job.New(),
	)
}
