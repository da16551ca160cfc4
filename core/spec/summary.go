package spec

import (
	"fmt"
	"sort"
	"strings"

	"khook.io/core/manifest/kubeyaml"
)

// Summary describes what the step's action does, in one line, from the
// spec alone (no cluster). Callers redact it before printing.
func (s *Step) Summary() string {
	switch s.Type() {
	case TypeHelm:
		return s.Helm.summary(s.Name)
	case TypeApply:
		return s.Apply.summary()
	case TypeDelete:
		return s.Delete.summary()
	case TypePatch:
		return s.Patch.summary()
	case TypeWait:
		return s.Wait.summary()
	case TypeRollout:
		return s.Rollout.summary()
	case TypeJob:
		return s.Job.summary()
	}
	return ""
}

type words []string

func (w *words) add(format string, args ...any) { *w = append(*w, fmt.Sprintf(format, args...)) }
func (w words) String() string                  { return strings.Join(w, ", ") }

func nsOr(ns, def string) string {
	if ns == "" {
		return def
	}
	return ns
}

// ReleaseName is the release a helm step manages: release:, or the step name.
func (h *Helm) ReleaseName(step string) string {
	if h.Release != "" {
		return h.Release
	}
	return step
}

// ReleaseNamespace is the release's namespace (default "default").
func (h *Helm) ReleaseNamespace() string { return nsOr(h.Namespace, "default") }

// ChartVersion is the pinned version, inline or from version:, or "".
func (h *Helm) ChartVersion() string {
	if h.Version != "" {
		return h.Version
	}
	if ref, err := ParseChart(h.Chart); err == nil {
		return ref.InlineVersion
	}
	return ""
}

func (h *Helm) summary(step string) string {
	var w words
	chart := h.Chart
	ref, err := ParseChart(h.Chart)
	if err == nil {
		switch ref.Source {
		case ChartFromRepo:
			chart = ref.Name
		case ChartFromOCI:
			chart = "oci://" + ref.Name
			if ref.Digest != "" {
				chart += "@" + ref.Digest
			}
		}
	}
	version := h.ChartVersion()
	if version == "" && (err != nil || ref.Source != ChartFromLocal) && ref.Digest == "" {
		version = "latest"
	}
	head := "chart " + chart
	if version != "" {
		head += " " + version
	}
	if h.Repo != "" {
		head += " from " + h.Repo
	}
	head += " → release " + h.ReleaseName(step) + " in " + h.ReleaseNamespace()
	w = append(w, head)
	if h.CreateNamespace {
		w.add("createNamespace")
	}
	if h.Atomic {
		w.add("atomic")
	}
	if h.Wait {
		w.add("wait")
	}
	if h.SkipIf != "" {
		w.add("skipIf %s", h.SkipIf)
	}
	if len(h.ValuesFrom) > 0 {
		srcs := make([]string, len(h.ValuesFrom))
		for i, v := range h.ValuesFrom {
			srcs[i] = v.File + v.URL
		}
		w.add("valuesFrom %s", strings.Join(srcs, " "))
	}
	if len(h.Values) > 0 {
		w.add("values for %s", strings.Join(sortedKeys(h.Values), " "))
	}
	return w.String()
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

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

func describeSources(list []ManifestSource) string {
	parts := make([]string, len(list))
	for i, m := range list {
		parts[i] = m.Describe()
	}
	return strings.Join(parts, " + ")
}

func (a *Apply) summary() string {
	var w words
	head := "apply " + describeSources(a.Manifests)
	if a.Namespace != "" {
		head += " in " + a.Namespace
	}
	w = append(w, head)
	if a.CreateNamespace {
		w.add("createNamespace")
	}
	if a.ServerSide {
		w.add("server-side")
	}
	if a.SkipIf != "" {
		w.add("skipIf %s", a.SkipIf)
	}
	if a.WaitFor != "" {
		w.add("waitFor %s", a.WaitFor)
	}
	return w.String()
}

func scope(ns string, all bool, sel, fsel string) string {
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

func (d *Delete) summary() string {
	var head string
	switch d.Form() {
	case DeleteByRelease:
		head = "uninstall release " + d.Release + " in " + nsOr(d.Namespace, "default")
	case DeleteByResource:
		head = "delete " + d.Resource + scope(d.Namespace, d.AllNamespaces, d.Selector, d.FieldSelector)
	case DeleteByManifests:
		head = "delete the objects of " + describeSources(d.Manifests)
		if d.Namespace != "" {
			head += " in " + d.Namespace
		}
	}
	if !d.IgnoresNotFound() {
		head += ", fail if absent"
	}
	return head
}

func (p *Patch) summary() string {
	return p.PatchType() + " patch of " + p.Target + " in " + nsOr(p.Namespace, "default")
}

func (w *Wait) summary() string {
	return "wait for " + w.For + " on " + w.On + scope(w.Namespace, w.AllNamespaces, w.Selector, w.FieldSelector)
}

func (r *Rollout) summary() string {
	if r.Restart != "" {
		return "restart " + r.Restart + " in " + r.Namespace
	}
	return "wait for the rollout of " + r.Status + " in " + r.Namespace
}

func (j *Job) summary() string {
	var w words
	w = append(w, "run "+j.Image+" in "+nsOr(j.Namespace, "default"))
	if len(j.Command) > 0 {
		w.add("command %s", strings.Join(j.Command, " "))
	}
	if len(j.Args) > 0 {
		w.add("args %s", strings.Join(j.Args, " "))
	}
	if j.ServiceAccount != "" {
		w.add("as %s", j.ServiceAccount)
	}
	if j.CreateNamespace {
		w.add("createNamespace")
	}
	if j.SkipIf != "" {
		w.add("skipIf %s", j.SkipIf)
	}
	return w.String()
}
