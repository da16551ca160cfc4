package plan

import (
	"reflect"
	"testing"
)

func names(g *Graph, idx []int) []string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = g.Name(j)
	}
	return out
}

func TestLevels(t *testing.T) {
	tests := []struct {
		name   string
		nodes  []Node
		levels [][]string
	}{
		{"independent", []Node{{Name: "a"}, {Name: "b"}, {Name: "c"}}, [][]string{{"a", "b", "c"}}},
		{"chain", []Node{{Name: "c", Needs: []string{"b"}}, {Name: "b", Needs: []string{"a"}}, {Name: "a"}}, [][]string{{"a"}, {"b"}, {"c"}}},
		{"diamond", []Node{{Name: "a"}, {Name: "b", Needs: []string{"a"}}, {Name: "c", Needs: []string{"a"}}, {Name: "d", Needs: []string{"b", "c"}}},
			[][]string{{"a"}, {"b", "c"}, {"d"}}},
		{"longest chain decides", []Node{{Name: "a"}, {Name: "b", Needs: []string{"a"}}, {Name: "c", Needs: []string{"a", "b"}}, {Name: "x"}},
			[][]string{{"a", "x"}, {"b"}, {"c"}}},
		{"unknown and duplicate needs ignored", []Node{{Name: "a", Needs: []string{"ghost", "b", "b"}}, {Name: "b"}}, [][]string{{"b"}, {"a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, cycles := NewGraph(tt.nodes)
			if len(cycles) > 0 {
				t.Fatalf("unexpected cycles: %v", cycles)
			}
			var got [][]string
			for _, l := range g.Levels() {
				got = append(got, names(g, l))
			}
			if !reflect.DeepEqual(got, tt.levels) {
				t.Fatalf("levels %v, want %v", got, tt.levels)
			}
			// every step comes after its needs in Order, before them in Reverse
			pos := map[string]int{}
			for i, j := range g.Order() {
				pos[g.Name(j)] = i
			}
			for i := 0; i < g.Len(); i++ {
				for _, n := range g.Needs(i) {
					if pos[g.Name(n)] >= pos[g.Name(i)] {
						t.Errorf("%s ordered before its need %s", g.Name(i), g.Name(n))
					}
				}
			}
			rev := names(g, g.Reverse())
			if len(rev) != g.Len() || rev[0] != names(g, g.Order())[g.Len()-1] {
				t.Errorf("Reverse %v is not Order reversed", rev)
			}
		})
	}
}

func TestCycles(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		want  []string
	}{
		{"two", []Node{{Name: "a", Needs: []string{"b"}}, {Name: "b", Needs: []string{"a"}}}, []string{"dependency cycle: a -> b -> a (each step needs the next)"}},
		{"three", []Node{{Name: "a", Needs: []string{"c"}}, {Name: "b", Needs: []string{"a"}}, {Name: "c", Needs: []string{"b"}}},
			[]string{"dependency cycle: a -> c -> b -> a (each step needs the next)"}},
		{"rotated to the first step", []Node{{Name: "x"}, {Name: "b", Needs: []string{"c"}}, {Name: "c", Needs: []string{"b", "x"}}},
			[]string{"dependency cycle: b -> c -> b (each step needs the next)"}},
		{"two separate cycles", []Node{{Name: "a", Needs: []string{"b"}}, {Name: "b", Needs: []string{"a"}}, {Name: "c", Needs: []string{"d"}}, {Name: "d", Needs: []string{"c"}}},
			[]string{"dependency cycle: a -> b -> a (each step needs the next)", "dependency cycle: c -> d -> c (each step needs the next)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, cycles := NewGraph(tt.nodes)
			var got []string
			for _, c := range cycles {
				got = append(got, c.Error())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("cycles %q, want %q", got, tt.want)
			}
			if g.Levels() != nil {
				t.Fatal("a cyclic graph has no levels")
			}
		})
	}
}
