package fleet

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"khook.io/core/engine"
)

// Shard is I/N (SettingShard): the I-th (1-based) of N disjoint slices
// of a fleet's contexts sorted by name.
type Shard struct {
	i, n  int
	spell engine.Spelling
}

// ParseShard reads "I/N" (1 <= I <= N), or "K+1/N" with K 0-based (what
// an Indexed Job's args write as "$(JOB_COMPLETION_INDEX)+1/N"); spell
// spells the setting in its messages.
func ParseShard(v string, spell engine.Spelling) (Shard, error) {
	shard := spell.Of(SettingShard)
	bad := fmt.Errorf("%s %q: want I/N, the I-th (from 1) of N slices of the contexts, or K+1/N with K counted from 0 (an Indexed Job's $(JOB_COMPLETION_INDEX)+1/N)", shard, v)
	is, ns, ok := strings.Cut(strings.TrimSpace(v), "/")
	if !ok {
		return Shard{}, bad
	}
	add := 0
	if k, found := strings.CutSuffix(is, "+1"); found {
		is, add = k, 1
	}
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if err1 != nil || err2 != nil || i < 0 {
		return Shard{}, bad
	}
	i += add
	if n < 1 || i < 1 || i > n {
		return Shard{}, fmt.Errorf("%s %q: the slice must be 1 to %d of N=%d (N at least 1)", shard, v, n, n)
	}
	return Shard{i: i, n: n, spell: spell}, nil
}

// Of returns the shard's slice of contexts: sorted by name, cut into N
// contiguous slices whose sizes differ by at most one; the I-th. An empty
// slice (more shards than contexts) is an error.
func (s Shard) Of(contexts []string) ([]string, error) {
	sorted := slices.Clone(contexts)
	slices.Sort(sorted)
	k := len(sorted)
	lo, hi := (s.i-1)*k/s.n, s.i*k/s.n
	if lo == hi {
		return nil, fmt.Errorf("%s %d/%d: %d contexts make no slice %d (use at most %d shards)", s.spell.Of(SettingShard), s.i, s.n, k, s.i, k)
	}
	return sorted[lo:hi], nil
}
