package delete

import (
	"khook.io/core/spec"
	"khook.io/core/step"
)

// Inputs declares what a delete: step reads (step.InputDeclarer): its
// manifest sources in order, a file as itself, a kustomization by every
// file system call its build makes, a url by reference.
func (e *Executor) Inputs(st *spec.Step, baseDir string) ([]step.Input, error) {
	d := spec.BlockOf[Delete](st)
	if d == nil {
		return nil, nil
	}
	return step.ManifestInputs(d.Manifests, baseDir), nil
}
