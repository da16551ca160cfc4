package spec

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// Drift modes.
const (
	// DriftRepair puts back what drifted (the default).
	DriftRepair = "repair"
	// DriftWarn reports what drifted and changes nothing for it.
	DriftWarn = "warn"
	// DriftOff neither looks for drift nor puts it back.
	DriftOff = "off"
)

// Drift is the drift policy of a helm: or apply: step (its drift: block),
// or the default of every such step (defaults.drift): what a re-run does
// with what changed in the cluster since khook (or helm) last wrote it.
// The shape follows Flux's helm-controller driftDetection (mode, ignore
// rules with paths and a target) and Argo CD's managedFieldsManagers
// (managers).
type Drift struct {
	Mode     string         `yaml:"mode" enum:"repair,warn,off" default:"repair" doc:"repair: put back what drifted; warn: report it in plan, diff, apply and status and change nothing for it; off: neither look for it nor put it back"`
	Ignore   []DriftIgnore  `yaml:"ignore" doc:"fields never compared nor written back, as Flux's driftDetection.ignore: JSON pointers, optionally for some objects only"`
	Managers *DriftManagers `yaml:"managers" doc:"field managers whose writes are always kept, or always taken back"`
}

// DriftIgnore is one ignore rule: paths, in the objects target selects
// (every object without a target).
type DriftIgnore struct {
	Paths  []string     `yaml:"paths" khook:"required" doc:"JSON pointers (RFC 6901) to the fields to ignore, such as /data/ca or /spec/replicas; a pointer names everything under it, and a segment * matches any key or list index"`
	Target *DriftTarget `yaml:"target" doc:"the objects the rule is for; every object of the step when absent"`
}

// DriftTarget selects the objects of an ignore rule: all of what it
// gives must match.
type DriftTarget struct {
	Group         string `yaml:"group" doc:"API group (\"\" is the core group when written; any group when absent)"`
	Kind          string `yaml:"kind" doc:"kind, such as Deployment"`
	Name          string `yaml:"name" doc:"object name, or a glob (webhook-*)"`
	Namespace     string `yaml:"namespace" doc:"namespace, or a glob"`
	LabelSelector string `yaml:"labelSelector" doc:"label selector (app=web,tier!=db), matched against the labels the manifest gives the object"`
}

// DriftManagers are field managers the policy names: their writes are
// kept (never put back) or taken (put back), whatever kind of writer they
// are.
type DriftManagers struct {
	Keep []string `yaml:"keep" doc:"field managers (names or globs) whose writes are kept, never put back: a controller khook would otherwise repair, or a person's tool"`
	Take []string `yaml:"take" doc:"field managers (names or globs) whose writes are put back like a person's: a controller khook would otherwise leave alone"`
}

// EffectiveMode is the mode, repair when unset.
func (d *Drift) EffectiveMode() string {
	if d == nil || d.Mode == "" {
		return DriftRepair
	}
	return d.Mode
}

// MergeDrift is the drift policy of a step whose own block is step, under
// the spec's defaults: the step's mode, else the default's; the ignore
// rules of both; managers named by both, the step's word winning where
// one names a manager the other names the other way. Nil when neither
// says anything.
func MergeDrift(defaults, step *Drift) *Drift {
	switch {
	case defaults == nil:
		return step
	case step == nil:
		return defaults
	}
	out := &Drift{Mode: defaults.Mode, Ignore: append(append([]DriftIgnore{}, defaults.Ignore...), step.Ignore...)}
	if step.Mode != "" {
		out.Mode = step.Mode
	}
	var dk, dt, sk, st []string
	if defaults.Managers != nil {
		dk, dt = defaults.Managers.Keep, defaults.Managers.Take
	}
	if step.Managers != nil {
		sk, st = step.Managers.Keep, step.Managers.Take
	}
	if dk != nil || dt != nil || sk != nil || st != nil {
		out.Managers = &DriftManagers{
			Keep: append(without(dk, st), sk...),
			Take: append(without(dt, sk), st...),
		}
	}
	return out
}

// without is list less the entries also in drop.
func without(list, drop []string) []string {
	var out []string
	for _, s := range list {
		found := false
		for _, d := range drop {
			found = found || d == s
		}
		if !found {
			out = append(out, s)
		}
	}
	return out
}

// Drift checks a drift: block at path (a step kind's, or defaults.drift):
// the mode, every ignore rule's JSON pointers and target, and the
// managers, each problem at its own field.
func (c *Check) Drift(path string, d *Drift) { c.v.drift(path, d) }

func (v *validator) drift(p string, d *Drift) {
	if d == nil {
		return
	}
	v.enum(p+".mode", d.Mode, DriftRepair, DriftWarn, DriftOff)
	for i, rule := range d.Ignore {
		rp := p + ".ignore[" + strconv.Itoa(i) + "]"
		v.required(rp, &rule)
		if rule.Paths != nil && len(rule.Paths) == 0 {
			v.errf(rp+".paths", "must name at least one JSON pointer, such as /data/ca")
		}
		for j, ptr := range rule.Paths {
			if _, err := ParsePointer(ptr); err != nil {
				v.errf(rp+".paths["+strconv.Itoa(j)+"]", "%s", withNote(err.Error(), ptr))
			}
		}
		if t := rule.Target; t != nil {
			tp := rp + ".target"
			if *t == (DriftTarget{}) && v.present(tp) {
				v.errf(tp, "selects every object: give kind, name, namespace, group or labelSelector, or leave target out")
			}
			for _, g := range []struct{ key, val string }{{"name", t.Name}, {"namespace", t.Namespace}} {
				if _, err := path.Match(g.val, ""); err != nil {
					v.errf(tp+"."+g.key, "%q is not a valid glob: %v", g.val, err)
				}
			}
			if t.LabelSelector != "" {
				if _, err := labels.Parse(t.LabelSelector); err != nil {
					v.errf(tp+".labelSelector", "%s", withNote(fmt.Sprintf("invalid label selector: %v", err), t.LabelSelector))
				}
			}
		}
	}
	if m := d.Managers; m != nil {
		keep := map[string]int{}
		for i, name := range m.Keep {
			v.managerName(p+".managers.keep["+strconv.Itoa(i)+"]", name)
			keep[name] = i
		}
		for i, name := range m.Take {
			mp := p + ".managers.take[" + strconv.Itoa(i) + "]"
			v.managerName(mp, name)
			if j, both := keep[name]; both && name != "" {
				v.errf(mp, "%q is also in managers.keep[%d]: a manager's writes are either kept or taken", name, j)
			}
		}
	}
}

// managerName checks a field manager name or glob.
func (v *validator) managerName(p, name string) {
	switch _, err := path.Match(name, ""); {
	case name == "":
		v.errf(p, "must not be empty")
	case err != nil:
		v.errf(p, "%q is not a valid glob: %v", name, err)
	case len(name) > 128:
		v.errf(p, "a field manager name is at most 128 characters")
	}
}

// Pointer is a parsed JSON pointer (RFC 6901): its reference tokens,
// unescaped; "*" is a token matching any key or index.
type Pointer []string

// ParsePointer parses a JSON pointer as an ignore rule writes it: "/"
// then tokens separated by "/", "~1" for a "/" and "~0" for a "~" inside
// one. The empty pointer (the whole object) is refused: ignoring all of
// an object is leaving it out of the step.
func ParsePointer(s string) (Pointer, error) {
	switch {
	case s == "":
		return nil, fmt.Errorf("an empty JSON pointer would ignore the whole object: name a field, such as /data/ca")
	case !strings.HasPrefix(s, "/"):
		return nil, fmt.Errorf("%q is not a JSON pointer: it starts with /, such as /data/ca or /spec/replicas", s)
	}
	tokens := strings.Split(s[1:], "/")
	for i, t := range tokens {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("%q is not a JSON pointer: ~ is written ~0 and / is written ~1 inside a key", s)
			}
		}
		tokens[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	return tokens, nil
}
