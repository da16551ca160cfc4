package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"khook.io/core/event"
	"khook.io/core/load"
	"khook.io/core/plan"
	"khook.io/core/redact"
	"khook.io/core/render"
	"khook.io/core/run"
	"khook.io/core/state"
	"khook.io/core/step"
)

// Embedded is khook's engine for a program that embeds it instead of
// running its commands (the Terraform provider): plan, apply, destroy and
// the state record's status of a loaded spec on one cluster, returning
// structured results. It takes the same code paths as the commands
// (connection checked up front, the state record's run lock held by apply
// and destroy, the record written as the run goes); nothing is printed
// but progress and warnings, redacted, to Log.
type Embedded struct {
	// Getter is the cluster's connection.
	Getter genericclioptions.RESTClientGetter
	// Steps builds the step executors.
	Steps func() (*step.Registry, error)
	// Redactor is the run's: it knows every secret the spec uses.
	Redactor *redact.Redactor
	// Log receives progress lines, notes and the API server's warnings;
	// nil: discarded.
	Log io.Writer
	// LockTimeout is how long apply and destroy wait for the run lock
	// another run holds (0: fail at once).
	LockTimeout time.Duration
	// Parallelism is how many steps run at once (0: no limit).
	Parallelism int
	// FieldManager is the field manager of every write the steps make,
	// helm's included (apply's --field-manager; "": the defaults).
	FieldManager string
}

// getterConnection is a Connection of a ready RESTClientGetter (no flags).
type getterConnection struct {
	getter genericclioptions.RESTClientGetter
}

func (c getterConnection) AddFlags(*pflag.FlagSet) {}

func (c getterConnection) RESTClientGetter() genericclioptions.RESTClientGetter { return c.getter }

func (e *Embedded) log() io.Writer {
	if e.Log == nil {
		return io.Discard
	}
	return e.Redactor.Writer(e.Log)
}

func (e *Embedded) clusters() *Clusters {
	var conn Connection
	if e.Getter != nil {
		conn = getterConnection{getter: e.Getter}
	}
	return &Clusters{Connection: conn, Steps: e.Steps, Redactor: e.Redactor, Warnings: e.log()}
}

// Plan is doc's live plan on the cluster, as plan's; with a state record,
// also its status (nil when the spec has none, or no record exists yet).
// An unreachable cluster is an error: the caller decides whether to plan
// offline (doc.OfflinePlan) instead.
func (e *Embedded) Plan(ctx context.Context, doc *load.Document) (*plan.Plan, *state.Status, error) {
	s, err := e.clusters().connect(ctx, doc)
	if err != nil {
		return nil, nil, err
	}
	printLockNote(ctx, e.log(), s.clients.Typed, doc)
	p := s.livePlan(ctx)
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("plan stopped (%v) before every step was assessed", context.Cause(ctx))
	}
	markHashCannotSee(p, doc, e.clusters())
	if !doc.Spec.State.IsEnabled() {
		return p, nil, nil
	}
	st, err := readStatus(ctx, e.Redactor, doc, s.clients.Typed, e.clusters())
	if err != nil {
		return nil, nil, err
	}
	return p, st, nil
}

// Status is doc's state record compared with the spec, as status shows it:
// nil when there is no record yet. The spec must have a state: block.
func (e *Embedded) Status(ctx context.Context, doc *load.Document) (*state.Status, error) {
	if err := needsState(doc); err != nil {
		return nil, err
	}
	c := e.clusters()
	clients, err := c.clients(ctx)
	if err != nil {
		return nil, err
	}
	return readStatus(ctx, e.Redactor, doc, clients.Typed, c)
}

// Apply runs doc's steps as apply does.
func (e *Embedded) Apply(ctx context.Context, doc *load.Document) (*run.Result, error) {
	return e.run(ctx, "apply", doc)
}

// Destroy undoes doc's steps as destroy does.
func (e *Embedded) Destroy(ctx context.Context, doc *load.Document) (*run.Result, error) {
	return e.run(ctx, "destroy", doc)
}

// run is RunOptions.Run on one cluster, returning the result instead of
// printing it. The error is the run's when it could not start, or the
// state record's or the lock's when the run stopped for them; a step that
// failed is in the result (Status not RunOK), not an error.
func (e *Embedded) run(ctx context.Context, command string, doc *load.Document) (*run.Result, error) {
	s, err := e.clusters().connect(ctx, doc)
	if err != nil {
		return nil, err
	}
	s.fieldManager = e.FieldManager
	res, stateErr, err := s.execute(ctx, command, e.LockTimeout, e.Parallelism, e.log(), func(ex *execution) (event.Sink, func()) {
		p := render.NewProgress(e.log(), stepInfos(s.doc, ex.order), render.ProgressOptions{Verb: command, Redactor: e.Redactor})
		return p, p.Close
	})
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.Join(errors.New("run returned no result"), stateErr)
	}
	return res, stateErr
}
