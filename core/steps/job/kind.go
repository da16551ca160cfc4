package job

import (
	"fmt"
	"regexp"
	"strings"

	"khook.io/core/spec"
)

// Type is the action key of job: steps.
const Type = "job"

// SkipIfSucceeded is the skipIf of a job: skip (success) when the step's
// Job already completed successfully.
const SkipIfSucceeded = "succeeded"

// Job is a job: step's block: run a container to completion.
type Job struct {
	Image           string            `yaml:"image" khook:"required" doc:"container image to run"`
	Command         []string          `yaml:"command" doc:"container command (entrypoint override)"`
	Args            []string          `yaml:"args" doc:"container args"`
	Env             map[string]string `yaml:"env" doc:"environment variables (NAME: value)"`
	Namespace       string            `yaml:"namespace" schema:"dnslabel" default:"default" doc:"namespace the Job runs in"`
	CreateNamespace bool              `yaml:"createNamespace" default:"false" doc:"create the namespace if missing"`
	ServiceAccount  string            `yaml:"serviceAccount" doc:"ServiceAccount for the pod; default: the namespace's default"`
	SkipIf          string            `yaml:"skipIf" enum:"succeeded" doc:"succeeded: skip (success) if this step's Job already completed successfully"`
}

// Kind describes job: steps to the spec.
func (*Executor) Kind() spec.StepKind {
	return spec.StepKind{Name: Type, Doc: "run a container to completion", Block: new(Job)}
}

var envNameRe = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)

// Check validates the image, the ServiceAccount and the variables' names.
func (j *Job) Check(c *spec.Check) {
	p := c.Path
	c.Namespace(p+".namespace", j.Namespace)
	c.SkipIf(p+".skipIf", j.SkipIf, SkipIfSucceeded)
	if strings.ContainsAny(j.Image, " \t\n") {
		c.Errorf(p+".image", "%q is not a valid image reference", j.Image)
	}
	if j.ServiceAccount != "" && !spec.IsDNSSubdomain(j.ServiceAccount) {
		c.Errorf(p+".serviceAccount", "%s", spec.WithNote(fmt.Sprintf("%q is not a valid ServiceAccount name", j.ServiceAccount), j.ServiceAccount))
	}
	for name := range j.Env {
		if !envNameRe.MatchString(name) {
			c.Errorf(p+".env."+name, "%s", spec.WithNote(fmt.Sprintf("%q is not a valid environment variable name", name), name))
		}
	}
}

// Summary says what runs, where.
func (j *Job) Summary(*spec.Step) string {
	w := []string{"run " + j.Image + " in " + nsOr(j.Namespace, "default")}
	if len(j.Command) > 0 {
		w = append(w, "command "+strings.Join(j.Command, " "))
	}
	if len(j.Args) > 0 {
		w = append(w, "args "+strings.Join(j.Args, " "))
	}
	if j.ServiceAccount != "" {
		w = append(w, "as "+j.ServiceAccount)
	}
	if j.CreateNamespace {
		w = append(w, "createNamespace")
	}
	if j.SkipIf != "" {
		w = append(w, "skipIf "+j.SkipIf)
	}
	return strings.Join(w, ", ")
}

func nsOr(ns, def string) string {
	if ns == "" {
		return def
	}
	return ns
}
