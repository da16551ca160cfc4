package helm

import (
	"fmt"

	khelm "khook.io/core/helm"
	"khook.io/core/redact"
	"khook.io/core/spec"
	"khook.io/core/step"
)

// Inputs declares what a helm: step reads (step.InputDeclarer): its
// valuesFrom files and urls, in order, then its chart: a local chart's
// files as helm loads them, with its file:// dependencies, transitively;
// a remote chart by reference, noted as remote when the reference does
// not pin its content.
func (e *Executor) Inputs(st *spec.Step, baseDir string) ([]step.Input, error) {
	hs := spec.BlockOf[Helm](st)
	if hs == nil {
		return nil, nil
	}
	var in []step.Input
	for i, v := range hs.ValuesFrom {
		switch {
		case v.File != "":
			in = append(in, step.Input{Path: v.File})
		case v.URL != "":
			in = append(in, step.Input{Remote: fmt.Sprintf("valuesFrom[%d] (url %s)", i, redact.StripURLUserinfo(v.URL))})
		}
	}
	ref, err := spec.ParseChart(hs.Chart)
	if err != nil {
		return in, err
	}
	if ref.Source != spec.ChartFromLocal {
		if why := unpinnedChart(ref, hs); why != "" {
			in = append(in, step.Input{Remote: why})
		}
		return in, nil
	}
	path := spec.Resolve(baseDir, hs.Chart)
	return append(in, step.Input{Files: &step.FilesInput{Kind: "chart", Source: hs.Chart, Read: func() ([]step.FileDigest, []string, error) {
		ci, err := khelm.LocalChartInputs(path)
		if err != nil {
			return nil, nil, err
		}
		files := make([]step.FileDigest, len(ci.Files))
		for i, f := range ci.Files {
			files[i] = step.FileDigest{Path: f.Path, Digest: f.Digest}
		}
		return files, ci.Remote, nil
	}}}), nil
}

// unpinnedChart says why a remote chart's content can change behind an
// unchanged reference, or "" when the reference pins it: an OCI digest, or
// an exact version (which chart repositories and registries publish once).
func unpinnedChart(ref spec.ChartRef, hs *Helm) string {
	switch ref.Source {
	case spec.ChartFromOCI:
		name := "chart oci://" + ref.Name
		switch {
		case ref.Digest != "":
			return ""
		case ref.InlineVersion != "":
			if khelm.ExactVersion(ref.InlineVersion) {
				return ""
			}
			return fmt.Sprintf("%s:%s (tag %s is not an exact version)", name, ref.InlineVersion, ref.InlineVersion)
		}
		return unpinnedVersion(name, hs.Version)
	case spec.ChartFromRepo:
		version := hs.Version
		if version == "" {
			version = ref.InlineVersion
		}
		return unpinnedVersion(fmt.Sprintf("chart %s from %s", ref.Name, redact.StripURLUserinfo(hs.Repo)), version)
	}
	return ""
}

func unpinnedVersion(name, version string) string {
	switch {
	case version == "":
		return name + " (no version: the latest)"
	case !khelm.ExactVersion(version):
		return fmt.Sprintf("%s (version %s is a range)", name, version)
	}
	return ""
}
