package render

import (
	"errors"
	"fmt"
	"io"

	"khook.io/core/internal/english"
	"khook.io/core/load"
)

// ValidateReport is validate -o json.
type ValidateReport struct {
	Valid    bool              `json:"valid"`
	File     string            `json:"file"`
	Name     string            `json:"name,omitempty"`
	Steps    int               `json:"steps,omitempty"`
	Levels   int               `json:"levels,omitempty"`
	Problems []ValidateProblem `json:"problems"`
}

// ValidateProblem is one problem of an invalid spec.
type ValidateProblem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Path    string `json:"path,omitempty"`
	Step    string `json:"step,omitempty"` // the name of the step Path is in
	Message string `json:"message"`
}

// NewValidateReport is the report of loading the spec file: doc when it
// is valid, else the problems of err (a *load.InvalidError); ok is false
// when err is another error, which the report cannot tell.
func NewValidateReport(file string, doc *load.Document, err error) (r ValidateReport, ok bool) {
	r = ValidateReport{Valid: err == nil, File: file, Problems: []ValidateProblem{}}
	var inv *load.InvalidError
	switch {
	case err == nil:
		r.Name, r.Steps, r.Levels = doc.Spec.Metadata.Name, len(doc.Spec.Steps), len(doc.Graph.Levels())
	case errors.As(err, &inv):
		for _, p := range inv.Problems {
			r.Problems = append(r.Problems, ValidateProblem{File: p.Pos.File, Line: p.Pos.Line, Column: p.Pos.Col, Path: p.Path, Step: p.Step, Message: p.Msg})
		}
	default:
		return r, false
	}
	return r, true
}

// Valid says the spec file (- for standard input) is valid: its name,
// steps and levels.
func Valid(w io.Writer, file string, doc *load.Document) error {
	if file == "-" {
		file = "<stdin>"
	}
	_, err := fmt.Fprintf(w, "%s is valid: %s, %s in %s.\n", file, doc.Spec.Metadata.Name,
		english.CountNoun(len(doc.Spec.Steps), "step"), english.CountNoun(len(doc.Graph.Levels()), "level"))
	return err
}
