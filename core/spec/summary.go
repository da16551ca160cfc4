package spec

import (
	"fmt"
	"strings"

	"khook.io/core/manifest/kubeyaml"
)

// Describe names a manifest source in one word or path.
func (m ManifestSource) Describe() string {
	switch {
	case m.Inline != "":
		// the objects apply reads, counted by the same splitter
		objs, err := kubeyaml.Decode([]byte(m.Inline))
		switch {
		case err != nil:
			return "inline"
		case len(objs) == 1:
			return "inline (1 object)"
		}
		return fmt.Sprintf("inline (%d objects)", len(objs))
	case m.File != "":
		return "file " + m.File
	case m.URL != "":
		return "url " + m.URL
	case m.Kustomize != "":
		return "kustomize " + m.Kustomize
	}
	return "empty"
}

// DescribeSources names a manifests list in a summary: each source's
// Describe, joined by " + ".
func DescribeSources(list []ManifestSource) string {
	parts := make([]string, len(list))
	for i, m := range list {
		parts[i] = m.Describe()
	}
	return strings.Join(parts, " + ")
}

// Scope words where a selection (Check.Selection) looks, for a summary:
// " in all namespaces", " in ns", then " with labels ..." and " with
// fields ...", or "".
func Scope(ns string, all bool, sel, fsel string) string {
	s := ""
	switch {
	case all:
		s = " in all namespaces"
	case ns != "":
		s = " in " + ns
	}
	if sel != "" {
		s += " with labels " + sel
	}
	if fsel != "" {
		s += " with fields " + fsel
	}
	return s
}
