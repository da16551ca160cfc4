package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"khook.io/core/event"
	"khook.io/core/plan"
	"khook.io/core/spec"
)

// recorder collects events.
type recorder struct {
	mu     sync.Mutex
	events []event.Event
	waits  []eventWait
}

// eventWait is a channel closed when a step's event of a kind is emitted.
type eventWait struct {
	step string
	kind event.Kind
	ch   chan struct{}
}

func (r *recorder) Emit(e event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	for i, w := range r.waits {
		if w.ch != nil && w.step == e.Step && w.kind == e.Kind {
			close(w.ch)
			r.waits[i].ch = nil
		}
	}
}

// on returns a channel closed once step's event of kind has been emitted
// (ask before the run starts).
func (r *recorder) on(step string, kind event.Kind) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan struct{})
	r.waits = append(r.waits, eventWait{step: step, kind: kind, ch: ch})
	return ch
}

func (r *recorder) kinds(step string) []event.Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event.Kind
	for _, e := range r.events {
		if e.Step == step {
			out = append(out, e.Kind)
		}
	}
	return out
}

func ok(msg string) AttemptFunc {
	return func(context.Context, int) (Outcome, error) { return Outcome{Message: msg}, nil }
}

func fail(msg string) AttemptFunc {
	return func(context.Context, int) (Outcome, error) { return Outcome{}, errors.New(msg) }
}

func byName(res *Result) map[string]StepResult {
	m := map[string]StepResult{}
	for _, s := range res.Steps {
		m[s.Name] = s
	}
	return m
}

func TestIndependentStepsRunInParallel(t *testing.T) {
	// each attempt waits until all three are running at once
	var running sync.WaitGroup
	running.Add(3)
	barrier := func(context.Context, int) (Outcome, error) {
		running.Done()
		done := make(chan struct{})
		go func() { running.Wait(); close(done) }()
		select {
		case <-done:
			return Outcome{}, nil
		case <-time.After(5 * time.Second):
			return Outcome{}, errors.New("the steps did not run in parallel")
		}
	}
	tasks := []Task{{Name: "a", Attempt: barrier}, {Name: "b", Attempt: barrier}, {Name: "c", Attempt: barrier}}
	res := Schedule(context.Background(), make(dag, len(tasks)), tasks, Options{})
	if res.Status != RunOK {
		t.Fatalf("status %s: %+v", res.Status, res.Steps)
	}
}

// TestParallelismCap: with a cap of 2, two steps run at once (the cap is
// reached) and a third never starts while they run (never exceeded). Each
// step holds until the test releases it: a scheduler running a third step
// early counts 3; one running fewer than 2 never delivers the second start
// and the test hangs until go test's -timeout names it.
func TestParallelismCap(t *testing.T) {
	const tasksN, limit = 10, 2
	var cur atomic.Int32
	started := make(chan int32, tasksN)
	release := make(chan struct{})
	work := func(context.Context, int) (Outcome, error) {
		started <- cur.Add(1)
		<-release
		cur.Add(-1)
		return Outcome{}, nil
	}
	var tasks []Task
	for i := range tasksN {
		tasks = append(tasks, Task{Name: fmt.Sprint(i), Attempt: work})
	}
	done := make(chan *Result, 1)
	go func() {
		done <- Schedule(context.Background(), make(dag, len(tasks)), tasks, Options{Parallelism: limit})
	}()
	var peak int32
	for i := range tasksN {
		n := <-started
		if n > limit {
			t.Errorf("step %d started with %d steps running, cap %d", i+1, n, limit)
		}
		peak = max(peak, n)
		// hold the first two until both run; then one ends for each start
		if i >= limit-1 {
			release <- struct{}{}
		}
	}
	for range limit - 1 {
		release <- struct{}{}
	}
	if res := <-done; res.Status != RunOK {
		t.Fatal(res.Status)
	}
	if peak != limit {
		t.Fatalf("at most %d steps ran at once, cap %d", peak, limit)
	}
}

// TestNoLevelBarrier: c needs only a; it must not wait for b, which is
// on a's level. b ends only once c has run: a scheduler that made c wait
// for b's level would never run c while b runs (the timer only turns that
// deadlock into a failure).
func TestNoLevelBarrier(t *testing.T) {
	cRan := make(chan struct{})
	var cRanWhileBRan atomic.Bool
	tasks := []Task{
		{Name: "a", Attempt: ok("")},
		{Name: "b", Attempt: func(context.Context, int) (Outcome, error) {
			select {
			case <-cRan:
				cRanWhileBRan.Store(true)
			case <-time.After(10 * time.Second):
			}
			return Outcome{}, nil
		}},
		{Name: "c", Attempt: func(context.Context, int) (Outcome, error) {
			close(cRan)
			return Outcome{}, nil
		}},
	}
	Schedule(context.Background(), dag{2: {0}}, tasks, Options{})
	if !cRanWhileBRan.Load() {
		t.Fatal("c waited for b, which it does not need")
	}
}

func TestOnErrorFail(t *testing.T) {
	// slow ends only once the run has recorded bad's failure (the
	// scheduler records a step's end, and decides on its onError, on one
	// goroutine, before it takes the next end): slow is still running
	// when the run stops, however the steps are scheduled.
	slowStarted := make(chan struct{})
	rec := &recorder{}
	badFailed := rec.on("bad", event.StepFailed)
	var slowFinished atomic.Bool
	tasks := []Task{
		{Name: "slow", Attempt: func(context.Context, int) (Outcome, error) {
			close(slowStarted)
			<-badFailed
			slowFinished.Store(true)
			return Outcome{Message: "done"}, nil
		}},
		{Name: "bad", OnError: spec.OnErrorFail, Attempt: func(context.Context, int) (Outcome, error) {
			<-slowStarted
			return Outcome{}, errors.New("boom")
		}},
		{Name: "after-slow", Attempt: ok("")},
		{Name: "after-bad", Attempt: ok("")},
	}
	res := Schedule(context.Background(), dag{2: {0}, 3: {1}}, tasks, Options{Events: rec})
	m := byName(res)
	if res.Status != RunFailed || !slowFinished.Load() {
		t.Fatalf("status %s, slow finished %v", res.Status, slowFinished.Load())
	}
	if m["slow"].Status != StatusOK || m["bad"].Status != StatusFailed || m["bad"].Error != "boom" {
		t.Fatalf("running steps must finish: %+v", res.Steps)
	}
	for _, name := range []string{"after-slow", "after-bad"} {
		if m[name].Status != StatusSkipped || m[name].Attempts != 0 {
			t.Fatalf("%s: %+v", name, m[name])
		}
	}
	if m["after-slow"].SkipReason != "not run: step bad failed (onError: fail)" {
		t.Fatalf("reason %q", m["after-slow"].SkipReason)
	}
	if m["after-bad"].SkipReason != "needs bad, which failed" {
		t.Fatalf("reason %q", m["after-bad"].SkipReason)
	}
}

func TestOnErrorContinue(t *testing.T) {
	rec := &recorder{}
	badFailed := rec.on("bad", event.StepFailed)
	tasks := []Task{
		{Name: "bad", OnError: spec.OnErrorContinue, Attempt: fail("boom")},
		{Name: "child", Attempt: ok("")},
		{Name: "grandchild", Attempt: ok("")},
		{Name: "other", Attempt: func(context.Context, int) (Outcome, error) {
			<-badFailed // still running when bad fails
			return Outcome{}, nil
		}},
		{Name: "after-other", Attempt: ok("ran")},
	}
	res := Schedule(context.Background(), dag{1: {0}, 2: {1}, 4: {3}}, tasks, Options{Events: rec})
	m := byName(res)
	if res.Status != RunFailed {
		t.Fatal(res.Status)
	}
	if m["after-other"].Status != StatusOK || m["after-other"].Message != "ran" {
		t.Fatalf("other branches must keep going: %+v", m["after-other"])
	}
	if m["child"].SkipReason != "needs bad, which failed" || m["grandchild"].SkipReason != "needs child, which was skipped" {
		t.Fatalf("dependents: %+v %+v", m["child"], m["grandchild"])
	}
}

func TestSkipsSatisfyNeeds(t *testing.T) {
	tasks := []Task{
		{Name: "excluded", Skip: "when: vars.X == \"y\" is false", Attempt: fail("must not run")},
		{Name: "already-done", Attempt: func(context.Context, int) (Outcome, error) {
			return Outcome{Skipped: true, SkipReason: "skipIf installed: release exists"}, nil
		}},
		{Name: "after", Attempt: ok("ran")},
	}
	res := Schedule(context.Background(), dag{2: {0, 1}}, tasks, Options{})
	m := byName(res)
	if res.Status != RunOK || m["after"].Status != StatusOK {
		t.Fatalf("%s %+v", res.Status, res.Steps)
	}
	if m["excluded"].Status != StatusSkipped || m["excluded"].Attempts != 0 || m["excluded"].SkipReason == "" {
		t.Fatalf("excluded: %+v", m["excluded"])
	}
	if m["already-done"].Status != StatusSkipped || m["already-done"].Attempts != 1 || m["already-done"].SkipReason != "skipIf installed: release exists" {
		t.Fatalf("already-done: %+v", m["already-done"])
	}
}

func TestRetries(t *testing.T) {
	var calls atomic.Int32
	flaky := func(_ context.Context, attempt int) (Outcome, error) {
		calls.Add(1)
		if attempt < 2 {
			return Outcome{}, errors.New("not yet")
		}
		return Outcome{Message: "second time lucky"}, nil
	}
	rec := &recorder{}
	start := time.Now()
	res := Schedule(context.Background(), make(dag, 1), []Task{{Name: "flaky", Retries: 2, RetryDelay: 50 * time.Millisecond, Attempt: flaky}}, Options{Events: rec})
	if res.Status != RunOK || res.Steps[0].Attempts != 2 || calls.Load() != 2 {
		t.Fatalf("%+v", res.Steps[0])
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatal("the retry delay was not respected")
	}
	got := fmt.Sprint(rec.kinds("flaky"))
	if got != "[step-started step-retrying step-started step-succeeded]" {
		t.Fatalf("events %s", got)
	}
	// retries exhausted
	res = Schedule(context.Background(), make(dag, 1), []Task{{Name: "broken", Retries: 1, Attempt: fail("still broken")}}, Options{})
	if res.Steps[0].Status != StatusFailed || res.Steps[0].Attempts != 2 || res.Steps[0].Error != "still broken" {
		t.Fatalf("%+v", res.Steps[0])
	}
}

func TestTimeoutBoundsEachAttempt(t *testing.T) {
	var deadlines []time.Duration
	var mu sync.Mutex
	slow := func(ctx context.Context, _ int) (Outcome, error) {
		dl, _ := ctx.Deadline()
		mu.Lock()
		deadlines = append(deadlines, time.Until(dl))
		mu.Unlock()
		<-ctx.Done()
		return Outcome{}, ctx.Err()
	}
	res := Schedule(context.Background(), make(dag, 1), []Task{{Name: "slow", Timeout: 50 * time.Millisecond, Retries: 1, Attempt: slow}}, Options{})
	s := res.Steps[0]
	if s.Status != StatusFailed || s.Attempts != 2 || !strings.HasPrefix(s.Error, "timed out after 50ms") {
		t.Fatalf("%+v", s)
	}
	for _, d := range deadlines {
		if d > 50*time.Millisecond {
			t.Fatalf("attempt deadline %s exceeds the timeout", d)
		}
	}
}

// noted is an attempt's error that says what it left behind.
type noted struct{ error }

func (noted) InterruptNote() string { return "deleted Job ns/x, which was still running" }

// TestInterrupt: Ctrl-C is not a failure. The running step and the one
// waiting to retry are interrupted (with what they left behind), their
// dependents are skipped naming the interruption, nothing new starts.
func TestInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var startedOnce sync.Once
	tasks := []Task{
		{Name: "running", Attempt: func(ctx context.Context, _ int) (Outcome, error) {
			startedOnce.Do(func() { close(started) })
			<-ctx.Done()
			return Outcome{}, ctx.Err()
		}},
		{Name: "next", Attempt: fail("must not run")},
		{Name: "retrying", Retries: 5, RetryDelay: time.Hour, Attempt: fail("flaky")},
		{Name: "job", Attempt: func(ctx context.Context, _ int) (Outcome, error) {
			<-ctx.Done()
			return Outcome{}, noted{ctx.Err()}
		}},
		{Name: "after-job", Attempt: fail("must not run")},
		{Name: "later", Attempt: fail("must not run")},
	}
	var rec recorder
	// cancel once "running" runs and "retrying" waits for its next try:
	// the four roots start in any order
	waiting := make(chan struct{})
	var waitingOnce sync.Once
	sink := event.SinkFunc(func(e event.Event) {
		rec.Emit(e)
		if e.Step == "retrying" && e.Kind == event.StepRetrying {
			waitingOnce.Do(func() { close(waiting) })
		}
	})
	done := make(chan *Result)
	go func() { done <- Schedule(ctx, dag{1: {0}, 4: {3}, 5: {1}}, tasks, Options{Events: sink}) }()
	<-started
	<-waiting
	cancel()
	res := <-done
	m := byName(res)
	if res.Status != RunInterrupted {
		t.Fatal(res.Status)
	}
	if c := res.Counts(); c != (Counts{Interrupted: 3, Skipped: 3}) {
		t.Errorf("counts %+v", c)
	}
	for name, want := range map[string]string{
		"running":  "interrupted",
		"retrying": "interrupted while waiting to retry (attempt 1 failed: flaky)",
		"job":      "interrupted: deleted Job ns/x, which was still running",
	} {
		if m[name].Status != StatusInterrupted || m[name].Error != want {
			t.Errorf("%s: %+v, want interrupted with %q", name, m[name], want)
		}
		if k := rec.kinds(name); k[len(k)-1] != event.StepInterrupted {
			t.Errorf("%s: events %v", name, k)
		}
	}
	for name, want := range map[string]string{
		"next":      "needs running, which was interrupted",
		"after-job": "needs job, which was interrupted",
		"later":     "needs next, which was skipped",
	} {
		if m[name].Status != StatusSkipped || m[name].SkipReason != want {
			t.Errorf("%s: %+v, want skipped: %q", name, m[name], want)
		}
	}
}

// TestInterruptBeforeStart: steps the interruption kept from starting are
// skipped saying so.
func TestInterruptBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := Schedule(ctx, make(dag, 1), []Task{{Name: "a", Attempt: fail("must not run")}}, Options{})
	if res.Status != RunInterrupted || res.Steps[0].Status != StatusSkipped || res.Steps[0].SkipReason != "not run: the run was interrupted" {
		t.Fatalf("%s %+v", res.Status, res.Steps)
	}
}

// TestCancelAfterTheLastStep: a cancellation nothing noticed leaves the
// run's outcome alone.
func TestCancelAfterTheLastStep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	res := Schedule(ctx, make(dag, 1), []Task{{Name: "a", Attempt: func(context.Context, int) (Outcome, error) {
		cancel()
		return Outcome{Message: "done"}, nil
	}}}, Options{})
	if res.Status != RunOK || res.Steps[0].Status != StatusOK {
		t.Fatalf("%s %+v", res.Status, res.Steps)
	}
}

func TestPanicIsAFailure(t *testing.T) {
	res := Schedule(context.Background(), make(dag, 1), []Task{{Name: "p", Type: "job", Attempt: func(context.Context, int) (Outcome, error) { panic("nil map") }}}, Options{})
	if res.Steps[0].Status != StatusFailed || !strings.Contains(res.Steps[0].Error, "internal error in the job step: nil map") {
		t.Fatalf("%+v", res.Steps[0])
	}
}

// BenchmarkStartGap measures the time from a step's last need finishing
// to the step starting (target: under 10 ms), over a 200-step chain.
func BenchmarkStartGap(b *testing.B) {
	const n = 200
	nodes := make([]plan.Node, n)
	for j := range nodes {
		nodes[j].Name = fmt.Sprint(j)
		if j > 0 {
			nodes[j].Needs = []string{fmt.Sprint(j - 1)}
		}
	}
	g, _ := plan.NewGraph(nodes)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		ends := make([]time.Time, n)
		starts := make([]time.Time, n)
		tasks := make([]Task, n)
		for j := range tasks {
			tasks[j] = Task{Name: fmt.Sprint(j), Attempt: func(context.Context, int) (Outcome, error) {
				starts[j] = time.Now()
				ends[j] = time.Now()
				return Outcome{}, nil
			}}
		}
		Schedule(context.Background(), g, tasks, Options{})
		for j := 1; j < n; j++ {
			total += starts[j].Sub(ends[j-1])
		}
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*(n-1)), "ns/gap")
}
