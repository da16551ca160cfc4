package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"

	"khook.io/core/event"
	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/plan"
	"khook.io/core/redact"
	"khook.io/core/render"
	"khook.io/core/run"
	"khook.io/core/step"
)

// checkTimeout bounds the up-front check of the cluster (credential
// plugins included) and the other calls made before the steps run, unless
// the connection sets a request timeout (kubectl's --request-timeout).
const checkTimeout = kube.DefaultCheckTimeout

// session is one command's connection to the cluster for one spec.
type session struct {
	red       *redact.Redactor
	doc       *load.Document
	clients   *kube.Clients
	registry  *step.Registry
	http      *http.Client
	namespace string // where the spec leaves a namespace to its default
	// sink receives the run's events (progress lines of the executors).
	sink event.Sink
	// run identifies the run to its steps (see takeLock).
	run step.Run
	// sel is the run's --steps, --no-needs and --replace (select.go); nil:
	// every step.
	sel *selection
	// forceCRDs is destroy's --force-crds.
	forceCRDs bool
	// fieldManager is --field-manager: the field manager of every write
	// ("": khook's, and helm's for helm's writes).
	fieldManager string
	// warnings receives each step's warnings (standard error), each once
	// per step (warned); notes, when set (-v 1 and more), the NOTES of the
	// releases helm steps install or upgrade.
	warnings io.Writer
	notes    io.Writer
	warned   sync.Map // step name + "\x00" + text → struct{}
}

// warn writes step's warning text once per step, redacted, as kubectl
// writes the API server's ("Warning: ..."), naming the step.
func (s *session) warn(stepName string) func(string) {
	if s.warnings == nil {
		return nil
	}
	return func(text string) {
		text = strings.TrimSpace(s.red.String(text))
		if text == "" {
			return
		}
		if _, seen := s.warned.LoadOrStore(stepName+"\x00"+text, struct{}{}); seen {
			return
		}
		fmt.Fprintf(s.warnings, "Warning: %s: %s\n", stepName, text)
	}
}

// releaseNotes writes a release's NOTES under a header, redacted; nil
// without a notes writer.
func (s *session) releaseNotes() func(release, text string) {
	if s.notes == nil {
		return nil
	}
	return func(release, text string) {
		text = strings.TrimRight(s.red.String(text), "\n")
		if strings.TrimSpace(text) == "" {
			return
		}
		fmt.Fprintf(s.notes, "NOTES of %s:\n%s\n", release, text)
	}
}

// preflight bounds the calls made before the steps run (the state record
// is read and marked) as the up-front check is bounded.
func (s *session) preflight(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := checkTimeout
	if t := s.clients.Config.Timeout; t > 0 {
		timeout = t
	}
	return context.WithTimeout(ctx, timeout)
}

// defaultNamespace is the connection's namespace (-n, else the kubeconfig
// context's, else "default"), as kubectl and helm use it.
func defaultNamespace(getter genericclioptions.RESTClientGetter) string {
	ns, _, err := getter.ToRawKubeConfigLoader().Namespace()
	if err != nil || ns == "" {
		return "default"
	}
	return ns
}

// request builds the request for step i, attempt n.
func (s *session) request(i, attempt int, timeout time.Duration, sink event.Sink) *step.Request {
	st := &s.doc.Spec.Steps[i]
	return &step.Request{
		Step:             st,
		SpecName:         s.doc.Spec.Metadata.Name,
		BaseDir:          s.doc.BaseDir,
		Attempt:          attempt,
		Timeout:          timeout,
		DefaultNamespace: s.namespace,
		Kube:             s.clients,
		HTTP:             s.http,
		Redactor:         s.red,
		Run:              s.run,
		ForceCRDs:        s.forceCRDs,
		Replace:          s.forcedStep(i),
		FieldManager:     s.fieldManager,
		Warn:             s.warn(st.Name),
		Notes:            s.releaseNotes(),
		Log: func(format string, args ...any) {
			sink.Emit(event.Event{Kind: event.StepProgress, Time: time.Now(), Step: st.Name, Type: st.Type(), Message: fmt.Sprintf(format, args...)})
		},
	}
}

// stepInfos names doc's steps in order for a renderer.
func stepInfos(doc *load.Document, order []int) []render.StepInfo {
	infos := make([]render.StepInfo, len(order))
	for k, i := range order {
		st := &doc.Spec.Steps[i]
		infos[k] = render.StepInfo{Name: st.Name, Type: st.Type()}
	}
	return infos
}

// settings returns step i's effective scheduling fields.
func (s *session) settings(i int) plan.Settings { return s.doc.Settings(i) }

// finish prints the run's result (stateErr is the error of the state
// record's last write) and returns the command's error: nil when every
// step succeeded or was skipped.
func (s *session) finish(out io.Writer, command, output string, res *run.Result, stateErr error) error {
	name := s.doc.Spec.Metadata.Name
	var err error
	switch output {
	case "json":
		err = render.JSON(out, render.Report(name, command, res))
	case "junit":
		cr := render.ClusterRun{Context: s.clusterName(), Status: res.Status, Result: res, Duration: res.Duration, Started: time.Now().Add(-res.Duration)}
		if stateErr != nil {
			cr.Err = stateErr.Error()
		}
		err = render.JUnit(out, name, command, []render.ClusterRun{cr}, res.Duration, s.red)
	default:
		err = render.Summary(out, name, command, res)
	}
	if err != nil {
		return err
	}
	if res.Status != run.RunOK {
		return &ExitError{Code: ExitFailed, Silent: true}
	}
	return nil
}

// clusterName names the session's cluster in reports: its kubeconfig
// context, else its server.
func (s *session) clusterName() string {
	if c := s.clients.Identity.Context; c != "" {
		return c
	}
	return s.clients.Server
}
