package delete

import (
	"context"

	"khook.io/core/manifest"
	"khook.io/core/spec"
	"khook.io/core/step"
)

// Inputs declares what a delete: step reads (step.InputDeclarer): its
// manifest sources in order, a file as itself, a kustomization by every
// file system call its build makes, a url by reference.
func (e *Executor) Inputs(st *spec.Step, baseDir string) ([]step.Input, error) {
	if st.Delete == nil {
		return nil, nil
	}
	return manifestInputs(st.Delete.Manifests, baseDir), nil
}

// manifestInputs declares the inputs of a manifests list. (apply and
// delete each hold a copy: no step package imports another.)
func manifestInputs(list []spec.ManifestSource, baseDir string) []step.Input {
	var in []step.Input
	for i, m := range list {
		switch {
		case m.File != "":
			in = append(in, step.Input{Path: m.File})
		case m.Kustomize != "":
			dir := spec.Resolve(baseDir, m.Kustomize)
			in = append(in, step.Input{Kustomization: &step.KustomizationInput{
				Path: m.Kustomize,
				Build: func(ctx context.Context) ([]step.FSRead, error) {
					b, err := manifest.BuildKustomization(ctx, dir)
					if err != nil {
						return nil, err
					}
					return fromManifest(b.Reads), nil
				},
				Replay: func(calls []step.FSRead) ([]step.FSRead, error) {
					mc := make([]manifest.FSRead, len(calls))
					for i, c := range calls {
						mc[i] = manifest.FSRead{Op: c.Op, Path: c.Path}
					}
					reads, err := manifest.ReplayKustomizeReads(dir, mc)
					return fromManifest(reads), err
				},
			}})
		case m.URL != "":
			in = append(in, step.Input{Remote: manifest.Describe(i, m)})
		}
	}
	return in
}

func fromManifest(reads []manifest.FSRead) []step.FSRead {
	out := make([]step.FSRead, len(reads))
	for i, r := range reads {
		out[i] = step.FSRead{Op: r.Op, Path: r.Path, Result: r.Result}
	}
	return out
}
