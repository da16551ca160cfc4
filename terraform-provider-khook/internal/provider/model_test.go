package provider

import (
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"khook.io/core/engine"
	"khook.io/core/plan"
	"khook.io/core/redact"
	"khook.io/core/state"
	"khook.io/core/step"
	"khook.io/core/steps/helm"
	"khook.io/core/steps/rollout"
)

const secret = "s3cr3t-value"

func redactor() *redact.Redactor {
	red := redact.New()
	red.Add(secret)
	return red
}

func TestPlanRows(t *testing.T) {
	// each step's plan row, and its action as its kind declares it
	acts := map[string]map[string]step.Action{}
	row := func(name string, a step.Action, reason string) plan.Step {
		if acts[a.Word] == nil {
			acts[a.Word] = map[string]step.Action{}
		}
		acts[a.Word][name] = a
		return plan.Step{Name: name, Type: "apply", Action: a.Word, Reason: reason}
	}
	status := func(steps ...state.StepStatus) *state.Status { return &state.Status{Steps: steps} }
	for _, c := range []struct {
		name      string
		plan      []plan.Step
		status    *state.Status
		noRecord  bool                   // state: enabled, no record
		fates     map[string]engine.Fate // nil: from the record's status
		want      []string               // name action reason
		wantDrift bool
	}{
		{
			name: "no record: the live plan as it is, unchanged, no-op and wait are no drift",
			plan: []plan.Step{row("a", step.ActionUnchanged, ""), row("b", step.ActionWait, ""), row("c", step.ActionNoOp, "")},
			want: []string{"a unchanged ", "b wait ", "c no-op "},
		},
		{
			name:      "no record: a configure (the dry run changes fields) is drift",
			plan:      []plan.Step{row("a", step.ActionConfigure, "1 to configure"), row("b", step.ActionWait, "")},
			want:      []string{"a configure 1 to configure", "b wait "},
			wantDrift: true,
		},
		{
			name:      "no record: a helm release's repair is drift",
			plan:      []plan.Step{row("a", helm.ActionRepair, "2 objects of revision 1 drifted"), row("b", step.ActionNoOp, "")},
			want:      []string{"a repair 2 objects of revision 1 drifted", "b no-op "},
			wantDrift: true,
		},
		{
			name:      "no record: an install (the release uninstalled out of band) is drift",
			plan:      []plan.Step{row("a", helm.ActionInstall, "")},
			want:      []string{"a install "},
			wantDrift: true,
		},
		{
			name:      "no record: a create is drift",
			plan:      []plan.Step{row("a", step.ActionUnchanged, ""), row("b", step.ActionCreate, "")},
			want:      []string{"a unchanged ", "b create "},
			wantDrift: true,
		},
		{
			name:   "the record resumes: skip whatever the cluster says",
			plan:   []plan.Step{row("a", step.ActionCreate, ""), row("b", step.ActionConfigure, "")},
			status: status(state.StepStatus{Name: "a", Next: state.NextResume}, state.StepStatus{Name: "b", Next: state.NextResume}),
			want:   []string{"a skip " + state.ResumeReason, "b skip " + state.ResumeReason},
		},
		{
			name:      "the record re-runs an unchanged step: run, with the record's why",
			plan:      []plan.Step{row("a", step.ActionConfigure, ""), row("b", step.ActionUnchanged, "")},
			status:    status(state.StepStatus{Name: "a", Next: state.NextResume}, state.StepStatus{Name: "b", Next: state.NextRerun, Why: "inputs changed"}),
			want:      []string{"a skip " + state.ResumeReason, "b run inputs changed"},
			wantDrift: true,
		},
		{
			name:      "the record re-runs a configure: the live action stays",
			plan:      []plan.Step{row("a", step.ActionConfigure, "1 to configure")},
			status:    status(state.StepStatus{Name: "a", Next: state.NextRerun, Why: "inputs changed"}),
			want:      []string{"a configure 1 to configure"},
			wantDrift: true,
		},
		{
			name:      "the record runs a create: the live action stays",
			plan:      []plan.Step{row("a", step.ActionCreate, "new")},
			status:    status(state.StepStatus{Name: "a", Next: state.NextRun, Why: "never ran"}),
			want:      []string{"a create new"},
			wantDrift: true,
		},
		{
			name:   "when: false stays skip whatever the record says",
			plan:   []plan.Step{row("a", step.ActionSkip, "when: false")},
			status: status(state.StepStatus{Name: "a", Next: state.NextRun}),
			want:   []string{"a skip when: false"},
		},
		{
			name:      "reasons are redacted",
			plan:      []plan.Step{row("a", step.ActionPatch, "token "+secret)},
			status:    status(state.StepStatus{Name: "b", Next: state.NextRerun, Why: "had " + secret}),
			want:      []string{"a patch token ***"},
			wantDrift: true,
		},
		{
			name:      "the record's why is redacted",
			plan:      []plan.Step{row("a", step.ActionNoOp, "")},
			status:    status(state.StepStatus{Name: "a", Next: state.NextRerun, Why: "had " + secret}),
			want:      []string{"a run had ***"},
			wantDrift: true,
		},
		{
			name:      "no record with state: every step runs",
			plan:      []plan.Step{row("a", step.ActionUnchanged, ""), row("b", step.ActionCreate, ""), row("c", step.ActionSkip, "when: false")},
			noRecord:  true,
			want:      []string{"a run " + noRecordReason, "b create ", "c skip when: false"},
			wantDrift: true,
		},
		{
			// the engine decided it: a conditional step the record
			// resumes runs when its trigger changes, whatever the record
			// says of its own inputs (before, the record's resume made it
			// skip, while apply ran it)
			name:      "a triggered step the record resumes: the engine's fate, not the record's",
			plan:      []plan.Step{row("a", step.ActionConfigure, ""), row("b", rollout.ActionRestart, "triggered: a changes")},
			status:    status(state.StepStatus{Name: "a", Next: state.NextRerun, Why: "inputs changed"}, state.StepStatus{Name: "b", Next: state.NextResume}),
			fates:     map[string]engine.Fate{"a": engine.FateRun, "b": engine.FateTriggered},
			want:      []string{"a configure ", "b restart triggered: a changes"},
			wantDrift: true,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			fates := c.fates
			if fates == nil {
				// the fate the engine decides from the record: resumed,
				// excluded by when:, else run
				fates = map[string]engine.Fate{}
				for _, ps := range c.plan {
					fates[ps.Name] = engine.FateRun
					if ps.Action == plan.ActionSkip {
						fates[ps.Name] = engine.FateExcluded
					}
				}
				if c.status != nil {
					for _, s := range c.status.Steps {
						if s.Next == state.NextResume {
							fates[s.Name] = engine.FateResume
						}
					}
				}
			}
			stepActs := map[string]step.Action{}
			for _, ps := range c.plan {
				stepActs[ps.Name] = acts[ps.Action][ps.Name]
			}
			rows, drift := planRows(&plan.Plan{Steps: c.plan}, fates, stepActs, c.status, c.status != nil || c.noRecord, redactor())
			var got []string
			for _, r := range rows {
				got = append(got, r.Name+" "+r.Action+" "+r.Reason)
				if r.Type != "apply" {
					t.Errorf("%s: type %q, want apply", r.Name, r.Type)
				}
			}
			if !slices.Equal(got, c.want) || drift != c.wantDrift {
				t.Errorf("planRows = %q, drift %v\nwant %q, drift %v", got, drift, c.want, c.wantDrift)
			}
		})
	}
}

func TestRecordRows(t *testing.T) {
	prior := []stepRow{
		{Name: "a", Type: "apply", Action: "create", Reason: "new"},
		{Name: "b", Type: "apply", Action: plan.ActionSkip, Reason: state.ResumeReason},
		{Name: "c", Type: "apply", Action: plan.ActionSkip, Reason: "when: false"},
	}
	ok := &state.StepRecord{Status: state.StepOK}
	for _, c := range []struct {
		name  string
		steps map[string]*state.StepRecord
		want  []string
	}{
		{
			name:  "all done: the rows as applied",
			steps: map[string]*state.StepRecord{"a": ok, "b": ok},
			want:  []string{"a create new", "b skip " + state.ResumeReason, "c skip when: false"},
		},
		{
			name:  "failed: its status and redacted error",
			steps: map[string]*state.StepRecord{"a": {Status: state.StepFailed, Error: " token " + secret + " refused\n"}, "b": ok},
			want:  []string{"a failed token *** refused", "b skip " + state.ResumeReason, "c skip when: false"},
		},
		{
			name:  "undone by khook destroy --steps: skipped with its detail",
			steps: map[string]*state.StepRecord{"a": ok, "b": {Status: state.StepSkipped, Detail: "undone by destroy"}},
			want:  []string{"a create new", "b skipped undone by destroy", "c skip when: false"},
		},
		{
			name:  "interrupted",
			steps: map[string]*state.StepRecord{"a": {Status: state.StepInterrupted, Error: "interrupted"}, "b": ok},
			want:  []string{"a interrupted interrupted", "b skip " + state.ResumeReason, "c skip when: false"},
		},
		{
			name:  "no entry (the record deleted or edited): missing; when: false stays",
			steps: map[string]*state.StepRecord{},
			want:  []string{"a missing not in the state record", "b missing not in the state record", "c skip when: false"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows := recordRows(prior, &state.Record{Steps: c.steps}, redactor())
			var got []string
			for _, r := range rows {
				got = append(got, r.Name+" "+r.Action+" "+r.Reason)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("recordRows = %q\nwant %q", got, c.want)
			}
		})
	}
	if prior[0].Action != "create" {
		t.Error("recordRows changed its input")
	}
}

func TestInputsChanged(t *testing.T) {
	strMap := func(kv ...string) types.Map {
		m := map[string]attr.Value{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = types.StringValue(kv[i+1])
		}
		return types.MapValueMust(types.StringType, m)
	}
	base := func() *specModel {
		return &specModel{
			Spec: types.StringValue("spec"), BaseDir: types.StringValue("."), Vars: strMap("A", "1"),
			Secrets: types.MapNull(types.StringType), SecretsVersion: types.StringValue("1"),
			DestroyOnDelete: types.BoolValue(true), FieldManager: types.StringNull(), Steps: types.ListNull(stepObjectType),
			Kubernetes: &kubeModel{ConfigPath: types.StringValue("/k"), ConfigContext: types.StringNull(), Host: types.StringNull(),
				Token: types.StringNull(), ClusterCACertificate: types.StringNull(), ClientCertificate: types.StringNull(), ClientKey: types.StringNull()},
		}
	}
	for _, c := range []struct {
		name   string
		change func(m *specModel)
		want   bool
	}{
		{"nothing", func(*specModel) {}, false},
		{"destroy_on_delete only", func(m *specModel) { m.DestroyOnDelete = types.BoolValue(false) }, false},
		{"field_manager only (how to write, not what)", func(m *specModel) { m.FieldManager = types.StringValue("kubectl") }, false},
		{"steps only (a refresh)", func(m *specModel) { m.Steps = types.ListValueMust(stepObjectType, nil) }, false},
		{"secrets (write-only: never compared)", func(m *specModel) { m.Secrets = strMap("T", "x") }, false},
		{"spec", func(m *specModel) { m.Spec = types.StringValue("spec2") }, true},
		{"base_dir", func(m *specModel) { m.BaseDir = types.StringValue("/elsewhere") }, true},
		{"a var's value", func(m *specModel) { m.Vars = strMap("A", "2") }, true},
		{"a var added", func(m *specModel) { m.Vars = strMap("A", "1", "B", "1") }, true},
		{"secrets_version", func(m *specModel) { m.SecretsVersion = types.StringValue("2") }, true},
		{"kubernetes.config_path", func(m *specModel) { m.Kubernetes.ConfigPath = types.StringValue("/other") }, true},
		{"kubernetes.token", func(m *specModel) { m.Kubernetes.Token = types.StringValue("t") }, true},
		{"kubernetes.exec added", func(m *specModel) {
			m.Kubernetes.Exec = &execModel{Command: types.StringValue("aws"), APIVersion: types.StringNull(), Args: types.ListNull(types.StringType), Env: types.MapNull(types.StringType)}
		}, true},
		{"kubernetes.exec args", func(m *specModel) {
			m.Kubernetes.Exec = &execModel{Command: types.StringValue("aws"), APIVersion: types.StringNull(), Args: types.ListValueMust(types.StringType, []attr.Value{types.StringValue("eu")}), Env: types.MapNull(types.StringType)}
		}, true},
		{"kubernetes block removed", func(m *specModel) { m.Kubernetes = nil }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			prior, planned := base(), base()
			if c.name == "kubernetes.exec args" {
				prior.Kubernetes.Exec = &execModel{Command: types.StringValue("aws"), APIVersion: types.StringNull(), Args: types.ListValueMust(types.StringType, []attr.Value{types.StringValue("us")}), Env: types.MapNull(types.StringType)}
			}
			c.change(planned)
			if got := inputsChanged(prior, planned); got != c.want {
				t.Errorf("inputsChanged = %v, want %v", got, c.want)
			}
		})
	}
}
