package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"khook.io/core/internal/yamlerr"
)

// Duration is a Go duration written as a string (90s, 10m, 1h30m).
type Duration struct {
	time.Duration
	Raw string
}

// PosMapper maps a position in the parsed (substituted) text back to the
// file as written. Nil means identity.
type PosMapper func(line, col int) (int, int)

// Positions records where each field path of a decoded document sits in
// the file as written.
type Positions struct {
	file   string
	paths  map[string]Pos
	failed map[string]bool
	blocks *blockIndex // literal block scalars: see InBlock
}

// At returns the position of path, or of its nearest recorded parent.
func (p *Positions) At(path string) Pos {
	if p == nil {
		return Pos{}
	}
	for {
		if pos, ok := p.paths[path]; ok {
			return pos
		}
		if path == "" {
			return Pos{File: p.file}
		}
		path = parentPath(path)
	}
}

// PathPos is one recorded field path and its position.
type PathPos struct {
	Path string
	Pos  Pos
}

// All returns every recorded field path with its position, unordered.
func (p *Positions) All() []PathPos {
	out := make([]PathPos, 0, len(p.paths))
	for path, pos := range p.paths {
		out = append(out, PathPos{path, pos})
	}
	return out
}

// Failed reports whether path had a problem already (a decode error, or a
// variable that could not be substituted): its value is unknown, so further
// rules about it would only add noise.
func (p *Positions) Failed(path string) bool { return p.failed[path] }

// MarkFailed records that path's value is unknown (see Failed).
func (p *Positions) MarkFailed(path string) { p.failed[path] = true }

// Has reports whether path was present in the document.
func (p *Positions) Has(path string) bool {
	_, ok := p.paths[path]
	return ok
}

// parentPath strips the last element of a field path: a.b[2].c -> a.b[2] -> a.b -> a -> "".
func parentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndexByte(path, '['); i >= 0 {
			return path[:i]
		}
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

// Decode parses YAML text into a Spec, strictly: unknown fields, wrong
// types and duplicate keys are errors. It returns the spec (as complete as
// the input allows), where each field sits, and every problem found. file
// names the source in errors; mapPos maps positions in text back to the
// file as written (text may be the result of variable substitution);
// kinds are the step kinds a step's action key may name.
//
// The text holds one YAML document: empty documents (only comments, or
// null) are skipped, a second document is an error. A syntax error, a
// character YAML does not allow and an alias bomb are each the only problem
// reported: the document cannot be read any further.
func Decode(text []byte, file string, mapPos PosMapper, kinds *StepKinds) (*Spec, *Positions, ErrorList) {
	d := &decoder{
		file:   file,
		mapPos: mapPos,
		kinds:  kinds,
		pos:    &Positions{file: file, paths: make(map[string]Pos, 64), failed: map[string]bool{}, blocks: newBlockIndex(text, mapPos)},
	}
	s := &Spec{File: file, kinds: kinds}
	root, ok := d.document(text)
	if !ok {
		d.pos.failed[""] = true
		return s, d.pos, d.errs
	}
	d.pos.paths[""] = d.at(root)
	d.decodeValue(root, reflect.ValueOf(s).Elem(), "")
	return s, d.pos, d.errs
}

// document returns the root node of text's one document. It reports a
// syntax error, an empty text, a second document and an alias bomb, and
// returns false when there is nothing to decode.
func (d *decoder) document(text []byte) (*yaml.Node, bool) {
	text = YAML12(text)
	dec := yaml.NewDecoder(bytes.NewReader(text))
	var root *yaml.Node
	for {
		doc := new(yaml.Node)
		err := dec.Decode(doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			d.errs = append(d.errs, d.syntaxError(text, err))
			return nil, false
		}
		if len(doc.Content) == 0 || isNull(doc.Content[0]) {
			continue // only comments, or an explicit null: nothing, as kubectl skips it
		}
		if root != nil {
			d.errs = append(d.errs, &FieldError{Pos: d.at(doc), Msg: "a second YAML document starts here: a spec file holds exactly one document (put each spec in its own file)"})
			break
		}
		root = doc.Content[0]
	}
	if root == nil {
		d.errs = append(d.errs, &FieldError{Pos: Pos{File: d.file, Line: 1, Col: 1}, Msg: "the spec is empty"})
		return nil, false
	}
	if bomb := aliasBomb(root); bomb != nil {
		d.errs = append(d.errs, &FieldError{Pos: d.at(bomb.alias), Msg: fmt.Sprintf(
			"excessive aliasing: the alias *%s expands to %s nodes, %s in the whole document (an alias bomb, which YAML parsers refuse)",
			bomb.alias.Value, countString(bomb.size), countString(bomb.total))})
		return nil, false
	}
	return root, true
}

var yaml12Re = regexp.MustCompile(`(?m)^%YAML[ \t]+1\.2([ \t]|\r?$)`)

// YAML12 returns text with a "%YAML 1.2" directive read as "%YAML 1.1":
// khook reads YAML 1.2 (decision 1), while yaml.v3 refuses any version but
// 1.1 as an incompatible document. Positions do not change.
func YAML12(text []byte) []byte {
	if !bytes.Contains(text, []byte("%YAML")) {
		return text
	}
	return yaml12Re.ReplaceAllFunc(text, func(m []byte) []byte {
		return bytes.Replace(m, []byte("1.2"), []byte("1.1"), 1)
	})
}

type decoder struct {
	file    string
	mapPos  PosMapper
	kinds   *StepKinds
	pos     *Positions
	errs    ErrorList
	merging map[*yaml.Node]bool // mappings being merged (<<), against cycles
}

func (d *decoder) at(n *yaml.Node) Pos {
	line, col := n.Line, n.Column
	if d.mapPos != nil {
		line, col = d.mapPos(line, col)
	}
	return Pos{File: d.file, Line: line, Col: col}
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.pos.failed[path] = true
	d.errs = append(d.errs, &FieldError{Pos: d.at(n), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// syntaxError locates a yaml.v3 error about text (see yamlerr), in the
// file as written.
func (d *decoder) syntaxError(text []byte, err error) *FieldError {
	e := yamlerr.Locate(text, err, yamlerr.Mapper(d.mapPos))
	return &FieldError{Pos: Pos{File: d.file, Line: e.Line, Col: e.Col}, Msg: "invalid YAML: " + e.Msg, Syntax: true}
}

var (
	durationType = reflect.TypeOf(Duration{})
	anyType      = reflect.TypeOf((*any)(nil)).Elem()
	stepType     = reflect.TypeOf(Step{})
)

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.ShortTag() {
	case "!!null":
		return "null"
	case "!!bool":
		return "a boolean"
	case "!!int":
		return "a number"
	case "!!float":
		return "a number"
	}
	return "a string"
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// decodeValue decodes node into v (addressable), recording path's position.
func (d *decoder) decodeValue(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		// The anchored value, positioned where the alias uses it.
		t := *n.Alias
		t.Line, t.Column = n.Line, n.Column
		n = &t
	}
	if path != "" {
		d.pos.paths[path] = d.at(n)
	}
	t := v.Type()
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode || isNull(n) {
			d.errorf(n, path, "must be a duration such as 90s, 10m or 1h, not %s", kindName(n))
			return
		}
		dur, err := time.ParseDuration(n.Value)
		if err != nil {
			d.errorf(n, path, "invalid duration %q: use a Go duration such as 90s, 10m or 1h30m", n.Value)
			return
		}
		v.Set(reflect.ValueOf(Duration{Duration: dur, Raw: n.Value}))
		return
	case t == anyType:
		if isNull(n) {
			return
		}
		var x any
		if err := n.Decode(&x); err != nil {
			d.errorf(n, path, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
			return
		}
		v.Set(reflect.ValueOf(&x).Elem())
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		ev := reflect.New(t.Elem())
		if isNull(n) && t.Elem().Kind() != reflect.Struct {
			return // an explicit null for a scalar pointer means "unset"
		}
		before := len(d.errs)
		d.decodeValue(n, ev.Elem(), path)
		if len(d.errs) == before || (t.Elem().Kind() == reflect.Struct && t.Elem() != durationType) {
			v.Set(ev) // a scalar that failed to decode stays unset
		}
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if isNull(n) {
			// an empty list written as "key:" — keep it non-nil so presence is known
			v.Set(reflect.MakeSlice(t, 0, 0))
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.errorf(n, path, "must be a list, not %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decodeValue(c, s.Index(i), path+"["+strconv.Itoa(i)+"]")
		}
		v.Set(s)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.String:
		if isNull(n) {
			return
		}
		if n.Kind != yaml.ScalarNode {
			d.errorf(n, path, "must be a string, not %s", kindName(n))
			return
		}
		d.pos.blocks.note(n, path)
		v.SetString(n.Value)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			d.errorf(n, path, "must be true or false, not %s", describeScalar(n))
			return
		}
		b, err := strconv.ParseBool(strings.ToLower(n.Value))
		if err != nil {
			d.errorf(n, path, "must be true or false, not %q", n.Value)
			return
		}
		v.SetBool(b)
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.errorf(n, path, "must be a whole number, not %s", describeScalar(n))
			return
		}
		i, err := strconv.ParseInt(n.Value, 0, 64)
		if err != nil {
			d.errorf(n, path, "must be a whole number, not %q", n.Value)
			return
		}
		v.SetInt(i)
	default:
		panic(fmt.Sprintf("spec: decoder has no rule for %s", t))
	}
}

func describeScalar(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		return strconv.Quote(n.Value)
	}
	return kindName(n)
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "must be a mapping, not %s", kindName(n))
		return
	}
	t := v.Type()
	m := reflect.MakeMapWithSize(t, len(n.Content)/2)
	for _, e := range d.entries(n, path) {
		k, val := e.key, e.val
		kp := path + "." + k.Value
		ev := reflect.New(t.Elem()).Elem()
		if t.Elem().Kind() == reflect.String {
			// map[string]string (job env): any scalar, taken as written
			if val.Kind != yaml.ScalarNode {
				d.errorf(val, kp, "must be a string, not %s", kindName(val))
				continue
			}
			d.pos.paths[kp] = d.at(val)
			ev.SetString(val.Value)
		} else {
			d.decodeValue(val, ev, kp)
		}
		m.SetMapIndex(reflect.ValueOf(k.Value), ev)
	}
	v.Set(m)
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	info := structInfoOf(v.Type())
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "must be a mapping, not %s", kindName(n))
		return
	}
	for _, e := range d.entries(n, path) {
		k, val := e.key, e.val
		kp := joinPath(path, k.Value)
		f, ok := info.byName[k.Value]
		if !ok && info.Type == stepType && d.kinds.index(k.Value) >= 0 {
			d.action(val, v.Addr().Interface().(*Step), k.Value, kp)
			continue
		}
		if !ok {
			d.errorf(k, kp, "%s", d.unknownFieldMessage(info, k.Value))
			continue
		}
		d.decodeValue(val, v.Field(f.index), kp)
	}
}

// action decodes a step's block written under the action key kind into a
// new block of that kind, as a pointer field is decoded (present, even
// null or with problems, it is set). Of several action keys (a validation
// error), the step keeps the first kind in the kinds' order.
func (d *decoder) action(n *yaml.Node, st *Step, kind, path string) {
	t, _ := d.kinds.BlockType(kind)
	pv := reflect.New(reflect.PointerTo(t)).Elem()
	d.decodeValue(n, pv, path)
	if st.block == nil || d.kinds.index(kind) < d.kinds.index(st.kind) {
		st.SetAction(kind, pv.Interface())
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// FieldInfo describes one decodable field of a spec struct.
type FieldInfo struct {
	Name     string // YAML key
	GoName   string
	Required bool
	Doc      string
	Enum     []string
	Default  string
	Schema   string
	// Identifier, when set, says why the field is an identifier (tag
	// identifier): it cannot hold a secret.
	Identifier string
	Type       reflect.Type
	index      int
}

// StructInfo describes a spec struct: its fields in declaration order and
// its exactly-one-of group, if any.
type StructInfo struct {
	Type   reflect.Type
	Fields []FieldInfo
	OneOf  []string
	byName map[string]*FieldInfo
}

// Field returns the field with YAML key name.
func (s *StructInfo) Field(name string) (*FieldInfo, bool) {
	f, ok := s.byName[name]
	return f, ok
}

var structInfos sync.Map // reflect.Type -> *StructInfo

// StructInfoOf returns the field metadata of a spec struct type, computed
// once per type.
func StructInfoOf(t reflect.Type) *StructInfo { return structInfoOf(t) }

func structInfoOf(t reflect.Type) *StructInfo {
	if si, ok := structInfos.Load(t); ok {
		return si.(*StructInfo)
	}
	si := &StructInfo{Type: t, byName: map[string]*FieldInfo{}}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag
		if sf.Name == "_" {
			if one, ok := strings.CutPrefix(tag.Get("khook"), "oneof="); ok {
				si.OneOf = strings.Split(one, ",")
			}
			continue
		}
		name := tag.Get("yaml")
		if name == "" || name == "-" {
			continue
		}
		fi := FieldInfo{
			Name:       name,
			GoName:     sf.Name,
			Required:   tag.Get("khook") == "required",
			Doc:        tag.Get("doc"),
			Default:    tag.Get("default"),
			Schema:     tag.Get("schema"),
			Identifier: tag.Get("identifier"),
			Type:       sf.Type,
			index:      i,
		}
		if e := tag.Get("enum"); e != "" {
			fi.Enum = strings.Split(e, ",")
		}
		si.Fields = append(si.Fields, fi)
	}
	for i := range si.Fields {
		si.byName[si.Fields[i].Name] = &si.Fields[i]
	}
	actual, _ := structInfos.LoadOrStore(t, si)
	return actual.(*StructInfo)
}

// unknownFieldMessage says that key is no field of the struct info
// describes, with what the writer likely meant.
func (d *decoder) unknownFieldMessage(info *StructInfo, key string) string {
	msg := fmt.Sprintf("unknown field %q", key)
	if note := nonASCIINote(key); note != "" {
		msg = "unknown field: " + note
		if folded := foldLookalikes(key); folded != key {
			if _, ok := info.byName[folded]; ok {
				return msg + fmt.Sprintf(" (did you mean %q?)", folded)
			}
		}
	}
	if h, ok := reflect.New(info.Type).Interface().(Hinter); ok {
		if hint := h.Hint(key); hint != "" {
			return msg + ": " + hint
		}
	}
	step := info.Type == stepType
	if key == "type" && step {
		return msg + ": the action key (" + orList(d.kinds.nameList()) + ") sets the step type"
	}
	names := make([]string, len(info.Fields))
	for i, f := range info.Fields {
		names[i] = f.Name
	}
	if step {
		names = append(names, d.kinds.nameList()...)
	}
	if s := closest(key, names); s != "" {
		return msg + fmt.Sprintf(" (did you mean %q?)", s)
	}
	if step {
		for _, kind := range d.kinds.nameList() {
			t, _ := d.kinds.BlockType(kind)
			if _, ok := structInfoOf(t).byName[key]; ok {
				return msg + fmt.Sprintf(": %s is a field of the action block (for example under %s:), not of the step", key, kind)
			}
		}
	}
	return msg
}

// closest returns the candidate nearest to s when it is near enough to be
// a likely typo: equal ignoring case, or within an edit distance that grows
// with the length.
func closest(s string, candidates []string) string {
	s = foldLookalikes(s)
	best, bestDist := "", 1<<30
	for _, c := range candidates {
		if strings.EqualFold(s, c) {
			return c
		}
		d := levenshtein(strings.ToLower(s), strings.ToLower(c))
		if d < bestDist {
			best, bestDist = c, d
		}
	}
	limit := 1
	if len(s) >= 5 {
		limit = 2
	}
	if len(s) >= 10 {
		limit = 3
	}
	if bestDist <= limit {
		return best
	}
	return ""
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
