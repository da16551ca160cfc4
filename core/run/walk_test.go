package run

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dag is a Graph for tests: dag[i] lists the nodes node i needs.
type dag [][]int

func (d dag) Len() int          { return len(d) }
func (d dag) Needs(i int) []int { return d[i] }

func (d dag) Needers(i int) []int {
	var out []int
	for j, needs := range d {
		if slices.Contains(needs, i) {
			out = append(out, j)
		}
	}
	return out
}

// logVisitor is a Visitor that logs every call. Nodes in skip end at once
// (ok), nodes in fail end not ok, and a node in stop stops the walk with
// its error; work, when set, is each Visit's work.
type logVisitor struct {
	skip, fail map[int]bool
	stop       map[int]error
	work       func(ctx context.Context, i int)

	mu  sync.Mutex
	log []string
}

func (v *logVisitor) add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.log = append(v.log, fmt.Sprintf(format, args...))
}

func (v *logVisitor) lines() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.log)
}

func (v *logVisitor) Skip(i int) (skip, ok bool) {
	if v.skip[i] {
		v.add("skip %d", i)
		return true, true
	}
	return false, false
}

func (v *logVisitor) Visit(ctx context.Context, i int) {
	v.add("run %d", i)
	if v.work != nil {
		v.work(ctx, i)
	}
}

func (v *logVisitor) Done(i int) (ok bool, stop error) {
	v.add("done %d", i)
	return !v.fail[i], v.stop[i]
}

func (v *logVisitor) Blocked(i, need int) { v.add("blocked %d by %d", i, need) }

func (v *logVisitor) Unreached(i int, cause error) { v.add("unreached %d: %v", i, cause) }

func set(nodes ...int) map[int]bool {
	m := map[int]bool{}
	for _, n := range nodes {
		m[n] = true
	}
	return m
}

// TestWalkOrder: with one node at a time the walk is deterministic: a
// node becomes ready when its last need ends, ready nodes start first
// ready first, a node that ends not ok blocks what needs it (depth first),
// a stop leaves the rest unreached, and so does a cycle.
func TestWalkOrder(t *testing.T) {
	stop := errors.New("stop")
	tests := []struct {
		name       string
		g          dag
		skip, fail map[int]bool
		stop       map[int]error
		want       string
	}{
		{name: "chain", g: dag{nil, {0}, {1}},
			want: "run 0, done 0, run 1, done 1, run 2, done 2"},
		{name: "roots in node order, then as their needs end", g: dag{3: {2}, 2: nil, 4: {0}},
			want: "run 0, done 0, run 1, done 1, run 2, done 2, run 4, done 4, run 3, done 3"},
		{name: "diamond: the join waits for both", g: dag{nil, {0}, {0}, {1, 2}},
			want: "run 0, done 0, run 1, done 1, run 2, done 2, run 3, done 3"},
		{name: "a skipped node satisfies what needs it", g: dag{nil, {0}, {1}}, skip: set(1),
			want: "run 0, done 0, skip 1, run 2, done 2"},
		{name: "a node that ends not ok blocks what needs it, depth first", g: dag{nil, {0}, {1}, {0}, nil},
			fail: set(0),
			want: "run 0, done 0, blocked 1 by 0, blocked 2 by 1, blocked 3 by 0, run 4, done 4"},
		{name: "a blocked node ends even when other needs are pending", g: dag{nil, nil, {1, 0}}, fail: set(0),
			want: "run 0, done 0, blocked 2 by 0, run 1, done 1"},
		{name: "a stop starts nothing new; the rest is unreached", g: dag{nil, nil, {0}, {2}},
			stop: map[int]error{0: stop},
			want: "run 0, done 0, unreached 1: stop, unreached 2: stop, blocked 3 by 2"},
		{name: "a skip waits for a slot too, and a stop keeps it from skipping", g: dag{nil, nil}, skip: set(1),
			stop: map[int]error{0: stop},
			want: "run 0, done 0, unreached 1: stop"},
		{name: "a cycle is never reached", g: dag{nil, {2}, {1}, {0}},
			want: "run 0, done 0, run 3, done 3, unreached 1: <nil>, blocked 2 by 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &logVisitor{skip: tt.skip, fail: tt.fail, stop: tt.stop}
			w := Walker{Graph: tt.g, Limit: 1}
			w.Walk(context.Background(), v)
			if got := strings.Join(v.lines(), ", "); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestWalkLimit: the walk starts a node only while fewer than Limit run,
// and reaches the limit. The walk decides to start a node when it calls
// Skip, on its own goroutine, the goroutine Done is called on: counting
// there is exact, whatever the Visits' goroutines do. Every Visit holds
// its slot until the limit is reached, so the walk is at the limit with
// nodes still ready to start: a walk that starts one more then does so
// deterministically.
func TestWalkLimit(t *testing.T) {
	for _, limit := range []int{1, 2, 3, 0} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			const n = 8
			want := limit
			if limit == 0 {
				want = n
			}
			v := &limitVisitor{want: want, full: make(chan struct{})}
			w := Walker{Graph: make(dag, n), Limit: limit}
			w.Walk(context.Background(), v)
			if v.peak != want {
				t.Errorf("at most %d nodes ran at once, want %d", v.peak, want)
			}
			if v.over != "" {
				t.Error(v.over)
			}
			if v.runs.Load() != n {
				t.Errorf("%d nodes ran, want %d", v.runs.Load(), n)
			}
		})
	}
}

// limitVisitor counts the nodes that run at once where the walk decides:
// Skip (a node starts) and Done (it ended), both on the walk's goroutine.
type limitVisitor struct {
	want     int
	full     chan struct{} // closed when want nodes run at once
	running  int
	peak     int
	over     string
	runs     atomic.Int32
	fullOnce sync.Once
}

func (v *limitVisitor) Skip(i int) (skip, ok bool) {
	if v.running == v.want && v.over == "" {
		v.over = fmt.Sprintf("node %d started while %d ran, at the limit", i, v.running)
	}
	v.running++
	v.peak = max(v.peak, v.running)
	if v.running == v.want {
		v.fullOnce.Do(func() { close(v.full) })
	}
	return false, false
}

func (v *limitVisitor) Visit(context.Context, int) {
	v.runs.Add(1)
	// hold the slot until the limit is reached once; the timer only turns
	// a walk that never reaches it from a hang into a failure (peak < want)
	select {
	case <-v.full:
	case <-time.After(10 * time.Second):
	}
}

func (v *limitVisitor) Done(int) (ok bool, stop error) {
	v.running--
	return true, nil
}

func (v *limitVisitor) Blocked(int, int)     {}
func (v *limitVisitor) Unreached(int, error) {}

// TestWalkWaitsForAllNeeds: a node starts only once every node it needs
// has ended, however their ends interleave.
func TestWalkWaitsForAllNeeds(t *testing.T) {
	g := dag{nil, nil, nil, {0, 1, 2}, {3, 1}, {0}, {4, 5}}
	for round := range 20 {
		var mu sync.Mutex
		endedAt := map[int]bool{}
		var bad []string
		v := &logVisitor{work: func(_ context.Context, i int) {
			mu.Lock()
			for _, need := range g[i] {
				if !endedAt[need] {
					bad = append(bad, fmt.Sprintf("%d started before its need %d ended", i, need))
				}
			}
			mu.Unlock()
			time.Sleep(time.Duration((i*7+round)%5) * time.Millisecond)
			mu.Lock()
			endedAt[i] = true
			mu.Unlock()
		}}
		w := Walker{Graph: g}
		w.Walk(context.Background(), v)
		if len(bad) > 0 || len(endedAt) != len(g) {
			t.Fatalf("round %d: %v (%d of %d ran)", round, bad, len(endedAt), len(g))
		}
	}
}

// TestWalkCancel: when the walk's context ends, the running node's Visit
// sees it and ends, nothing new starts, and every node not started is
// unreached with the context's error as the cause (blocked beyond).
func TestWalkCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	v := &logVisitor{work: func(ctx context.Context, i int) {
		if i == 0 {
			cancel()
			<-ctx.Done()
		}
	}}
	w := Walker{Graph: dag{nil, nil, {0}, {1}}, Limit: 1}
	w.Walk(ctx, v)
	want := "run 0, done 0, unreached 1: context canceled, blocked 3 by 1, unreached 2: context canceled"
	if got := strings.Join(v.lines(), ", "); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}

	// cancelled before the walk: nothing runs
	v = &logVisitor{}
	w.Walk(ctx, v)
	want = "unreached 0: context canceled, blocked 2 by 0, unreached 1: context canceled, blocked 3 by 1"
	if got := strings.Join(v.lines(), ", "); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestWalkReturnsAfterEveryVisit: Walk does not return while a Visit it
// started still runs, even when a stop leaves nothing else to do.
func TestWalkReturnsAfterEveryVisit(t *testing.T) {
	var running atomic.Int32
	v := &logVisitor{stop: map[int]error{0: errors.New("stop")}, work: func(_ context.Context, i int) {
		running.Add(1)
		defer running.Add(-1)
		if i != 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}}
	w := Walker{Graph: make(dag, 4)}
	w.Walk(context.Background(), v)
	if n := running.Load(); n != 0 {
		t.Fatalf("%d runs still running after Walk returned", n)
	}
}

func TestReverse(t *testing.T) {
	g := dag{nil, {0}, {0, 1}}
	r := Reverse(g)
	if r.Len() != 3 || fmt.Sprint(r.Needs(0), r.Needs(1), r.Needs(2)) != "[1 2] [2] []" || fmt.Sprint(r.Needers(2), r.Needers(0)) != "[0 1] []" {
		t.Fatalf("reversed: needs %v %v %v, needers of 2 %v", r.Needs(0), r.Needs(1), r.Needs(2), r.Needers(2))
	}
	v := &logVisitor{}
	(&Walker{Graph: r, Limit: 1}).Walk(context.Background(), v)
	if got := strings.Join(v.lines(), ", "); got != "run 2, done 2, run 1, done 1, run 0, done 0" {
		t.Fatalf("reversed walk: %s", got)
	}
}
