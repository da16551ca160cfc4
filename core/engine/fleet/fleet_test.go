package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/spec"
)

func TestVarDirFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "arn:aws:eks:eu-west-1:1:cluster"), 0o755); err != nil {
		t.Fatal(err)
	}
	eks := filepath.Join(dir, "arn:aws:eks:eu-west-1:1:cluster", "prod.yaml")
	if err := os.WriteFile(eks, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if f, err := (Options{VarDir: dir}).VarDirFile("arn:aws:eks:eu-west-1:1:cluster/prod"); err != nil || f != eks {
		t.Errorf("an EKS context: %q, %v", f, err)
	}
	if _, err := (Options{VarDir: dir}).VarDirFile("../outside"); err == nil || !strings.Contains(err.Error(), "inside the folder") {
		t.Errorf("a context naming a file outside: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "folder.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := (Options{VarDir: dir}).VarDirFile("folder"); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("a folder: %v", err)
	}
}

// TestSameClusters: two contexts of one cluster run together only when
// each has a state record of its own; every clash is named, with the
// cluster's server.
func TestSameClusters(t *testing.T) {
	off := false
	record := func(name string) *spec.State { return &spec.State{Name: name} }
	doc := func(st *spec.State) *load.Document {
		return &load.Document{Spec: &spec.Spec{Metadata: spec.Metadata{Name: "demo"}, State: st}}
	}
	one := kube.ClusterID{UID: "uid-1", Server: "https://one:6443", CA: "ca1"}
	oneByProxy := kube.ClusterID{UID: "uid-1", Server: "https://proxy/one", CA: "ca2"}
	two := kube.ClusterID{UID: "uid-2", Server: "https://two:6443", CA: "ca1"}
	oneNoUID := kube.ClusterID{NoUID: "reading namespace kube-system is forbidden", Server: "https://one:6443", CA: "ca1"}
	type m struct {
		id    kube.ClusterID
		state *spec.State
		err   error
	}
	for _, tc := range []struct {
		name    string
		members []m
		want    []string // in the error; none: no error
	}{
		{"two clusters", []m{{one, nil, nil}, {two, nil, nil}}, nil},
		{"one cluster under two URLs, no record", []m{{one, nil, nil}, {oneByProxy, nil, nil}},
			[]string{`contexts "c0" and "c1" are one cluster (https://one:6443, kube-system namespace UID uid-1) and would run there at once, without a state record`, "state.name: khook-state-${KHOOK_CONTEXT}"}},
		{"one record shared", []m{{one, &spec.State{}, nil}, {oneByProxy, &spec.State{}, nil}}, []string{"sharing the state record default/khook-state-demo"}},
		{"a record each", []m{{one, record("a"), nil}, {oneByProxy, record("b"), nil}}, nil},
		{"a record each, one namespace apart", []m{{one, &spec.State{Namespace: "x"}, nil}, {one, &spec.State{}, nil}}, nil},
		{"a record and none", []m{{one, record("a"), nil}, {one, &spec.State{Name: "b", Enabled: &off}, nil}}, []string{`"c0" and "c1"`, "not each with a state record of its own"}},
		{"kube-system forbidden: the URL and CA", []m{{oneNoUID, nil, nil}, {one, nil, nil}}, []string{`"c0" and "c1"`, "reading namespace kube-system is forbidden: told apart by its URL and certificate authority"}},
		{"kube-system forbidden, another URL", []m{{oneNoUID, nil, nil}, {oneByProxy, nil, nil}}, nil},
		{"an unreachable cluster is left out", []m{{one, nil, nil}, {kube.ClusterID{}, nil, errors.New("unreachable")}, {two, nil, nil}}, nil},
		{"three of one cluster, and a pair of another", []m{{one, nil, nil}, {two, nil, nil}, {one, nil, nil}, {two, nil, nil}, {oneByProxy, nil, nil}},
			[]string{`contexts "c0", "c2" and "c4" are one cluster (https://one:6443`, `contexts "c1" and "c3" are one cluster (https://two:6443`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members := make([]*Member, len(tc.members))
			ids, known := make([]kube.ClusterID, len(tc.members)), make([]bool, len(tc.members))
			for i, x := range tc.members {
				members[i] = &Member{Context: fmt.Sprintf("c%d", i), Doc: doc(x.state)}
				ids[i], known[i] = x.id, x.err == nil
			}
			err := SameClusters(members, ids, known, nil)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("not refused")
			}
			if !strings.HasPrefix(err.Error(), "the fleet names one cluster under several contexts, so nothing was run on any cluster:") {
				t.Errorf("error: %v", err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q:\n%v", s, err)
				}
			}
		})
	}
}

// TestVisit: every member is visited once, at most parallelism at once;
// done sees each member's error in the fleet's order; a member whose turn
// comes after cancellation is not visited and fails with ErrInterrupted.
func TestVisit(t *testing.T) {
	var running, most atomic.Int32
	var order []int
	errs := Visit(context.Background(), 6, 2, func(_ context.Context, i int) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		if i == 3 {
			return errors.New("boom")
		}
		return nil
	}, func(i int, err error) { order = append(order, i) })
	if most.Load() > 2 {
		t.Errorf("%d members at once, want at most 2", most.Load())
	}
	if fmt.Sprint(order) != "[0 1 2 3 4 5]" {
		t.Errorf("done order %v", order)
	}
	if errs[3] == nil || errs[2] != nil {
		t.Errorf("errors %v", errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	visited := false
	errs = Visit(ctx, 2, 1, func(context.Context, int) error { visited = true; return nil }, nil)
	if visited || !errors.Is(errs[0], ErrInterrupted) || !errors.Is(errs[1], ErrInterrupted) {
		t.Errorf("after cancellation: visited %v, errors %v", visited, errs)
	}
}
