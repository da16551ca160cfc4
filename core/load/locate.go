package load

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"khook.io/core/cel"
	"khook.io/core/spec"
	"khook.io/core/vars"
)

// where says what holds a variable reference: the field (or map key) whose
// scalar contains it, or a comment.
type where struct {
	path    string
	comment bool
	found   bool
}

// locator finds what holds each reference of a substituted spec. The text
// YAML parses carries no trace of the references, so the locator parses it
// once more with a marker inserted at each reference and looks for the
// markers in scalars, keys and comments. It parses only when asked.
type locator struct {
	sub   *vars.Result
	done  bool
	where map[int]where // by source offset of the reference's "${"
}

// at returns what holds the reference whose "${" is at source offset off.
func (l *locator) at(off int) where {
	l.run()
	return l.where[off]
}

func (l *locator) run() {
	if !l.done {
		l.done = true
		l.where = l.locate()
	}
}

// markerPrefix starts every marker inserted into text; it does not occur
// in text.
func markerPrefix(text []byte) string {
	p := "khookref"
	for bytes.Contains(text, []byte(p)) {
		p += "q"
	}
	return p
}

func (l *locator) locate() map[int]where {
	offs := map[int]bool{}
	for _, r := range l.sub.Refs {
		offs[r.Offset] = true
	}
	for _, p := range l.sub.Problems {
		offs[p.Offset] = true
	}
	if len(offs) == 0 {
		return nil
	}
	prefix := markerPrefix(l.sub.Text)
	at := make(map[int]string, len(offs))
	byMarker := make(map[string]int, len(offs))
	for off := range offs {
		m := prefix + strconv.Itoa(off) + "z"
		at[off], byMarker[m] = m, off
	}
	var doc yaml.Node
	text, _ := l.sub.Insert(at)
	if err := yaml.Unmarshal(spec.YAML12(text), &doc); err != nil {
		return nil
	}
	re := regexp.MustCompile(regexp.QuoteMeta(prefix) + `[0-9]+z`)
	out := make(map[int]where, len(offs))
	note := func(text, path string, comment bool) {
		for _, m := range re.FindAllString(text, -1) {
			if off, ok := byMarker[m]; ok {
				if _, seen := out[off]; !seen {
					out[off] = where{path: re.ReplaceAllString(path, ""), comment: comment, found: true}
				}
			}
		}
	}
	walkNodes(&doc, "", note)
	return out
}

// walkNodes calls note with the text of every scalar and key under n and
// the field path it sits at, and with every comment. Aliases are not
// followed: what they copy is visited where it is written.
func walkNodes(n *yaml.Node, path string, note func(text, path string, comment bool)) {
	for _, c := range []string{n.HeadComment, n.LineComment, n.FootComment} {
		if c != "" {
			note(c, path, true)
		}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			walkNodes(c, path, note)
		}
	case yaml.ScalarNode:
		note(n.Value, path, false)
	case yaml.SequenceNode:
		for i, c := range n.Content {
			walkNodes(c, path+"["+strconv.Itoa(i)+"]", note)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := path
			if k.Kind == yaml.ScalarNode && k.Value != "<<" { // a merge key's keys are its mapping's
				kp = joinPath(path, k.Value)
			}
			walkNodes(k, kp, note)
			walkNodes(v, kp, note)
		}
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// refNames returns the names of the references held by the field at path.
func (l *locator) refNames(path string) []string {
	var names []string
	for _, r := range l.sub.Refs {
		if w := l.at(r.Offset); w.found && !w.comment && w.path == path && !slices.Contains(names, r.Name) {
			names = append(names, r.Name)
		}
	}
	return names
}

// commentHint is added to a problem with a reference in a comment.
func commentHint(msg string) string {
	if strings.Contains(msg, "$${") {
		return msg
	}
	return msg + "; references in comments are substituted too: write $${ for a literal ${"
}

// whenRe matches the path of a when: condition.
var whenRe = regexp.MustCompile(`^steps\[\d+\]\.when$`)

// refHint explains references written in a when: condition whose
// evaluation failed.
func refHint(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return "; " + writeVars(names)
}

// writeVars says to read names with vars. instead of ${}.
func writeVars(names []string) string {
	refs, reads := make([]string, len(names)), make([]string, len(names))
	for i, n := range names {
		refs[i], reads[i] = "${"+n+"}", "vars."+n
	}
	return fmt.Sprintf("write %s instead of %s: a ${...} is replaced by its value as text before the condition is read",
		strings.Join(reads, " and "), strings.Join(refs, " and "))
}

// conditionProblem reports a when: condition that does not compile, at the
// character the compiler points at when the source shows the condition as
// it was compiled.
func conditionProblem(sub *vars.Result, loc *locator, pos *spec.Positions, wp, expr string, err error) *spec.FieldError {
	at := pos.At(wp)
	msg := err.Error()
	var ce *cel.Error
	isCEL := errors.As(err, &ce)
	if names := loc.refNames(wp); len(names) > 0 {
		// The compiler's hint would be about the substituted text.
		if isCEL {
			msg = ce.Cause
		}
		msg = writeVars(names) + ", which gave: " + msg
	} else if isCEL && ce.Line == 1 {
		if col, ok := exprColumn(sub.Source(), at, expr); ok {
			at.Col = col + ce.Col - 1
			msg = ce.Msg
		}
	}
	return &spec.FieldError{Pos: at, Path: wp, Msg: "invalid condition: " + msg}
}

// exprColumn returns the column of the source at which expr's first line
// starts, when the scalar at at is expr written plain or quoted without
// escapes on one line.
func exprColumn(src []byte, at spec.Pos, expr string) (int, bool) {
	if strings.ContainsAny(expr, "\n") {
		return 0, false
	}
	lines := bytes.Split(src, []byte("\n"))
	if at.Line < 1 || at.Line > len(lines) {
		return 0, false
	}
	line := []rune(strings.TrimSuffix(string(lines[at.Line-1]), "\r"))
	if at.Line == 1 && len(line) > 0 && line[0] == '\uFEFF' {
		line = line[1:]
	}
	if at.Col < 1 || at.Col > len(line) {
		return 0, false
	}
	rest := string(line[at.Col-1:])
	if strings.HasPrefix(rest, expr) {
		return at.Col, true
	}
	switch q := rest[0]; {
	case q == '"' && strings.HasPrefix(rest[1:], expr+`"`) && !strings.ContainsAny(expr, `\"`),
		q == '\'' && strings.HasPrefix(rest[1:], expr+`'`) && !strings.Contains(expr, `'`):
		return at.Col + 1, true
	}
	return 0, false
}

// identifier is a field that names something khook keys records and
// objects by, printed in every plan and log line: a secret there would be
// stored in clear or betray its length.
type identifier struct {
	re     *regexp.Regexp
	reason string
}

// identifiers are the spec's own identifier fields.
var identifiers = []identifier{
	{regexp.MustCompile(`^steps\[\d+\]\.name$`), "a step name is an identifier: it names the step's Job, keys the state record and labels the step in plans, progress and logs"},
	{regexp.MustCompile(`^metadata\.name$`), "metadata.name is an identifier: it names the run in plans and logs and, by default, the state record"},
	{regexp.MustCompile(`^state\.(name|namespace)$`), "the state record's name and namespace are identifiers: status prints them and the record is found by them"},
}

// blockIdentifiers are the identifier fields of the kinds' blocks (tag
// identifier), after the spec's own.
func blockIdentifiers(kinds *spec.StepKinds) []identifier {
	out := slices.Clone(identifiers)
	for _, kind := range kinds.Names() {
		t, _ := kinds.BlockType(kind)
		for _, f := range spec.StructInfoOf(t).Fields {
			if f.Identifier != "" {
				out = append(out, identifier{regexp.MustCompile(`^steps\[\d+\]\.` + regexp.QuoteMeta(kind) + `\.` + regexp.QuoteMeta(f.Name) + `$`), f.Identifier})
			}
		}
	}
	return out
}

// identifierValues are the values of the identifier fields of st's block.
func identifierValues(st *spec.Step) []string {
	b := reflect.ValueOf(st.Action())
	if b.Kind() != reflect.Pointer || b.IsNil() {
		return nil
	}
	var out []string
	for _, f := range spec.StructInfoOf(b.Elem().Type()).Fields {
		if v := b.Elem().FieldByName(f.GoName); f.Identifier != "" && v.Kind() == reflect.String {
			out = append(out, v.String())
		}
	}
	return out
}

// secretIdentifiers reports every secret variable written into an
// identifier field. Only when an identifier's value holds what a secret
// reference became is the spec parsed again to know for sure.
func secretIdentifiers(s *spec.Spec, sub *vars.Result, loc *locator, file string, kinds *spec.StepKinds) spec.ErrorList {
	ids := []string{s.Metadata.Name}
	if s.State != nil {
		ids = append(ids, s.State.Name, s.State.Namespace)
	}
	for i := range s.Steps {
		ids = append(ids, s.Steps[i].Name)
		ids = append(ids, identifierValues(&s.Steps[i])...)
	}
	suspect := func(r vars.Ref) bool {
		out := sub.Output(r)
		return r.Secret && len(out) > 0 && slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(id, string(out)) })
	}
	var out spec.ErrorList
	var fields []identifier
	for _, r := range sub.Refs {
		if !suspect(r) {
			continue
		}
		w := loc.at(r.Offset)
		if !w.found || w.comment {
			continue
		}
		if fields == nil {
			fields = blockIdentifiers(kinds)
		}
		for _, id := range fields {
			if id.re.MatchString(w.path) {
				line, col := sub.Position(r.Offset)
				out = append(out, &spec.FieldError{Pos: spec.Pos{File: file, Line: line, Col: col}, Path: w.path,
					Msg: fmt.Sprintf("uses the secret variable %s: %s, so it cannot hold a secret (use a plain variable)", r.Name, id.reason)})
				break
			}
		}
	}
	return out
}

// decodePlaceholders decodes the spec again with a placeholder where each
// reference with a problem substituted nothing: an empty value can break
// the YAML around it (args: [${A}, b] reads "[, b]"), and the problems
// of the rest of the spec are still worth reporting. The placeholders'
// fields are marked failed by the caller; problems that mention a
// placeholder are dropped. ok is false when this text does not parse
// either.
func decodePlaceholders(sub *vars.Result, file string, kinds *spec.StepKinds) (*spec.Spec, *spec.Positions, spec.ErrorList, bool) {
	prefix := markerPrefix(sub.Text) + "p"
	at := make(map[int]string, len(sub.Problems))
	for i, p := range sub.Problems {
		at[p.Offset] = prefix + strconv.Itoa(i) + "z"
	}
	text, mapPos := sub.Insert(at)
	s, pos, problems := spec.Decode(text, file, mapPos, kinds)
	if pos.Failed("") {
		return nil, nil, nil, false
	}
	problems = slices.DeleteFunc(problems, func(p *spec.FieldError) bool {
		return strings.Contains(p.Msg, prefix) || strings.Contains(p.Path, prefix)
	})
	return s, pos, problems, true
}
