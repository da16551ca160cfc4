package spec

import (
	yaml "go.yaml.in/yaml/v3"
)

// entry is one key of a mapping and its value.
type entry struct{ key, val *yaml.Node }

// isMerge reports whether k is YAML's merge key (<<), as yaml.v3 reads it.
func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge")
}

// entries returns the keys of the mapping n with their values, merge keys
// applied as yaml.v3 (and kubectl's reader) apply them: `<<: *common` or
// `<<: [*a, *b]` adds the keys of those mappings that n does not set
// itself, the first merged mapping winning over later ones. It reports
// keys that are not strings, duplicate keys written in n, and merge values
// that are not mappings.
func (d *decoder) entries(n *yaml.Node, path string) []entry {
	out := make([]entry, 0, len(n.Content)/2)
	seen := make(map[string]bool, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if isMerge(k) {
			merges = append(merges, val)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "keys must be strings, not %s", kindName(k))
			continue
		}
		if seen[k.Value] {
			d.errorf(k, joinPath(path, k.Value), "duplicate key %q", k.Value)
			continue
		}
		seen[k.Value] = true
		out = append(out, entry{k, val})
	}
	for _, m := range merges {
		for _, src := range d.mergeSources(m, path) {
			if d.merging[src] {
				d.errorf(m, joinPath(path, "<<"), "a merge key (<<) cannot merge a mapping into itself")
				d.pos.failed[path] = true
				continue
			}
			if d.merging == nil {
				d.merging = map[*yaml.Node]bool{}
			}
			d.merging[src] = true
			merged := d.entries(src, path)
			delete(d.merging, src)
			for _, e := range merged {
				if !seen[e.key.Value] {
					seen[e.key.Value] = true
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// mergeSources returns the mappings a merge key's value names.
func (d *decoder) mergeSources(m *yaml.Node, path string) []*yaml.Node {
	deref := func(n *yaml.Node) *yaml.Node {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			return n.Alias
		}
		return n
	}
	v := deref(m)
	switch v.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{v}
	case yaml.SequenceNode:
		out := make([]*yaml.Node, 0, len(v.Content))
		for _, c := range v.Content {
			if c := deref(c); c.Kind == yaml.MappingNode {
				out = append(out, c)
				continue
			}
			d.errorf(c, joinPath(path, "<<"), "a merge key (<<) takes a mapping or a list of mappings, not a list holding %s", kindName(deref(c)))
			d.pos.failed[path] = true
			return nil
		}
		return out
	}
	d.errorf(m, joinPath(path, "<<"), "a merge key (<<) takes a mapping or a list of mappings, not %s", kindName(v))
	d.pos.failed[path] = true
	return nil
}
