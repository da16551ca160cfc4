package step

import (
	"context"

	"khook.io/core/manifest"
	"khook.io/core/spec"
)

// ManifestInputs declares the inputs of a manifests list (apply:'s and
// delete:'s), in order: a file as itself, a kustomization by every file
// system call its build makes, a url by reference. Both step types read
// the list the same way, and no step package imports another.
func ManifestInputs(list []spec.ManifestSource, baseDir string) []Input {
	var in []Input
	for i, m := range list {
		switch {
		case m.File != "":
			in = append(in, Input{Path: m.File})
		case m.Kustomize != "":
			dir := spec.Resolve(baseDir, m.Kustomize)
			in = append(in, Input{Kustomization: &KustomizationInput{
				Path: m.Kustomize,
				Build: func(ctx context.Context) ([]FSRead, error) {
					b, err := manifest.BuildKustomization(ctx, dir)
					if err != nil {
						return nil, err
					}
					return fromManifest(b.Reads), nil
				},
				Replay: func(calls []FSRead) ([]FSRead, error) {
					mc := make([]manifest.FSRead, len(calls))
					for i, c := range calls {
						mc[i] = manifest.FSRead{Op: c.Op, Path: c.Path}
					}
					reads, err := manifest.ReplayKustomizeReads(dir, mc)
					return fromManifest(reads), err
				},
			}})
		case m.URL != "":
			in = append(in, Input{Remote: manifest.Describe(i, m)})
		}
	}
	return in
}

func fromManifest(reads []manifest.FSRead) []FSRead {
	out := make([]FSRead, len(reads))
	for i, r := range reads {
		out[i] = FSRead{Op: r.Op, Path: r.Path, Result: r.Result}
	}
	return out
}
