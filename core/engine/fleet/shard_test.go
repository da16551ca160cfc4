package fleet

import (
	"slices"
	"strconv"
	"testing"
)

// TestShards: the N slices of a fleet are disjoint, stable (sorted by
// name, whatever the given order) and together every context; K+1/N is
// the 0-based form.
func TestShards(t *testing.T) {
	contexts := []string{"kind-c", "kind-a", "kind-e", "kind-b", "kind-d"}
	for n := 1; n <= 5; n++ {
		var all []string
		for i := 1; i <= n; i++ {
			s, err := ParseShard(itoa(i)+"/"+itoa(n), nil)
			if err != nil {
				t.Fatal(err)
			}
			part, err := s.Of(contexts)
			if err != nil {
				t.Fatal(err)
			}
			k, err := ParseShard(itoa(i-1)+"+1/"+itoa(n), nil)
			if err != nil || k.i != s.i || k.n != s.n {
				t.Fatalf("%d+1/%d = %v, %v; want %v", i-1, n, k, err, s)
			}
			all = append(all, part...)
		}
		if !slices.Equal(all, []string{"kind-a", "kind-b", "kind-c", "kind-d", "kind-e"}) {
			t.Errorf("N=%d: slices together %v, want every context once, sorted", n, all)
		}
	}
	for _, bad := range []string{"0/2", "3/2", "1/0", "a/2", "1", "-1+1/2", "1/2/3"} {
		if _, err := ParseShard(bad, nil); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := (Shard{i: 1, n: 4}).Of([]string{"a", "b", "c"}); err == nil {
		t.Error("an empty slice accepted")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
