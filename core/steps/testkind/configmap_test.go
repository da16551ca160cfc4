// Package testkind is a step kind that exists only in tests: configMap:,
// which writes a ConfigMap. It proves that a kind is one package plus one
// registry line (docs/spec.md decision 230): nothing outside this folder
// knows it, yet specs using it validate (with its own problems at their
// file:line:col), plan, apply, destroy, hash their inputs and appear in
// the schema, because its executor describes it (Kind) and the tests
// register it beside the built-in kinds (registry). It is also the
// smallest complete kind to copy (docs/step-kinds.md).
package testkind

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"khook.io/core/objects"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/steps/builtin"
)

// registry is the built-in kinds plus this one: the registry line a new
// kind adds to builtin.Executors.
func registry() (*step.Registry, error) {
	return step.NewRegistry(append(builtin.Executors(), &Executor{})...)
}

// Type is the action key.
const Type = "configMap"

// ConfigMap is a configMap: step's block.
type ConfigMap struct {
	Name      string            `yaml:"name" khook:"required" identifier:"a ConfigMap name is an identifier: it names the object in the cluster" doc:"the ConfigMap's name (a lowercase DNS name)"`
	Namespace string            `yaml:"namespace" schema:"dnslabel" default:"default" doc:"its namespace"`
	Data      map[string]string `yaml:"data" doc:"its data (key: value)"`
	FromFile  string            `yaml:"fromFile" doc:"a local file, relative to the spec file's folder, whose content is one more key: the file's base name"`
}

// Executor runs configMap: steps: step.Executor, step.Planner,
// step.Destroyer and step.InputDeclarer.
type Executor struct{}

// Kind describes configMap: steps to the spec.
func (*Executor) Kind() spec.StepKind {
	return spec.StepKind{Name: Type, Doc: "write a ConfigMap (a kind of the tests)", Block: new(ConfigMap)}
}

var keyRe = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// Check validates the name, the keys and the file.
func (cm *ConfigMap) Check(c *spec.Check) {
	p := c.Path
	if cm.Name != "" && !spec.IsDNSSubdomain(cm.Name) {
		c.Errorf(p+".name", "%q is not a valid ConfigMap name (a lowercase DNS name)", cm.Name)
	}
	c.Namespace(p+".namespace", cm.Namespace)
	for _, k := range sortedKeys(cm.Data) {
		if !keyRe.MatchString(k) {
			c.Errorf(p+".data."+k, "%q is not a valid ConfigMap key (letters, digits, '-', '_' and '.')", k)
		}
	}
	if cm.FromFile == "" {
		return
	}
	if _, ok := c.LocalFile(p+".fromFile", cm.FromFile, "file"); ok {
		if _, dup := cm.Data[filepath.Base(cm.FromFile)]; dup {
			c.Errorf(p+".fromFile", "data already has the key %q", filepath.Base(cm.FromFile))
		}
	}
}

// Summary says which ConfigMap, with how many keys.
func (cm *ConfigMap) Summary(*spec.Step) string {
	n := len(cm.Data)
	if cm.FromFile != "" {
		n++
	}
	ns := cm.Namespace
	if ns == "" {
		ns = "default"
	}
	s := fmt.Sprintf("ConfigMap %s in %s with %d keys", cm.Name, ns, n)
	if cm.FromFile != "" {
		s += ", one from " + cm.FromFile
	}
	return s
}

// Hint explains that a configMap has no skipIf.
func (*ConfigMap) Hint(field string) string {
	if field == "skipIf" {
		return "configMap steps have no skipIf: writing the same data again changes nothing"
	}
	return ""
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// object is the step's ConfigMap (with its data when withData), and the
// namespace it goes to.
func object(req *step.Request, withData bool) (*unstructured.Unstructured, string, error) {
	cm := spec.BlockOf[ConfigMap](req.Step)
	if cm == nil {
		return nil, "", fmt.Errorf("step %s is not a configMap step", req.Step.Name)
	}
	data := map[string]any{}
	for k, v := range cm.Data {
		data[k] = v
	}
	if cm.FromFile != "" && withData {
		b, err := os.ReadFile(spec.Resolve(req.BaseDir, cm.FromFile))
		if err != nil {
			return nil, "", fmt.Errorf("fromFile: %w", err)
		}
		data[filepath.Base(cm.FromFile)] = string(b)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": cm.Name}, "data": data,
	}}
	return u, req.Namespace(cm.Namespace), nil
}

// Run server-side applies the ConfigMap.
func (*Executor) Run(ctx context.Context, req *step.Request) (out step.Outcome, err error) {
	u, ns, err := object(req, true)
	if err != nil {
		return step.Outcome{}, err
	}
	res, err := req.Objects().Apply(ctx, u, ns, objects.ApplyOptions{ServerSide: true})
	if err != nil {
		return step.Outcome{}, err
	}
	return step.Outcome{Message: res.Ref().KindName() + " " + string(res.Action), Changed: res.Action != objects.Unchanged}, nil
}

// Plan dry-runs the apply.
func (*Executor) Plan(ctx context.Context, req *step.Request) (p step.Prediction, err error) {
	u, ns, err := object(req, true)
	if err != nil {
		return step.Prediction{}, err
	}
	res, err := req.Objects().Apply(ctx, u, ns, objects.ApplyOptions{ServerSide: true, DryRun: true})
	if err != nil {
		return step.Prediction{}, err
	}
	action, ok := map[objects.Action]step.Action{objects.Created: step.ActionCreate, objects.Configured: step.ActionConfigure}[res.Action]
	if !ok {
		action = step.ActionUnchanged
	}
	return step.Prediction{Action: action, Reason: strings.TrimSpace(res.Ref().KindName())}, nil
}

// Destroy deletes the ConfigMap; an absent one is success.
func (*Executor) Destroy(ctx context.Context, req *step.Request) (out step.Outcome, err error) {
	u, ns, err := object(req, false)
	if err != nil {
		return step.Outcome{}, err
	}
	sum, err := req.Objects().DeleteAll(ctx, []*unstructured.Unstructured{u}, objects.DeleteOptions{Namespace: ns, IgnoreNotFound: true, Progress: req.Progress})
	if err != nil {
		return step.Outcome{}, err
	}
	return step.Outcome{Message: sum.Message(), Changed: len(sum.Deleted) > 0}, nil
}

// Inputs declares fromFile, which the input hash reads.
func (*Executor) Inputs(st *spec.Step, _ string) ([]step.Input, error) {
	if cm := spec.BlockOf[ConfigMap](st); cm != nil && cm.FromFile != "" {
		return []step.Input{{Path: cm.FromFile}}, nil
	}
	return nil, nil
}
