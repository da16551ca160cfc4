package cli

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// shard is --shard I/N: the I-th (1-based) of N disjoint slices of a
// fleet's contexts sorted by name.
type shard struct{ i, n int }

// parseShard reads "I/N" (1 <= I <= N), or "K+1/N" with K 0-based (what
// an Indexed Job's args write as "$(JOB_COMPLETION_INDEX)+1/N").
func parseShard(v string) (shard, error) {
	bad := fmt.Errorf("--shard %q: want I/N, the I-th (from 1) of N slices of the contexts, or K+1/N with K counted from 0 (an Indexed Job's $(JOB_COMPLETION_INDEX)+1/N)", v)
	is, ns, ok := strings.Cut(strings.TrimSpace(v), "/")
	if !ok {
		return shard{}, bad
	}
	add := 0
	if k, found := strings.CutSuffix(is, "+1"); found {
		is, add = k, 1
	}
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if err1 != nil || err2 != nil || i < 0 {
		return shard{}, bad
	}
	i += add
	if n < 1 || i < 1 || i > n {
		return shard{}, fmt.Errorf("--shard %q: the slice must be 1 to %d of N=%d (N at least 1)", v, n, n)
	}
	return shard{i: i, n: n}, nil
}

// of returns the shard's slice of contexts: sorted by name, cut into N
// contiguous slices whose sizes differ by at most one; the I-th. An empty
// slice (more shards than contexts) is an error.
func (s shard) of(contexts []string) ([]string, error) {
	sorted := slices.Clone(contexts)
	slices.Sort(sorted)
	k := len(sorted)
	lo, hi := (s.i-1)*k/s.n, s.i*k/s.n
	if lo == hi {
		return nil, invalid(fmt.Errorf("--shard %d/%d: %d contexts make no slice %d (use at most %d shards)", s.i, s.n, k, s.i, k))
	}
	return sorted[lo:hi], nil
}

// shardFlags checks --shard: a blank value is refused (an unset
// variable), --shard without --contexts is a usage error.
func (f *FleetFlags) checkShard() error {
	switch {
	case f.emptyShard:
		return invalid(errors.New("--shard was given an empty value (an unset variable?): it names the slice of the contexts to run, so it is not taken for its absence (every context); give I/N, or leave the flag out"))
	case f.Shard == "":
		return nil
	case !f.enabled():
		return invalid(errors.New("--shard needs --contexts: it runs one slice of the contexts of a fleet"))
	}
	_, err := parseShard(f.Shard)
	if err != nil {
		return invalid(err)
	}
	return nil
}

// sharded is contexts cut to --shard's slice, or contexts without it.
func (f *FleetFlags) sharded(contexts []string) ([]string, error) {
	if f.Shard == "" {
		return contexts, nil
	}
	s, err := parseShard(f.Shard)
	if err != nil {
		return nil, invalid(err)
	}
	return s.of(contexts)
}
