package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"khook.io/core/engine"
	"khook.io/core/event"
	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/plan"
	"khook.io/core/redact"
	"khook.io/core/render"
	"khook.io/core/run"
	"khook.io/core/state"
	"khook.io/core/steps/builtin"
	"khook.io/core/tracing"
)

// Default timeouts of the operations, on top of the spec's own per step.
const (
	defaultCreateTimeout = 60 * time.Minute
	defaultDeleteTimeout = 30 * time.Minute
)

// privateSecretNames is the private-state key of the secrets' names (never
// their values): Read and Delete load the spec with placeholders for them.
const privateSecretNames = "secret_names"

type specResource struct{}

func newSpecResource() resource.Resource { return &specResource{} }

var (
	_ resource.ResourceWithModifyPlan  = (*specResource)(nil)
	_ resource.ResourceWithImportState = (*specResource)(nil)
)

func (r *specResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_spec"
}

func (r *specResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	str := func(desc string, sensitive bool) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, Sensitive: sensitive, Description: desc}
	}
	resp.Schema = schema.Schema{
		Description: "A khook spec applied to a cluster: plan is khook's plan (live when the connection is known and reachable, offline otherwise), apply is khook's apply, destroy khook's destroy.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The state record's namespace/name with a state: block, else spec/<metadata.name>.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"spec":     schema.StringAttribute{Required: true, Description: "The spec's YAML text (file(...) or templatefile(...))."},
			"base_dir": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("."), Description: "The folder the spec's relative paths (charts, files, kustomizations) are relative to; default: the working directory."},
			"vars":     schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "The spec's variables (as --set NAME=value)."},
			"secrets": schema.MapAttribute{Optional: true, Sensitive: true, WriteOnly: true, ElementType: types.StringType,
				Description: "The spec's secret variables (as KHOOK_SECRET_NAME): write-only, never stored in the plan or state, redacted from every message. Change secrets_version to apply changed values."},
			"secrets_version":   schema.StringAttribute{Optional: true, Description: "Change it when secrets change: a write-only value cannot be compared."},
			"field_manager":     schema.StringAttribute{Optional: true, Description: "The field manager of every write the steps make, helm's included (the CLI's --field-manager); default: khook's \"khook\", and \"helm\" for helm's writes. Changing it alone runs nothing."},
			"destroy_on_delete": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true), Description: "false: deleting the resource forgets it without touching the cluster."},
			"steps": schema.ListNestedAttribute{Computed: true, Description: "khook's plan, step by step (name, type, action, reason); after apply, the plan applied, refreshed from the state record when the spec has one.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Computed: true}, "type": schema.StringAttribute{Computed: true},
					"action": schema.StringAttribute{Computed: true}, "reason": schema.StringAttribute{Computed: true},
				}}},
		},
		Blocks: map[string]schema.Block{
			"kubernetes": schema.SingleNestedBlock{
				Description: "The cluster's connection; any attribute may be unknown at plan time (khook then plans offline).",
				Attributes: map[string]schema.Attribute{
					"host":                   str("The API server's URL.", false),
					"token":                  str("A bearer token.", true),
					"cluster_ca_certificate": str("PEM of the API server's CA.", false),
					"client_certificate":     str("PEM of a client certificate.", false),
					"client_key":             str("PEM of the client certificate's key.", true),
					"config_path":            str("A kubeconfig file (without it none is read).", false),
					"config_context":         str("The kubeconfig's context to use.", false),
				},
				Blocks: map[string]schema.Block{
					"exec": schema.SingleNestedBlock{
						Description: "A client-go credential plugin.",
						Attributes: map[string]schema.Attribute{
							"api_version": str("The plugin's client.authentication.k8s.io version.", false),
							"command":     str("The plugin's command.", false),
							"args":        schema.ListAttribute{Optional: true, ElementType: types.StringType},
							"env":         schema.MapAttribute{Optional: true, ElementType: types.StringType},
						},
					},
				},
			},
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
		},
	}
}

// parallelism is how many steps apply and destroy run at once (the CLI's
// default).
const parallelism = 16

// connect connects khook's engine to the cluster of c for doc: progress,
// notes and the API server's warnings go to standard error (Terraform's
// log), redacted.
func connect(ctx context.Context, c connection, doc *load.Document, red *redact.Redactor, fieldManager types.String) (*engine.Cluster, error) {
	return connectTraced(ctx, c, doc, red, fieldManager, nil, "")
}

// connectTraced is connect with the run's events going to spans (nil:
// not traced) and the trace's id kept in the state record.
func connectTraced(ctx context.Context, c connection, doc *load.Document, red *redact.Redactor, fieldManager types.String, spans *tracing.Sink, traceID string) (*engine.Cluster, error) {
	log := red.Writer(os.Stderr)
	e := &engine.Engine{Steps: builtin.Registry, Redactor: red}
	t := engine.Target{Getter: newGetter(c), Warnings: log, Notes: render.Notes(log)}
	if spans != nil {
		t.Events = spans
	}
	return e.Connect(ctx, doc, t, engine.Options{FieldManager: fieldManager.ValueString(), TraceID: traceID})
}

// callerSpan is the span the provider's call belongs to: one in ctx, or
// the W3C trace context in the gRPC call's metadata (a Terraform or
// OpenTofu whose plugin client propagates it); invalid when neither
// (tracing.Start then reads TRACEPARENT from the environment).
func callerSpan(ctx context.Context) oteltrace.SpanContext {
	if sc := oteltrace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc
	}
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return oteltrace.SpanContext{}
	}
	carrier := propagation.MapCarrier{}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v := md.Get(k); len(v) > 0 {
			carrier[k] = v[0]
		}
	}
	return oteltrace.SpanContextFromContext(propagation.TraceContext{}.Extract(ctx, carrier))
}

// runOn runs command (apply or destroy, which Terraform confirmed: it does
// not ask) on the cluster of c, as the CLI's apply and destroy --yes do:
// the run lock held, the record written as the run goes. A step that
// failed is in the result; the error says the run could not start, or
// the record's or the lock's error once it did.
func runOn(ctx context.Context, command engine.Command, c connection, doc *load.Document, red *redact.Redactor, fieldManager types.String) (res *run.Result, err error) {
	log := red.Writer(os.Stderr)
	defer func() { _ = log.Flush() }()
	// traced as the CLI's runs are, when the provider's environment (which
	// Terraform passes on) says so, a child of the caller's span
	tr, err := tracing.Start(ctx, tracing.Options{Command: string(command), Redactor: red, Stderr: log, Parent: callerSpan(ctx)})
	if err != nil {
		return nil, err
	}
	spans := tr.Cluster("", false)
	tr.SetSpec(doc.Spec.Metadata.Name)
	defer func() {
		status, code := "", 0
		if res != nil {
			status = res.Status
		}
		if err != nil || status != run.RunOK {
			code = 1
		}
		spans.End(status, err)
		if tr != nil {
			fmt.Fprintf(log, "Trace %s: %s.\n", tr.ID(), tr.Describe())
		}
		tr.End(code, err)
	}()
	cl, err := connectTraced(ctx, c, doc, red, fieldManager, spans, tr.ID())
	if err != nil {
		return nil, err
	}
	tr.SetContext(cl.Name())
	steps := make([]tracing.StepInfo, len(doc.Spec.Steps))
	for i := range doc.Spec.Steps {
		steps[i] = tracing.StepInfo{Name: doc.Spec.Steps[i].Name, Target: doc.Spec.Steps[i].Summary()}
	}
	spans.Steps(steps)
	return cl.Execute(ctx, command, engine.RunOptions{Parallelism: parallelism, Progress: func(order []int) (event.Sink, func()) {
		infos := make([]render.StepInfo, len(order))
		for k, i := range order {
			infos[k] = render.StepInfo{Name: doc.Spec.Steps[i].Name, Type: doc.Spec.Steps[i].Type()}
		}
		p := render.NewProgress(log, infos, render.ProgressOptions{Verb: string(command), Redactor: red})
		return p, p.Close
	}})
}

// errDiag adds err, redacted, as an error diagnostic.
func errDiag(diags *diag.Diagnostics, red *redact.Redactor, summary string, err error) {
	diags.AddError(summary, red.String(err.Error()))
}

func (r *specResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var planned specModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &planned)...)
	var secretsCfg types.Map
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("secrets"), &secretsCfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var prior *specModel
	if !req.State.Raw.IsNull() {
		prior = &specModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, prior)...)
	}
	if !planned.inputsKnown(secretsCfg) {
		planned.Steps = types.ListUnknown(stepObjectType)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &planned)...)
		return
	}
	secrets, d := secretsFrom(ctx, secretsCfg)
	resp.Diagnostics.Append(d...)
	red := redact.New()
	for _, v := range secrets {
		red.Add(v)
	}
	doc, err := planned.loadSpec(ctx, secrets, red)
	if err != nil {
		errDiag(&resp.Diagnostics, red, "khook_spec: invalid spec", err)
		return
	}
	if planned.ID.IsUnknown() {
		planned.ID = types.StringValue(specID(doc))
	}
	conn, known, d := planned.connection(ctx)
	resp.Diagnostics.Append(d...)
	var rows []stepRow
	drift := false
	switch {
	case prior == nil:
		// A create plans offline, always: what the plan shows must be
		// what the apply's own re-plan computes, and the connection is
		// often known only then (the cluster is created in the same
		// apply). Every step runs on a first apply anyway.
		if res, err := engine.OfflinePlan(doc, nil, nil); err == nil {
			rows, _ = planRows(res.Plan, fatesOf(doc, res), actionsOf(doc, res), nil, false, red)
		}
	case !known:
		// the cluster is being replaced: its plan is known after apply
		planned.Steps = types.ListUnknown(stepObjectType)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &planned)...)
		return
	default:
		res, err := planLive(ctx, conn, doc, red, planned.FieldManager)
		stateEnabled := doc.Spec.State.IsEnabled()
		if err != nil {
			resp.Diagnostics.AddWarning("khook_spec: planning offline", "the cluster could not be reached, so the plan is khook's offline plan (every step runs): "+red.String(err.Error()))
			if res, err = engine.OfflinePlan(doc, nil, nil); err != nil {
				errDiag(&resp.Diagnostics, red, "khook_spec: plan", err)
				return
			}
			stateEnabled = false // offline: the record is not read
		}
		// with state: and no record (deleted out of band, or an import of
		// one that never was), khook's apply has nothing to resume
		rows, drift = planRows(res.Plan, fatesOf(doc, res), actionsOf(doc, res), res.Status, stateEnabled, red)
		reportKept(&resp.Diagnostics, res.Plan, red)
	}
	if prior != nil && !drift && !inputsChanged(prior, &planned) {
		planned.Steps = prior.Steps // nothing to do: no diff
	} else {
		l, d := rowsValue(rows)
		resp.Diagnostics.Append(d...)
		planned.Steps = l
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &planned)...)
}

// reportKept shows what a live plan leaves as it is, which makes no diff:
// the fields each step leaves to other writers or ignores (drift.ignore)
// and the drift a warn policy leaves, each a warning naming its step
// (decision 257).
func reportKept(diags *diag.Diagnostics, p *plan.Plan, red *redact.Redactor) {
	for _, s := range p.Steps {
		if len(s.Kept) > 0 {
			diags.AddWarning(fmt.Sprintf("khook_spec: step %s (%s) leaves fields to other writers", s.Name, s.Type),
				red.String(strings.Join(s.Kept, "\n")+"\nThese fields differ from the spec and are not changed: no plan is made for them."))
		}
		if len(s.Drift) > 0 {
			diags.AddWarning(fmt.Sprintf("khook_spec: step %s (%s) found drift and leaves it (drift mode warn)", s.Name, s.Type),
				red.String(strings.Join(s.Drift, "\n")))
		}
	}
}

// planLive is khook's live plan of doc on the cluster of c, as `kubectl
// khook plan` computes it (engine.Cluster.Plan: the same fates apply
// follows), with the state record's status.
func planLive(ctx context.Context, c connection, doc *load.Document, red *redact.Redactor, fieldManager types.String) (*engine.PlanResult, error) {
	cl, err := connect(ctx, c, doc, red, fieldManager)
	if err != nil {
		return nil, err
	}
	return engine.NewPlan(cl).Run(ctx)
}

// inputsChanged reports whether what khook's run depends on changed: the
// spec, its folder, its variables, the secrets' version or the cluster.
func inputsChanged(prior, planned *specModel) bool {
	if !prior.Spec.Equal(planned.Spec) || !prior.BaseDir.Equal(planned.BaseDir) || !prior.Vars.Equal(planned.Vars) || !prior.SecretsVersion.Equal(planned.SecretsVersion) {
		return true
	}
	return !prior.Kubernetes.equal(planned.Kubernetes)
}

func (r *specResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var planned specModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &planned)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, d := planned.Timeouts.Create(ctx, defaultCreateTimeout)
	resp.Diagnostics.Append(d...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if r.apply(ctx, req.Config, &planned, &resp.Diagnostics, resp.Private) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &planned)...)
	}
	// a failed create sets no state: the resource is not created, and the
	// next apply runs again (khook resumes with a state record)
}

func (r *specResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var planned, prior specModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &planned)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if planned.Steps.Equal(prior.Steps) && !inputsChanged(&prior, &planned) {
		// destroy_on_delete, field_manager or timeouts only
		resp.Diagnostics.Append(resp.State.Set(ctx, &planned)...)
		return
	}
	timeout, d := planned.Timeouts.Update(ctx, defaultCreateTimeout)
	resp.Diagnostics.Append(d...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if r.apply(ctx, req.Config, &planned, &resp.Diagnostics, resp.Private) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &planned)...)
		return
	}
	// failed: the prior state stays, so the next plan shows the change
	// again and the next apply runs it (khook resumes)
	resp.Diagnostics.Append(resp.State.Set(ctx, &prior)...)
}

// privateSetter is the private state of a create or update response.
type privateSetter interface {
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}

// configGetter reads an attribute of the configuration.
type configGetter interface {
	GetAttribute(ctx context.Context, p path.Path, target interface{}) diag.Diagnostics
}

// apply runs khook's apply of planned (secrets from the configuration);
// true when every step succeeded or was skipped. planned's steps are the
// plan's: they become the state's unchanged (Terraform requires it).
func (r *specResource) apply(ctx context.Context, config configGetter, planned *specModel, diags *diag.Diagnostics, private privateSetter) bool {
	var secretsCfg types.Map
	diags.Append(config.GetAttribute(ctx, path.Root("secrets"), &secretsCfg)...)
	secrets, d := secretsFrom(ctx, secretsCfg)
	diags.Append(d...)
	if diags.HasError() {
		return false
	}
	red := redact.New()
	for _, v := range secrets {
		red.Add(v)
	}
	doc, err := planned.loadSpec(ctx, secrets, red)
	if err != nil {
		errDiag(diags, red, "khook_spec: invalid spec", err)
		return false
	}
	conn, known, d := planned.connection(ctx)
	diags.Append(d...)
	if !known {
		diags.AddError("khook_spec: connection unknown", "the kubernetes block's attributes are still unknown at apply time")
		return false
	}
	names, _ := json.Marshal(sortedKeys(secrets))
	diags.Append(private.SetKey(ctx, privateSecretNames, names)...)
	res, err := runOn(ctx, engine.CommandApply, conn, doc, red, planned.FieldManager)
	if res != nil {
		reportRun(diags, red, "apply", res)
	}
	if err != nil {
		errDiag(diags, red, "khook_spec: apply", err)
		return false
	}
	planned.ID = types.StringValue(specID(doc))
	if planned.Steps.IsUnknown() {
		l, d := rowsValue(resultRows(res))
		diags.Append(d...)
		planned.Steps = l
	}
	return res.Status == run.RunOK && !diags.HasError()
}

// resultRows are a run's outcomes as steps rows (a plan that was unknown).
func resultRows(res *run.Result) []stepRow {
	rows := make([]stepRow, len(res.Steps))
	for i, s := range res.Steps {
		rows[i] = stepRow{Name: s.Name, Type: s.Type, Action: s.Status, Reason: strings.TrimSpace(s.SkipReason + " " + s.Message)}
	}
	return rows
}

// reportRun adds an error per failed step of a run that did not succeed,
// naming the step and its redacted error, and a warning per other step it
// cut short (interrupted, or skipped because a need failed); and, of any
// run, a warning per step that found drift and left it (drift mode warn).
func reportRun(diags *diag.Diagnostics, red *redact.Redactor, command string, res *run.Result) {
	for _, s := range res.Steps {
		if len(s.Drift) > 0 {
			diags.AddWarning(fmt.Sprintf("khook_spec: %s: step %s (%s) found drift and left it (drift mode warn)", command, s.Name, s.Type), red.String(strings.Join(s.Drift, "\n")))
		}
	}
	if res.Status == run.RunOK {
		return
	}
	first := true
	for _, s := range res.Steps {
		switch {
		case s.Status == run.StatusFailed && first:
			first = false
			diags.AddError(fmt.Sprintf("khook_spec: %s: step %s (%s) failed", command, s.Name, s.Type), red.String(s.Error))
		case s.Status == run.StatusFailed:
			diags.AddWarning(fmt.Sprintf("khook_spec: %s: step %s (%s) failed too", command, s.Name, s.Type), red.String(s.Error))
		case s.Status == run.StatusInterrupted:
			diags.AddWarning(fmt.Sprintf("khook_spec: %s: step %s (%s) was interrupted", command, s.Name, s.Type), red.String(s.Error))
		case s.Status == run.StatusSkipped && s.Skip != event.SkipResumed && s.Skip != event.SkipExcluded:
			diags.AddWarning(fmt.Sprintf("khook_spec: %s: step %s (%s) skipped", command, s.Name, s.Type), red.String(s.SkipReason))
		}
	}
	if first {
		diags.AddError(fmt.Sprintf("khook_spec: %s did not succeed", command), "run status: "+res.Status)
	}
}

// secretNames reads the secrets' names from private state.
func secretNames(ctx context.Context, private interface {
	GetKey(context.Context, string) ([]byte, diag.Diagnostics)
}) []string {
	b, _ := private.GetKey(ctx, privateSecretNames)
	var names []string
	_ = json.Unmarshal(b, &names)
	return names
}

func (r *specResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m specModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.Spec.IsNull() {
		return // imported: the first apply fills it in
	}
	red := redact.New()
	doc, err := m.loadSpec(ctx, placeholderSecrets(secretNames(ctx, req.Private)), red)
	if err != nil || !doc.Spec.State.IsEnabled() {
		return
	}
	conn, known, _ := m.connection(ctx)
	if !known {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, kube.DefaultCheckTimeout)
	defer cancel()
	clients, err := kube.New(newGetter(conn), kube.Options{})
	if err != nil {
		return
	}
	rec, found, err := state.Read(rctx, clients.Typed, state.LocationOf(doc.Spec))
	if err != nil {
		resp.Diagnostics.AddWarning("khook_spec: state record not read", red.String(err.Error()))
		return
	}
	prior, d := rowsFrom(ctx, m.Steps)
	resp.Diagnostics.Append(d...)
	if !found {
		rec = &state.Record{Steps: map[string]*state.StepRecord{}}
	}
	l, d := rowsValue(recordRows(prior, rec, red))
	resp.Diagnostics.Append(d...)
	m.Steps = l
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *specResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m specModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !m.DestroyOnDelete.ValueBool() || m.Spec.IsNull() {
		return // forget it, leave the cluster alone
	}
	timeout, d := m.Timeouts.Delete(ctx, defaultDeleteTimeout)
	resp.Diagnostics.Append(d...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	red := redact.New()
	doc, err := m.loadSpec(ctx, placeholderSecrets(secretNames(ctx, req.Private)), red)
	if err != nil {
		errDiag(&resp.Diagnostics, red, "khook_spec: invalid spec", err)
		return
	}
	conn, _, d := m.connection(ctx)
	resp.Diagnostics.Append(d...)
	// Terraform's destroy is confirmed already: khook's destroy runs
	// without asking (the CLI's --yes)
	res, err := runOn(ctx, engine.CommandDestroy, conn, doc, red, m.FieldManager)
	if res != nil {
		reportRun(&resp.Diagnostics, red, "destroy", res)
	}
	if err != nil {
		errDiag(&resp.Diagnostics, red, "khook_spec: destroy", err)
	}
}

// ImportState takes the state record's namespace/name: the first apply
// after the import (which sets spec and connection) resumes from it.
func (r *specResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if ns, name, ok := strings.Cut(req.ID, "/"); !ok || ns == "" || name == "" {
		resp.Diagnostics.AddError("khook_spec: import", "the import id is the state record's namespace/name, e.g. kube-system/khook-state-bootstrap")
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
