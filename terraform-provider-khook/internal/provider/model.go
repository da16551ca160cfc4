package provider

import (
	"context"
	"errors"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"khook.io/core/engine"
	"khook.io/core/load"
	"khook.io/core/plan"
	"khook.io/core/redact"
	"khook.io/core/state"
	"khook.io/core/step"
	"khook.io/core/steps/builtin"
	"khook.io/core/vars"
)

// specModel is khook_spec's data.
type specModel struct {
	ID              types.String   `tfsdk:"id"`
	Spec            types.String   `tfsdk:"spec"`
	BaseDir         types.String   `tfsdk:"base_dir"`
	Vars            types.Map      `tfsdk:"vars"`
	Secrets         types.Map      `tfsdk:"secrets"`
	SecretsVersion  types.String   `tfsdk:"secrets_version"`
	DestroyOnDelete types.Bool     `tfsdk:"destroy_on_delete"`
	FieldManager    types.String   `tfsdk:"field_manager"`
	Kubernetes      *kubeModel     `tfsdk:"kubernetes"`
	Steps           types.List     `tfsdk:"steps"`
	Timeouts        timeouts.Value `tfsdk:"timeouts"`
}

type kubeModel struct {
	Host                 types.String `tfsdk:"host"`
	Token                types.String `tfsdk:"token"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	ClientCertificate    types.String `tfsdk:"client_certificate"`
	ClientKey            types.String `tfsdk:"client_key"`
	ConfigPath           types.String `tfsdk:"config_path"`
	ConfigContext        types.String `tfsdk:"config_context"`
	Exec                 *execModel   `tfsdk:"exec"`
}

type execModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Command    types.String `tfsdk:"command"`
	Args       types.List   `tfsdk:"args"`
	Env        types.Map    `tfsdk:"env"`
}

// equal reports whether k and o are the same connection, attribute by
// attribute (a nil block equals only a nil block).
func (k *kubeModel) equal(o *kubeModel) bool {
	if k == nil || o == nil {
		return k == o
	}
	if !k.Host.Equal(o.Host) || !k.Token.Equal(o.Token) || !k.ClusterCACertificate.Equal(o.ClusterCACertificate) ||
		!k.ClientCertificate.Equal(o.ClientCertificate) || !k.ClientKey.Equal(o.ClientKey) ||
		!k.ConfigPath.Equal(o.ConfigPath) || !k.ConfigContext.Equal(o.ConfigContext) {
		return false
	}
	if k.Exec == nil || o.Exec == nil {
		return k.Exec == o.Exec
	}
	return k.Exec.APIVersion.Equal(o.Exec.APIVersion) && k.Exec.Command.Equal(o.Exec.Command) &&
		k.Exec.Args.Equal(o.Exec.Args) && k.Exec.Env.Equal(o.Exec.Env)
}

// stepAttrTypes are the attributes of a steps element.
var stepAttrTypes = map[string]attr.Type{
	"name":   types.StringType,
	"type":   types.StringType,
	"action": types.StringType,
	"reason": types.StringType,
}

var stepObjectType = types.ObjectType{AttrTypes: stepAttrTypes}

// stepRow is one element of steps.
type stepRow struct{ Name, Type, Action, Reason string }

// connection returns the kubernetes block's values; known is false when
// any of them is unknown (the cluster may not exist yet).
func (m *specModel) connection(ctx context.Context) (c connection, known bool, diags diag.Diagnostics) {
	k := m.Kubernetes
	if k == nil {
		return c, true, nil
	}
	strs := []types.String{k.Host, k.Token, k.ClusterCACertificate, k.ClientCertificate, k.ClientKey, k.ConfigPath, k.ConfigContext}
	for _, s := range strs {
		if s.IsUnknown() {
			return c, false, nil
		}
	}
	c = connection{Host: k.Host.ValueString(), Token: k.Token.ValueString(), ClusterCA: k.ClusterCACertificate.ValueString(),
		ClientCert: k.ClientCertificate.ValueString(), ClientKey: k.ClientKey.ValueString(), ConfigPath: k.ConfigPath.ValueString(), ConfigContext: k.ConfigContext.ValueString()}
	if e := k.Exec; e != nil {
		if e.APIVersion.IsUnknown() || e.Command.IsUnknown() || e.Args.IsUnknown() || e.Env.IsUnknown() {
			return c, false, nil
		}
		ex := &execConfig{APIVersion: e.APIVersion.ValueString(), Command: e.Command.ValueString()}
		diags.Append(e.Args.ElementsAs(ctx, &ex.Args, false)...)
		diags.Append(e.Env.ElementsAs(ctx, &ex.Env, false)...)
		for _, a := range e.Args.Elements() {
			if a.IsUnknown() {
				return c, false, diags
			}
		}
		c.Exec = ex
	}
	return c, true, diags
}

// inputsKnown reports whether the spec can be loaded: its text, base
// folder and variables are known.
func (m *specModel) inputsKnown(secrets types.Map) bool {
	if m.Spec.IsUnknown() || m.BaseDir.IsUnknown() || m.Vars.IsUnknown() || secrets.IsUnknown() {
		return false
	}
	for _, v := range m.Vars.Elements() {
		if v.IsUnknown() {
			return false
		}
	}
	for _, v := range secrets.Elements() {
		if v.IsUnknown() {
			return false
		}
	}
	return true
}

// specFile is the name the spec's text goes by in khook's messages.
const specFile = "khook_spec.yaml"

// loadSpec loads the spec's text with vars and secrets (the secrets as
// khook's secret variables: red learns them and masks them everywhere).
// The provider's own environment is not read: variables come from vars
// and secrets only.
func (m *specModel) loadSpec(ctx context.Context, secrets map[string]string, red *redact.Redactor) (*load.Document, error) {
	var vs map[string]string
	if d := m.Vars.ElementsAs(ctx, &vs, false); d.HasError() {
		return nil, errors.New("vars: not a map of strings")
	}
	base := m.BaseDir.ValueString()
	if base == "" {
		base = "."
	}
	base, err := filepath.Abs(base)
	if err != nil {
		return nil, err
	}
	opts := vars.Options{VarPrefix: vars.DefaultVarPrefix, SecretPrefix: vars.DefaultSecretPrefix}
	for _, k := range sortedKeys(vs) {
		opts.Set = append(opts.Set, k+"="+vs[k])
	}
	for _, k := range sortedKeys(secrets) {
		if _, dup := vs[k]; dup {
			return nil, errors.New("variable " + k + " is in both vars and secrets")
		}
		opts.Environ = append(opts.Environ, vars.DefaultSecretPrefix+k+"="+secrets[k])
	}
	text := m.Spec.ValueString()
	file := filepath.Join(base, specFile)
	l := &load.Loader{Steps: builtin.Registry}
	return l.Load(load.Options{File: file, Vars: opts, Redactor: red, ReadFile: func(string) ([]byte, error) { return []byte(text), nil }})
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// secretsFrom reads the write-only secrets map (config only).
func secretsFrom(ctx context.Context, v types.Map) (map[string]string, diag.Diagnostics) {
	out := map[string]string{}
	if v.IsNull() || v.IsUnknown() {
		return out, nil
	}
	diags := v.ElementsAs(ctx, &out, false)
	return out, diags
}

// placeholderSecrets stands in for secrets that are not available (Read,
// Delete, import: a write-only value is never stored): each named secret
// gets a placeholder, so that the spec loads. What destroy needs (names,
// namespaces) must therefore not come from secrets.
func placeholderSecrets(names []string) map[string]string {
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[n] = "khook-write-only-secret-not-available"
	}
	return out
}

// planRows turns khook's plan into steps rows: each step's action and
// reason as the engine's plan has them, from the fate the engine decided
// (fates, by step name: the same engine.Dispose apply follows, so a step
// the record resumes is skip, a conditional one is predicted from its
// triggers), overlaid with the state record's status where the record
// says a step the cluster shows unchanged runs again (st; nil: no record,
// and with state: enabled every such step runs: khook's apply has nothing
// to resume). drift reports whether any row's action is drift, as the
// step's kind declares it (acts, by step name; step.Action.Drift): the
// cluster is not as the spec wants it, so an unchanged spec still plans
// an update. What a step predicts on every run (a rollout's restart, a
// wait) is not drift, nor is unknown, which cannot tell (decisions 172,
// 285).
func planRows(p *plan.Plan, fates map[string]engine.Fate, acts map[string]step.Action, st *state.Status, stateEnabled bool, red *redact.Redactor) (rows []stepRow, drift bool) {
	next := map[string]state.StepStatus{}
	if st != nil {
		for _, s := range st.Steps {
			next[s.Name] = s
		}
	}
	for _, ps := range p.Steps {
		a := acts[ps.Name]
		r := stepRow{Name: ps.Name, Type: ps.Type, Action: ps.Action, Reason: red.String(ps.Reason)}
		switch fate := fates[ps.Name]; {
		case fate == engine.FateResume:
			a = step.ActionSkip
			r.Action, r.Reason = a.Word, state.ResumeReason
		case fate != engine.FateRun || a == step.ActionSkip || a.Drift:
		case st == nil && stateEnabled:
			a = step.ActionRun
			r.Action, r.Reason = a.Word, noRecordReason
		case next[ps.Name].Next == state.NextRun || next[ps.Name].Next == state.NextRerun:
			a = step.ActionRun
			r.Action, r.Reason = a.Word, red.String(next[ps.Name].Why)
		}
		drift = drift || a.Drift
		rows = append(rows, r)
	}
	return rows, drift
}

// actionsOf maps each step of res's spec to its action in the plan, as
// its kind declares it.
func actionsOf(doc *load.Document, res *engine.PlanResult) map[string]step.Action {
	out := make(map[string]step.Action, len(res.Actions))
	for i, a := range res.Actions {
		out[doc.Spec.Steps[i].Name] = a
	}
	return out
}

// fatesOf maps each step of res's spec to the fate the engine decided.
func fatesOf(doc *load.Document, res *engine.PlanResult) map[string]engine.Fate {
	out := make(map[string]engine.Fate, len(res.Dispositions))
	for i, d := range res.Dispositions {
		out[doc.Spec.Steps[i].Name] = d.Fate
	}
	return out
}

// noRecordReason is why a step runs when its spec's state record is gone.
const noRecordReason = "no state record: nothing to resume"

// recordRows are the prior rows refreshed from the state record: a step
// the record has not as succeeded (failed, interrupted, or skipped: a
// `khook destroy --steps` out of band records "undone by destroy") shows
// its status as its action and the record's error or detail as its
// reason; a step it has no entry for (the record deleted or edited, or
// the step never ran) shows missing; the others keep their row.
func recordRows(prior []stepRow, rec *state.Record, red *redact.Redactor) []stepRow {
	out := make([]stepRow, len(prior))
	for i, r := range prior {
		out[i] = r
		if r.Action == plan.ActionSkip && r.Reason != state.ResumeReason {
			continue // when: false
		}
		sr := rec.Steps[r.Name]
		switch {
		case sr == nil:
			out[i].Action, out[i].Reason = ActionMissing, "not in the state record"
		case sr.Status != state.StepOK:
			why := sr.Error
			if why == "" {
				why = sr.Detail
			}
			out[i].Action, out[i].Reason = sr.Status, red.String(strings.TrimSpace(why))
		}
	}
	return out
}

// ActionMissing is a refreshed step's action when the state record has
// no entry for it.
const ActionMissing = "missing"

func rowsValue(rows []stepRow) (types.List, diag.Diagnostics) {
	vals := make([]attr.Value, len(rows))
	var diags diag.Diagnostics
	for i, r := range rows {
		v, d := types.ObjectValue(stepAttrTypes, map[string]attr.Value{
			"name": types.StringValue(r.Name), "type": types.StringValue(r.Type),
			"action": types.StringValue(r.Action), "reason": types.StringValue(r.Reason),
		})
		diags.Append(d...)
		vals[i] = v
	}
	l, d := types.ListValue(stepObjectType, vals)
	diags.Append(d...)
	return l, diags
}

func rowsFrom(ctx context.Context, l types.List) ([]stepRow, diag.Diagnostics) {
	if l.IsNull() || l.IsUnknown() {
		return nil, nil
	}
	var objs []struct {
		Name   string `tfsdk:"name"`
		Type   string `tfsdk:"type"`
		Action string `tfsdk:"action"`
		Reason string `tfsdk:"reason"`
	}
	diags := l.ElementsAs(ctx, &objs, false)
	rows := make([]stepRow, len(objs))
	for i, o := range objs {
		rows[i] = stepRow(o)
	}
	return rows, diags
}

// specID is the resource's id: the state record's namespace/name with a
// state: block, else the spec's name.
func specID(doc *load.Document) string {
	sp := doc.Spec
	if sp.State.IsEnabled() {
		return state.LocationOf(sp).String()
	}
	return "spec/" + sp.Metadata.Name
}
