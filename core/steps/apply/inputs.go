package apply

import (
	"khook.io/core/spec"
	"khook.io/core/step"
)

// Inputs declares what a apply: step reads (step.InputDeclarer): its
// manifest sources in order, a file as itself, a kustomization by every
// file system call its build makes, a url by reference.
func (e *Executor) Inputs(st *spec.Step, baseDir string) ([]step.Input, error) {
	a := spec.BlockOf[Apply](st)
	if a == nil {
		return nil, nil
	}
	return step.ManifestInputs(a.Manifests, baseDir), nil
}
