package spec

import (
	"math"
	"strconv"

	yaml "go.yaml.in/yaml/v3"
)

// The alias rule of go.yaml.in/yaml/v3 (and of sigs.k8s.io/yaml, which
// kubectl and helm read with): a document whose expansion is more than 99%
// alias copies, with more than 1000 nodes, is refused, down to 10% for
// documents of 4 million nodes. khook applies it to the whole document
// before decoding, so an alias bomb is one problem, not one per field that
// reaches it.
const (
	aliasRatioRangeLow  = 400_000
	aliasRatioRangeHigh = 4_000_000
)

func allowedAliasRatio(total float64) float64 {
	switch {
	case total <= aliasRatioRangeLow:
		return 0.99
	case total >= aliasRatioRangeHigh:
		return 0.10
	}
	return 0.99 - 0.89*(total-aliasRatioRangeLow)/(aliasRatioRangeHigh-aliasRatioRangeLow)
}

// bomb describes excessive aliasing: the alias whose expansion is the
// largest (the first one in the document among equals), its size and the
// size of the whole expanded document, in nodes.
type bomb struct {
	alias       *yaml.Node
	size, total float64
}

// aliasBomb returns the document's excessive aliasing, or nil. Sizes are
// counted without expanding anything (each node's expanded size once), so
// a bomb costs no more than its text to detect.
func aliasBomb(root *yaml.Node) *bomb {
	if !hasAlias(root) {
		return nil
	}
	c := aliasCounter{size: map[*yaml.Node]float64{}, aliased: map[*yaml.Node]float64{}}
	total, aliased := c.count(root)
	if aliased <= 100 || total <= 1000 || aliased/total <= allowedAliasRatio(total) {
		return nil
	}
	return &bomb{alias: c.biggest, size: c.biggestSize, total: total}
}

type aliasCounter struct {
	size, aliased map[*yaml.Node]float64 // memoized per node; -1 while counting it
	biggest       *yaml.Node
	biggestSize   float64
}

// count returns the number of nodes n stands for once aliases are expanded,
// and how many of those come from alias expansion.
func (c *aliasCounter) count(n *yaml.Node) (float64, float64) {
	if s, ok := c.size[n]; ok {
		if s < 0 {
			return 1, 0 // an alias inside its own anchor: the decoder reports it
		}
		return s, c.aliased[n]
	}
	c.size[n] = -1
	var size, aliased float64
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		s, _ := c.count(n.Alias)
		size, aliased = s, s
		if s > c.biggestSize {
			c.biggest, c.biggestSize = n, s
		}
	} else {
		size = 1
		for _, ch := range n.Content {
			s, a := c.count(ch)
			size, aliased = size+s, aliased+a
		}
	}
	size, aliased = math.Min(size, math.MaxFloat64/4), math.Min(aliased, math.MaxFloat64/4)
	c.size[n], c.aliased[n] = size, aliased
	return size, aliased
}

// countString prints a node count: exact up to a billion, then as a power
// of ten.
func countString(f float64) string {
	if f < 1e9 {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return "more than 10^" + strconv.Itoa(int(math.Floor(math.Log10(f))))
}

func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode {
		return true
	}
	for _, c := range n.Content {
		if hasAlias(c) {
			return true
		}
	}
	return false
}
