package vars

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"

	"github.com/Masterminds/sprig/v3"
)

const (
	whyClock   = "it is nondeterministic (it reads the clock); substitution must give the same spec for plan and apply"
	whyRandom  = "it is nondeterministic (it is random); substitution must give the same spec for plan and apply"
	whySalted  = "it is nondeterministic (random salt or IV); substitution must give the same spec for plan and apply"
	whyCrypto  = "it generates keys, certificates or passwords; substitution must give the same spec for plan and apply, so create such material outside khook and pass it in as a secret variable"
	whyZone    = "its result depends on the local time zone of the machine running khook; substitution must give the same spec for plan and apply"
	whyEnv     = "it reads the process environment, bypassing the variable prefixes (--var-prefix, --secret-prefix); pass the value in as a variable instead"
	whyNetwork = "it queries the network; substitution must give the same spec for plan and apply"
	whyOS      = "its result depends on the host operating system; use base, dir, clean, ext or isAbs instead"
)

// excluded lists the functions of sprig's function map that khook
// pipelines may not use, with the reason. Some are already absent from
// sprig's hermetic map; they are listed so that using one gets this
// explanation rather than "unknown function".
var excluded = map[string]string{
	// Clock.
	"now": whyClock, "date": whyClock, "dateInZone": whyClock, "date_in_zone": whyClock,
	"dateModify": whyClock, "date_modify": whyClock, "htmlDate": whyClock, "htmlDateInZone": whyClock,
	"ago": whyClock, "durationRound": whyClock,
	// Local time zone.
	"toDate": whyZone, "mustToDate": whyZone,
	// Randomness.
	"randAlphaNum": whyRandom, "randAlpha": whyRandom, "randAscii": whyRandom, "randNumeric": whyRandom,
	"randBytes": whyRandom, "randInt": whyRandom, "shuffle": whyRandom, "uuidv4": whyRandom,
	"bcrypt": whySalted, "htpasswd": whySalted, "encryptAES": whySalted,
	// Key, certificate and password generators.
	"genPrivateKey": whyCrypto, "derivePassword": whyCrypto, "buildCustomCert": whyCrypto,
	"genCA": whyCrypto, "genCAWithKey": whyCrypto, "genSelfSignedCert": whyCrypto,
	"genSelfSignedCertWithKey": whyCrypto, "genSignedCert": whyCrypto, "genSignedCertWithKey": whyCrypto,
	// Environment and network.
	"env": whyEnv, "expandenv": whyEnv, "getHostByName": whyNetwork,
	// Host OS path rules.
	"osBase": whyOS, "osClean": whyOS, "osDir": whyOS, "osExt": whyOS, "osIsAbs": whyOS,
}

var errExcluded = errors.New("function not available in khook pipelines")

// excludedStub stands in for an excluded function so that a pipeline using
// it parses and the function can be named with its reason. It never runs:
// such a pipeline is rejected before execution.
func excludedStub(...any) (string, error) { return "", errExcluded }

var (
	funcsOnce sync.Once
	funcs     template.FuncMap
)

// funcMap returns khook's pipeline function map, built on first use.
func funcMap() template.FuncMap {
	funcsOnce.Do(func() {
		m := sprig.HermeticTxtFuncMap()
		for name := range excluded {
			m[name] = excludedStub
		}
		funcs = m
	})
	return funcs
}

// pipeline is a compiled ${NAME|pipeline}. Exactly one of tmpl and problem
// is set.
type pipeline struct {
	text    string
	tmpl    *template.Template
	problem string
}

// maxCached bounds the pipeline cache; beyond it (only reachable by
// generated input such as fuzzing) pipelines are compiled per use.
const maxCached = 1024

// cache holds compiled pipelines by text. Compiled templates are
// independent of each other and safe for concurrent execution.
var cache struct {
	mu sync.RWMutex
	m  map[string]*pipeline
}

// getPipeline returns the compiled pipeline for text (already trimmed).
func getPipeline(text []byte) *pipeline {
	cache.mu.RLock()
	p := cache.m[string(text)]
	cache.mu.RUnlock()
	if p != nil {
		return p
	}
	p = compile(string(text))
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if q := cache.m[p.text]; q != nil {
		return q // compiled concurrently by another caller
	}
	if cache.m == nil {
		cache.m = make(map[string]*pipeline)
	}
	if len(cache.m) < maxCached {
		cache.m[p.text] = p
	}
	return p
}

// builtinNames are text/template's predefined functions, for parsing.
var builtinNames = map[string]any{
	"and": true, "call": true, "html": true, "index": true, "slice": true, "js": true, "len": true,
	"not": true, "or": true, "print": true, "printf": true, "println": true, "urlquery": true,
	"eq": true, "ge": true, "gt": true, "le": true, "lt": true, "ne": true,
}

// tmplName names every pipeline template; it shows in text/template errors,
// which stripTemplatePrefix removes.
const tmplName = "pipeline"

// compile parses text as the pipeline of {{ . | text }}. The template gets
// only the functions the pipeline uses: handing text/template sprig's whole
// map costs hundreds of microseconds of reflection per template.
func compile(text string) *pipeline {
	p := &pipeline{text: text}
	fm := funcMap()
	trees, err := parse.Parse(tmplName, "{{ . | "+text+" }}", "{{", "}}", map[string]any(fm), builtinNames)
	if err != nil {
		msg := stripTemplatePrefix(err.Error(), tmplName)
		if fn, ok := undefinedFunction(msg); ok {
			p.problem = fmt.Sprintf("unknown function %q in pipeline %q", fn, text)
		} else {
			p.problem = fmt.Sprintf("invalid pipeline %q: %s", text, msg)
		}
		return p
	}
	tree := trees[tmplName]
	if len(trees) != 1 || tree == nil || tree.Root == nil || len(tree.Root.Nodes) != 1 || tree.Root.Nodes[0].Type() != parse.NodeAction {
		p.problem = fmt.Sprintf("invalid pipeline %q", text)
		return p
	}
	var bad []string
	used := template.FuncMap{}
	walkIdentifiers(tree.Root, func(ident string) {
		if why, ok := excluded[ident]; ok {
			bad = append(bad, fmt.Sprintf("function %q is not available in khook pipelines: %s", ident, why))
		} else if fn, ok := fm[ident]; ok {
			used[ident] = fn // else a text/template builtin
		}
	})
	if len(bad) > 0 {
		p.problem = strings.Join(bad, "; ")
		return p
	}
	t, err := template.New(tmplName).Funcs(used).AddParseTree(tmplName, tree)
	if err != nil {
		p.problem = fmt.Sprintf("invalid pipeline %q: %v", text, err)
		return p
	}
	p.tmpl = t
	return p
}

// walkIdentifiers calls visit for every function name used in n.
func walkIdentifiers(n parse.Node, visit func(string)) {
	switch n := n.(type) {
	case *parse.ListNode:
		for _, c := range n.Nodes {
			walkIdentifiers(c, visit)
		}
	case *parse.ActionNode:
		walkIdentifiers(n.Pipe, visit)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walkIdentifiers(c, visit)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walkIdentifiers(a, visit)
		}
	case *parse.ChainNode:
		walkIdentifiers(n.Node, visit)
	case *parse.IdentifierNode:
		visit(n.Ident)
	}
}

// stripTemplatePrefix turns text/template's `template: pipeline:1:12:
// executing "pipeline" at <fail>: error calling fail: x` into `error calling
// fail: x`, and `template: pipeline:1: function "x" not defined` into
// `function "x" not defined`.
func stripTemplatePrefix(msg, name string) string {
	if rest, ok := strings.CutPrefix(msg, "template: "+name+":"); ok {
		rest = strings.TrimLeft(rest, "0123456789:")
		msg = strings.TrimSpace(rest)
	}
	if rest, ok := strings.CutPrefix(msg, `executing "`+name+`" at <`); ok {
		if i := strings.Index(rest, ">: "); i >= 0 {
			msg = rest[i+3:]
		}
	}
	return msg
}

// undefinedFunction extracts the name from `function "x" not defined`.
func undefinedFunction(msg string) (string, bool) {
	rest, ok := strings.CutPrefix(msg, `function "`)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, `" not defined`)
	return name, ok && !strings.Contains(name, `"`)
}
