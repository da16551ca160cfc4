// Package job is the job: step: run a container to completion as a
// batch/v1 Job named after the step, labelled as khook's, replaced on every
// run, with backoffLimit 0, restartPolicy Never and the step timeout as its
// activeDeadlineSeconds. A failed Job's error carries the reason and, as
// every wait's, the cause core/diagnose finds (its pod's exit code and last
// log lines, or why no pod was created).
package job

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"khook.io/core/event"
	"khook.io/core/kube"
	"khook.io/core/objects"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/waiter"
)

// Labels and annotations khook puts on its Jobs and their pods, besides
// objects.LabelManagedBy.
const (
	LabelSpec      = "khook.io/spec" // the spec's metadata.name, when it is a valid label value
	LabelStep      = "khook.io/step"
	AnnotationSpec = "khook.io/spec" // the spec's name, always
)

// Executor runs job: steps. It implements step.Executor, step.Planner
// and step.Destroyer.
type Executor struct{}

// New returns the job: executor.
func New() *Executor { return &Executor{} }

// ref is the step's Job.
type ref struct {
	ns, name string
	subject  string // "Job ns/name"
	job      *Job   // the step's block
}

func jobRef(req *step.Request) (ref, error) {
	j := spec.BlockOf[Job](req.Step)
	if j == nil {
		return ref{}, fmt.Errorf("step %s is not a job step", req.Step.Name)
	}
	ns := req.Namespace(j.Namespace)
	return ref{ns: ns, name: req.Step.Name, subject: objects.Ref{Kind: "Job", Namespace: ns, Name: req.Step.Name}.Path(), job: j}, nil
}

// Owned reports whether khook manages j.
func Owned(j *batchv1.Job) bool { return j.Labels[objects.LabelManagedBy] == objects.ManagedBy }

// Succeeded reports whether j completed successfully.
func Succeeded(j *batchv1.Job) bool { return conditionTrue(j, batchv1.JobComplete) }

func conditionTrue(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func notOwned(r ref) error {
	return fmt.Errorf("%s exists and is not managed by khook (no %s: %s label): khook never replaces a Job it does not own; delete it or rename the step",
		r.subject, objects.LabelManagedBy, objects.ManagedBy)
}

// Build returns the Job a step runs: named after the step, in ns, with
// activeDeadlineSeconds from timeout (rounded up; none when timeout is 0).
func Build(st *spec.Step, specName, ns string, timeout time.Duration) *batchv1.Job {
	j := spec.BlockOf[Job](st)
	labels := map[string]string{objects.LabelManagedBy: objects.ManagedBy, LabelStep: st.Name}
	if specName != "" && len(validation.IsValidLabelValue(specName)) == 0 {
		labels[LabelSpec] = specName
	}
	podLabels := make(map[string]string, len(labels))
	for k, v := range labels {
		podLabels[k] = v
	}
	names := make([]string, 0, len(j.Env))
	for k := range j.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	env := make([]corev1.EnvVar, 0, len(names))
	for _, k := range names {
		env = append(env, corev1.EnvVar{Name: k, Value: j.Env[k]})
	}
	if len(env) == 0 {
		env = nil
	}
	backoff := int32(0)
	job := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        st.Name,
			Namespace:   ns,
			Labels:      labels,
			Annotations: map[string]string{AnnotationSpec: specName, objects.AnnotationCreatedBy: specName},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: j.ServiceAccount,
					Containers: []corev1.Container{{
						Name:    st.Name,
						Image:   j.Image,
						Command: j.Command,
						Args:    j.Args,
						Env:     env,
					}},
				},
			},
		},
	}
	if timeout > 0 {
		secs := int64(math.Ceil(timeout.Seconds()))
		job.Spec.ActiveDeadlineSeconds = &secs
	}
	return job
}

// Run creates the step's Job (replacing the previous run's) and waits for
// it to complete; skipIf: succeeded skips when the Job already completed.
func (e *Executor) Run(ctx context.Context, req *step.Request) (result step.Outcome, err error) {
	r, err := jobRef(req)
	if err != nil {
		return step.Outcome{}, err
	}
	jobs := req.Kube.Typed.BatchV1().Jobs(r.ns)
	m := req.Objects()
	if r.job.CreateNamespace {
		// a user who may neither read nor create namespaces may still
		// run Jobs in this one: the Job's creation says whether it is there
		var unknown *objects.NamespaceUnknownError
		if _, err := m.EnsureNamespace(ctx, r.ns); err != nil && !errors.As(err, &unknown) {
			return step.Outcome{}, err
		}
	}
	old, err := jobs.Get(ctx, r.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		old = nil
	case err != nil:
		return step.Outcome{}, fmt.Errorf("%s: %w", r.subject, err)
	case !Owned(old):
		return step.Outcome{}, notOwned(r)
	case r.job.SkipIf == SkipIfSucceeded && Succeeded(old):
		return step.Outcome{Skipped: true, SkipReason: r.subject + " already completed successfully" + completedAt(old)}, nil
	}
	if old != nil {
		req.Logf("replacing the previous run's %s", r.subject)
		if err := deleteAndWait(ctx, m, r, old.UID); err != nil {
			return step.Outcome{}, err
		}
	}
	endCreate := event.Phase(ctx, event.PhaseApply, "create Job "+r.ns+"/"+req.Step.Name)
	created, err := jobs.Create(ctx, Build(req.Step, req.SpecName, r.ns, req.Timeout), metav1.CreateOptions{FieldManager: m.FieldManager()})
	endCreate(err)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		// interrupted while the create was in flight: the server may have
		// created the Job all the same
		return step.Outcome{}, stopCreateOnInterrupt(ctx, req, r, err)
	}
	if err != nil {
		if apierrors.IsNotFound(err) && !r.job.CreateNamespace {
			return step.Outcome{}, fmt.Errorf("%s: namespace %s does not exist (set createNamespace: true, or order this step after the one creating it): %w", r.subject, r.ns, err)
		}
		return step.Outcome{}, fmt.Errorf("create %s: %w", r.subject, err)
	}
	began := time.Now()
	err = e.wait(ctx, req, m, r, created)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		// interrupted (Ctrl-C), not timed out: khook owns the Job it
		// just created, so it does not leave it running
		return step.Outcome{}, stopOnInterrupt(ctx, req, r, created.UID, err)
	}
	if err != nil {
		return step.Outcome{}, err
	}
	return step.Outcome{Message: fmt.Sprintf("%s completed (in %s)", r.subject, time.Since(began).Round(time.Millisecond)), Changed: true}, nil
}

func completedAt(j *batchv1.Job) string {
	if j.Status.CompletionTime == nil {
		return ""
	}
	return " at " + j.Status.CompletionTime.UTC().Format(time.RFC3339)
}

// failure is a Job that ended Failed.
type failure struct {
	reason, message string
}

func (f *failure) Error() string { return "failed" }

// wait waits for created to complete or fail.
func (e *Executor) wait(ctx context.Context, req *step.Request, m *objects.Manager, r ref, created *batchv1.Job) error {
	mapping, err := jobsMapping(ctx, m)
	if err != nil {
		return err
	}
	err = waiter.Wait(ctx, req.Kube, waiter.Options{
		Targets:  []waiter.Target{{Mapping: mapping, Namespace: r.ns, Name: r.name, Deleted: deleted(r.subject, created.UID)}},
		What:     "completion",
		Check:    check(created.UID),
		Progress: req.Progress,
		Redact:   req.Redactor.String,
	})
	var f *failure
	switch {
	case errors.As(err, &f):
		// the waiter diagnosed the failed Job: how its pod's container
		// ended and its last log lines, or why no pod was created
		msg := r.subject + " failed"
		if f.reason != "" {
			msg += " (" + waiter.ReasonMessage(f.reason, f.message) + ")"
		}
		if cause := waiter.CauseOf(err); cause != nil {
			msg += "; cause: " + cause.Detail()
		}
		return errors.New(msg)
	case err != nil && errors.Is(err, context.DeadlineExceeded):
		if d := created.Spec.ActiveDeadlineSeconds; d != nil {
			return step.WithCause(err.Error()+fmt.Sprintf("; its activeDeadlineSeconds (%d) stops it in-cluster", *d), err)
		}
	}
	return err
}

func jobsMapping(ctx context.Context, m *objects.Manager) (*meta.RESTMapping, error) {
	return m.Mapping(ctx, batchv1.SchemeGroupVersion.WithKind("Job"))
}

// check is the waiter check of one Job: Complete is ready, Failed (or
// FailureTarget, which precedes it) ends the wait with a *failure.
func check(uid types.UID) waiter.CheckFunc {
	return func(u *unstructured.Unstructured) (bool, string, error) {
		if u.GetUID() != uid {
			return false, "", errors.New("the Job was replaced by another of the same name while khook waited for it")
		}
		var j batchv1.Job
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &j); err != nil {
			return false, "", fmt.Errorf("decode Job: %w", err)
		}
		for _, c := range j.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				return true, "complete", nil
			case batchv1.JobFailed, batchv1.JobFailureTarget:
				return false, "", &failure{reason: c.Reason, message: c.Message}
			}
		}
		active := int32(0)
		if j.Status.Active > 0 {
			active = j.Status.Active
		}
		if active == 0 && j.Status.Failed == 0 && j.Status.Succeeded == 0 {
			return false, "no pod running yet", nil
		}
		return false, fmt.Sprintf("%d active, %d succeeded, %d failed", active, j.Status.Succeeded, j.Status.Failed), nil
	}
}

// deleted is the waiter's judgement of the Job gone while khook waited for
// it (another writer deleted it, or a policy that cleans up Jobs): by its
// final state when the delete was seen (complete is done, failed fails),
// and an error otherwise, since nothing more will ever say how it ended.
func deleted(subject string, uid types.UID) waiter.CheckFunc {
	return func(last *unstructured.Unstructured) (bool, string, error) {
		if last == nil {
			return false, "", errors.New(subject + " was deleted while khook waited for it, before its outcome was seen")
		}
		ok, cur, err := check(uid)(last)
		if ok || err != nil {
			return ok, cur, err
		}
		return false, "", fmt.Errorf("%s was deleted while khook waited for it, unfinished (%s)", subject, cur)
	}
}

// interruptTimeout bounds the cleanup of an interrupted attempt, which
// runs after the run's context is cancelled: within it, the cleanup ends
// kube.Grace after the attempt's context did (cleanupContext).
const interruptTimeout = 10 * time.Second

// cleanupContext is what an interrupted attempt cleans up within: not
// cancelled with ctx, but ended kube.Grace after it (so that Ctrl-C
// during an API-server outage does not wait for it) and interruptTimeout
// at most.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	bound, unbind := kube.Bind(context.WithoutCancel(ctx), ctx)
	dctx, cancel := context.WithTimeout(bound, interruptTimeout)
	return dctx, func() { cancel(); unbind() }
}

// stopOnInterrupt deletes the Job of uid that an interrupted attempt
// created (its pods in the background, without waiting), unless it has
// finished, and returns err with a note saying what became of the Job.
func stopOnInterrupt(ctx context.Context, req *step.Request, r ref, uid types.UID, err error) error {
	dctx, cancel := cleanupContext(ctx)
	defer cancel()
	var note string
	j, gerr := req.Kube.Typed.BatchV1().Jobs(r.ns).Get(dctx, r.name, metav1.GetOptions{})
	switch {
	case gerr == nil && j.UID == uid && (Succeeded(j) || conditionTrue(j, batchv1.JobFailed)):
		note = r.subject + " had already finished: left in place"
	case gerr == nil && j.UID != uid, apierrors.IsNotFound(gerr):
		note = r.subject + " is already gone"
	default:
		m := req.Objects()
		mapping, derr := jobsMapping(dctx, m)
		if derr == nil {
			_, derr = m.DeleteUID(dctx, mapping, r.ns, r.name, uid)
		}
		switch {
		case derr == nil:
			note = "deleted " + r.subject + ", which was still running (its pod is deleted with it)"
		case apierrors.IsNotFound(derr):
			note = r.subject + " is already gone"
		default:
			note = r.subject + " left running: it could not be deleted: " + kube.Reason(derr)
		}
	}
	return step.Interrupted(note, err)
}

// stopCreateOnInterrupt handles an attempt interrupted while it created
// its Job: the previous run's Job is gone by then, so a Job of the name
// that khook owns is the one this attempt created, and is stopped as
// stopOnInterrupt stops it.
func stopCreateOnInterrupt(ctx context.Context, req *step.Request, r ref, err error) error {
	dctx, cancel := cleanupContext(ctx)
	defer cancel()
	j, gerr := req.Kube.Typed.BatchV1().Jobs(r.ns).Get(dctx, r.name, metav1.GetOptions{})
	switch {
	case gerr == nil && Owned(j):
		return stopOnInterrupt(ctx, req, r, j.UID, err)
	case gerr == nil, apierrors.IsNotFound(gerr):
		return step.Interrupted(r.subject+" was not created", err)
	default:
		return step.Interrupted(r.subject+" may have been created and left running: "+kube.Reason(gerr), err)
	}
}

// deleteAndWait deletes the Job of uid (its pods in the background) and
// waits until it is gone.
func deleteAndWait(ctx context.Context, m *objects.Manager, r ref, uid types.UID) error {
	mapping, err := jobsMapping(ctx, m)
	if err != nil {
		return err
	}
	t, err := m.DeleteUID(ctx, mapping, r.ns, r.name, uid)
	switch {
	case apierrors.IsNotFound(err):
		return nil // gone, or replaced, already
	case err != nil:
		return fmt.Errorf("delete %s: %w", r.subject, err)
	}
	return m.WaitGone(ctx, []waiter.Target{t}, nil)
}

// Plan predicts run, or skip when skipIf: succeeded holds; unknown when
// the namespace does not exist yet and the step does not create it.
func (e *Executor) Plan(ctx context.Context, req *step.Request) (result step.Prediction, err error) {
	r, err := jobRef(req)
	if err != nil {
		return step.Prediction{}, err
	}
	ok, err := req.Objects().NamespaceExists(ctx, r.ns)
	switch {
	case err != nil && !apierrors.IsForbidden(err):
		return step.Prediction{}, err
	case err == nil && !ok && r.job.CreateNamespace:
		return step.Prediction{Action: step.ActionRun, Reason: "create namespace " + r.ns + " and run " + r.subject}, nil
	case err == nil && !ok:
		return step.Prediction{Action: step.ActionUnknown, Reason: "namespace " + r.ns + " does not exist yet"}, nil
	}
	old, err := req.Kube.Typed.BatchV1().Jobs(r.ns).Get(ctx, r.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return step.Prediction{Action: step.ActionRun, Reason: "run " + r.subject}, nil
	case err != nil:
		return step.Prediction{}, fmt.Errorf("%s: %w", r.subject, err)
	case !Owned(old):
		return step.Prediction{}, notOwned(r)
	case r.job.SkipIf == SkipIfSucceeded && Succeeded(old):
		return step.Prediction{Action: step.ActionSkip, Reason: r.subject + " already completed successfully" + completedAt(old)}, nil
	}
	return step.Prediction{Action: step.ActionRun, Reason: "replace the previous run's " + r.subject}, nil
}

// Destroy deletes the step's Job (never one khook does not own) and waits
// until it is gone; a Job already gone is success. With the plan shown
// and confirmed (req.Planned), it carries out that plan: the Job it read
// is deleted, unless it changed since (a *objects.StaleError); nothing is
// read again.
func (e *Executor) Destroy(ctx context.Context, req *step.Request) (result step.Outcome, err error) {
	r, err := jobRef(req)
	if err != nil {
		return step.Outcome{}, err
	}
	var planned *plannedJob
	if req.Planned != nil {
		planned, _ = req.Planned.Carry.(*plannedJob)
	} else if planned, err = readJob(ctx, req, r); err != nil {
		return step.Outcome{}, err
	}
	switch {
	case planned == nil || planned.job == nil:
		return step.Outcome{Message: r.subject + " already gone"}, nil
	case !planned.owned:
		return step.Outcome{Skipped: true, SkipReason: r.subject + " is not managed by khook: left alone"}, nil
	}
	m := req.Objects()
	t, err := m.DeletePlanned(ctx, planned.mapping, planned.job)
	switch {
	case apierrors.IsNotFound(err):
		return step.Outcome{Message: r.subject + " already gone"}, nil
	case err != nil:
		return step.Outcome{}, fmt.Errorf("delete %s: %w", r.subject, err)
	}
	if err := m.WaitGone(ctx, []waiter.Target{t}, nil); err != nil {
		return step.Outcome{}, err
	}
	return step.Outcome{Message: r.subject + " deleted", Changed: true}, nil
}

// plannedJob is the step's Job as a destroy plan read it (job nil: gone).
type plannedJob struct {
	mapping *meta.RESTMapping
	job     *unstructured.Unstructured
	owned   bool
}

// readJob reads the step's Job for a destroy plan.
func readJob(ctx context.Context, req *step.Request, r ref) (*plannedJob, error) {
	mapping, err := jobsMapping(ctx, req.Objects())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.subject, err)
	}
	u, err := req.Objects().Client(mapping, r.ns).Get(ctx, r.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return &plannedJob{mapping: mapping}, nil
	case err != nil:
		return nil, fmt.Errorf("%s: %w", r.subject, err)
	}
	var j batchv1.Job
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &j); err != nil {
		return nil, fmt.Errorf("%s: %w", r.subject, err)
	}
	return &plannedJob{mapping: mapping, job: u, owned: Owned(&j)}, nil
}

// PlanDestroy says what Destroy would do with the step's Job, changing
// nothing.
func (e *Executor) PlanDestroy(ctx context.Context, req *step.Request) (p step.DestroyPlan, err error) {
	r, err := jobRef(req)
	if err != nil {
		return p, err
	}
	it := step.DestroyItem{Object: r.subject}
	planned, err := readJob(ctx, req, r)
	switch {
	case err != nil:
		return p, err
	case planned.job == nil:
		it.Action, it.Reason = step.DestroyGone, "already gone"
	case !planned.owned:
		it.Action, it.Reason = step.DestroyLeave, "not managed by khook"
	default:
		it.Action, it.Reason = step.DestroyDelete, "khook's Job"
	}
	p.Items = append(p.Items, it)
	p.Carry = planned
	return p, nil
}
