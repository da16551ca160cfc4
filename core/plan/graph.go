// Package plan orders a spec's steps into a DAG and describes what a run
// would do. The graph knows nothing of step kinds: it sees names and needs.
package plan

import (
	"fmt"
	"slices"
	"strings"
)

// Graph is the dependency graph of a spec's steps, by index in spec order.
type Graph struct {
	names   []string
	index   map[string]int
	needs   [][]int // needs[i]: the steps i waits for
	needers [][]int // needers[i]: the steps waiting for i
	levels  [][]int
	level   []int
}

// CycleError reports a dependency cycle, naming it: a -> b -> a, where
// each step needs the next.
type CycleError struct {
	Cycle []string // first == last
}

func (e *CycleError) Error() string {
	return "dependency cycle: " + strings.Join(e.Cycle, " -> ") + " (each step needs the next)"
}

// Node is one step as the graph sees it.
type Node struct {
	Name  string
	Needs []string
}

// NewGraph builds the graph. Needs that name no step are ignored (the
// validator reports them); a cycle is returned as *CycleError, with every
// distinct cycle found.
func NewGraph(nodes []Node) (*Graph, []*CycleError) {
	g := &Graph{
		names:   make([]string, len(nodes)),
		index:   make(map[string]int, len(nodes)),
		needs:   make([][]int, len(nodes)),
		needers: make([][]int, len(nodes)),
	}
	for i, n := range nodes {
		g.names[i] = n.Name
		if _, dup := g.index[n.Name]; !dup {
			g.index[n.Name] = i
		}
	}
	for i, n := range nodes {
		for _, need := range n.Needs {
			j, ok := g.index[need]
			if !ok || j == i || slices.Contains(g.needs[i], j) {
				continue
			}
			g.needs[i] = append(g.needs[i], j)
			g.needers[j] = append(g.needers[j], i)
		}
	}
	if cycles := g.findCycles(); len(cycles) > 0 {
		return g, cycles
	}
	g.computeLevels()
	return g, nil
}

// findCycles runs a depth-first search and reports each back edge's cycle
// once (rotated to start at its first step in spec order).
func (g *Graph) findCycles() []*CycleError {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(g.names))
	var stack []int
	var out []*CycleError
	seen := map[string]bool{}
	var visit func(i int)
	visit = func(i int) {
		color[i] = grey
		stack = append(stack, i)
		for _, j := range g.needs[i] {
			switch color[j] {
			case white:
				visit(j)
			case grey:
				start := slices.Index(stack, j)
				cyc := slices.Clone(stack[start:])
				// rotate so the step earliest in the spec comes first
				m := slices.Index(cyc, slices.Min(cyc))
				cyc = append(cyc[m:], cyc[:m]...)
				// the stack follows needs edges: each step needs the next
				names := make([]string, 0, len(cyc)+1)
				for _, k := range cyc {
					names = append(names, g.names[k])
				}
				names = append(names, g.names[cyc[0]])
				key := strings.Join(names, "\x00")
				if !seen[key] {
					seen[key] = true
					out = append(out, &CycleError{Cycle: names})
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
	}
	for i := range g.names {
		if color[i] == white {
			visit(i)
		}
	}
	return out
}

// computeLevels assigns each step the length of its longest needs chain:
// level 0 needs nothing, level n needs something at level n-1.
func (g *Graph) computeLevels() {
	g.level = make([]int, len(g.names))
	indeg := make([]int, len(g.names))
	for i := range g.names {
		indeg[i] = len(g.needs[i])
	}
	var cur []int
	for i, d := range indeg {
		if d == 0 {
			cur = append(cur, i)
		}
	}
	for lvl := 0; len(cur) > 0; lvl++ {
		g.levels = append(g.levels, cur)
		var next []int
		for _, i := range cur {
			g.level[i] = lvl
			for _, j := range g.needers[i] {
				indeg[j]--
				if indeg[j] == 0 {
					next = append(next, j)
				}
			}
		}
		slices.Sort(next)
		cur = next
	}
}

// Len is the number of steps.
func (g *Graph) Len() int { return len(g.names) }

// Name returns step i's name.
func (g *Graph) Name(i int) string { return g.names[i] }

// Index returns the index of the named step.
func (g *Graph) Index(name string) (int, bool) {
	i, ok := g.index[name]
	return i, ok
}

// Needs returns the indexes of the steps step i waits for.
func (g *Graph) Needs(i int) []int { return g.needs[i] }

// Needers returns the indexes of the steps waiting for step i.
func (g *Graph) Needers(i int) []int { return g.needers[i] }

// Levels returns the steps by level, each level in spec order. Nil when the
// graph has a cycle.
func (g *Graph) Levels() [][]int { return g.levels }

// Level returns step i's level.
func (g *Graph) Level(i int) int { return g.level[i] }

// Order returns every step in an order that respects needs: by level, then
// spec order.
func (g *Graph) Order() []int {
	out := make([]int, 0, len(g.names))
	for _, l := range g.levels {
		out = append(out, l...)
	}
	return out
}

// Reverse returns the destroy order: the last level first.
func (g *Graph) Reverse() []int {
	out := g.Order()
	slices.Reverse(out)
	return out
}

func (g *Graph) String() string {
	var b strings.Builder
	for l, steps := range g.levels {
		fmt.Fprintf(&b, "%d:", l)
		for _, i := range steps {
			b.WriteString(" " + g.names[i])
		}
		b.WriteByte('\n')
	}
	return b.String()
}
