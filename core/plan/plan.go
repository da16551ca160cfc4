package plan

import (
	"slices"
	"time"

	"khook.io/core/spec"
)

// Actions a plan predicts, in one place: the offline plan, the steps'
// live predictions (step.Prediction) and the renderers share them.
// Offline, a step is run or skip; a live plan (against a cluster) refines
// run into what the step would do there.
const (
	ActionRun       = "run"
	ActionSkip      = "skip"
	ActionUnknown   = "unknown"
	ActionCreate    = "create"
	ActionConfigure = "configure"
	// ActionUnchanged: an apply: step whose objects all exist and whose
	// dry run changes none of them (kubectl apply's word).
	ActionUnchanged = "unchanged"
	ActionDelete    = "delete"
	ActionNoOp      = "no-op"
	ActionPatch     = "patch"
	ActionRestart   = "restart"
	ActionWait      = "wait"
)

// Modes of a plan.
const (
	ModeOffline = "offline"
	ModeLive    = "live"
)

// Plan is what a run of a spec would do, step by step, in DAG order.
type Plan struct {
	Name   string `json:"name"`
	Mode   string `json:"mode"`
	Levels int    `json:"levels"`
	Steps  []Step `json:"steps"`
}

// Drifted reports whether a step of p found drift it leaves as it is (its
// drift policy's warn mode); false for nil.
func (p *Plan) Drifted() bool {
	return p != nil && slices.ContainsFunc(p.Steps, func(s Step) bool { return len(s.Drift) > 0 })
}

// Step is one planned step.
type Step struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Level   int      `json:"level"`
	Needs   []string `json:"needs"`
	Action  string   `json:"action"`
	Reason  string   `json:"reason,omitempty"`
	Summary string   `json:"summary"`
	// Details are extra facts a live plan found (current revision, which
	// objects exist); empty offline.
	Details []string `json:"details,omitempty"`
	// Drift are the objects a live plan found drifted that the step leaves
	// as they are (drift mode warn), Kept the fields it leaves to other
	// writers or ignores, a line each (also among the details).
	Drift []string `json:"drift,omitempty"`
	Kept  []string `json:"kept,omitempty"`
	When  string   `json:"when,omitempty"`
	// WhenResult is the when: outcome; nil when the step has no when:.
	WhenResult *bool    `json:"whenResult,omitempty"`
	Settings   Settings `json:"settings"`
	// HashCannotSee lists, for a spec that enables state, the remote
	// content the step depends on whose changes its input hash cannot see
	// (a change there alone does not re-run a step the record resumes).
	HashCannotSee []string `json:"hashCannotSee,omitempty"`
}

// Settings are a step's effective scheduling fields (step value, else
// defaults, else the built-in default).
type Settings struct {
	Timeout    Duration `json:"timeout"`
	Retries    int      `json:"retries"`
	RetryDelay Duration `json:"retryDelay"`
	OnError    string   `json:"onError"`
}

// Duration prints as a Go duration string in JSON and YAML.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// Duration returns d as a time.Duration.
func (d Duration) Duration() time.Duration { return time.Duration(d) }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Built-in defaults of the scheduling fields.
const (
	DefaultTimeout    = 5 * time.Minute
	DefaultRetries    = 0
	DefaultRetryDelay = 10 * time.Second
	DefaultOnError    = spec.OnErrorFail
)

// EffectiveSettings resolves a step's scheduling fields against defaults.
func EffectiveSettings(st *spec.Step, d *spec.Defaults) Settings {
	s := Settings{
		Timeout:    Duration(DefaultTimeout),
		Retries:    DefaultRetries,
		RetryDelay: Duration(DefaultRetryDelay),
		OnError:    DefaultOnError,
	}
	if d != nil {
		if d.Timeout != nil {
			s.Timeout = Duration(d.Timeout.Duration)
		}
		if d.Retries != nil {
			s.Retries = *d.Retries
		}
		if d.RetryDelay != nil {
			s.RetryDelay = Duration(d.RetryDelay.Duration)
		}
		if d.OnError != "" {
			s.OnError = d.OnError
		}
	}
	if st.Timeout != nil {
		s.Timeout = Duration(st.Timeout.Duration)
	}
	if st.Retries != nil {
		s.Retries = *st.Retries
	}
	if st.RetryDelay != nil {
		s.RetryDelay = Duration(st.RetryDelay.Duration)
	}
	if st.OnError != "" {
		s.OnError = st.OnError
	}
	return s
}

// Condition is a step's when: outcome, decided at load time.
type Condition struct {
	Expr     string
	Included bool
}

// Offline builds the plan from the spec alone. conds holds each step's
// when: outcome, by step index (a step without when: is included).
func Offline(s *spec.Spec, g *Graph, conds []Condition) *Plan {
	p := &Plan{Name: s.Metadata.Name, Mode: ModeOffline, Levels: len(g.Levels())}
	p.Steps = make([]Step, 0, len(s.Steps))
	for _, i := range g.Order() {
		st := &s.Steps[i]
		ps := Step{
			Name:     st.Name,
			Type:     st.Type(),
			Level:    g.Level(i),
			Needs:    st.Needs,
			Action:   ActionRun,
			Summary:  st.Summary(),
			When:     st.When,
			Settings: EffectiveSettings(st, s.Defaults),
		}
		if ps.Needs == nil {
			ps.Needs = []string{}
		}
		if st.When != "" {
			inc := conds[i].Included
			ps.WhenResult = &inc
			if !inc {
				ps.Action = ActionSkip
				ps.Reason = "when: " + st.When + " is false"
			}
		}
		p.Steps = append(p.Steps, ps)
	}
	return p
}
