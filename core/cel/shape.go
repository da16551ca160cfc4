package cel

import (
	"strconv"
	"strings"
)

// Conditions in one spec mostly share a few shapes that differ only in
// names and literals: vars.get("ENABLE_X", "false") == "true" for many X.
// Compiling with cel-go costs tens of microseconds per expression (its
// ANTLR parser dominates), so each expression is reduced to its shape,
// which is compiled once, and its parameters are bound at evaluation:
//
//	vars.get("ENABLE_X", "false") == "true"  ->  vars.get(khp0, khp1) == khp2
//	vars.ENV == "prod"                        ->  vars[khp0] == khp1
//	has(vars.TOKEN)                           ->  (khp0 in vars)
//
// Each rewrite means exactly the same thing for a map of strings: a string
// literal and a string variable type-check and evaluate alike; vars.NAME and
// vars["NAME"] both fail with "no such key: NAME" when NAME is unset; has()
// on a map field tests the key. Only forms this file fully understands are
// rewritten: a literal with an escape, a raw, bytes or triple-quoted string,
// a comment, or a name that is a CEL reserved word stays as written, and an
// expression naming a parameter itself is not rewritten at all.

const paramPrefix = "khp"

// shape is a parameterized expression and the values of its parameters.
type shape struct {
	text   string
	params []string
}

var reserved = map[string]bool{
	"as": true, "break": true, "const": true, "continue": true, "else": true, "false": true,
	"for": true, "function": true, "if": true, "import": true, "in": true, "let": true,
	"loop": true, "namespace": true, "null": true, "package": true, "return": true,
	"true": true, "var": true, "void": true, "while": true,
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' }

// normalize returns expr's shape; ok is false when expr must be compiled as
// written.
func normalize(expr string) (s shape, ok bool) {
	var b strings.Builder
	b.Grow(len(expr) + 16)
	param := func(v string) {
		b.WriteString(paramPrefix)
		b.WriteString(strconv.Itoa(len(s.params)))
		s.params = append(s.params, v)
	}
	n := len(expr)
	for i := 0; i < n; {
		c := expr[i]
		switch {
		case c == '/' && i+1 < n && expr[i+1] == '/':
			return shape{}, false // a comment: keep it simple
		case c == '"' || c == '\'':
			end, simple := simpleString(expr, i)
			if end < 0 {
				return shape{}, false // unterminated: let cel-go say so
			}
			if simple && !afterDot(expr, i) { // ."x" is a syntax error, .khp0 is not
				param(expr[i+1 : end])
			} else {
				b.WriteString(expr[i : end+1])
			}
			i = end + 1
		case isIdentStart(c):
			j := i + 1
			for j < n && isIdentChar(expr[j]) {
				j++
			}
			word := expr[i:j]
			prefixed := j-i <= 2 && strings.Trim(word, "rRbB") == "" && j < n && (expr[j] == '"' || expr[j] == '\'')
			switch {
			case prefixed:
				// a raw or bytes literal: copy it whole
				end := literalEnd(expr, j)
				if end < 0 {
					return shape{}, false
				}
				b.WriteString(expr[i : end+1])
				i = end + 1
				continue
			case strings.HasPrefix(word, paramPrefix):
				return shape{}, false
			case word == "has" && !afterDot(expr, i):
				if name, end, ok := hasVarsField(expr, j); ok {
					b.WriteString("(")
					param(name)
					b.WriteString(" in vars)")
					i = end
					continue
				}
			case word == "vars" && !afterDot(expr, i):
				if name, end, ok := varsField(expr, j); ok {
					b.WriteString("vars[")
					param(name)
					b.WriteString("]")
					i = end
					continue
				}
			}
			b.WriteString(word)
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	s.text = b.String()
	return s, true
}

// simpleString returns the index of the closing quote of the string that
// opens at i, and whether its content is plain: no escapes, no newlines,
// not triple-quoted. end is -1 when the string is unterminated.
func simpleString(expr string, i int) (end int, simple bool) {
	q := expr[i]
	if strings.HasPrefix(expr[i:], strings.Repeat(string(q), 3)) {
		return literalEnd(expr, i), false
	}
	for j := i + 1; j < len(expr); j++ {
		switch expr[j] {
		case '\\':
			return literalEnd(expr, i), false
		case '\n', '\r':
			return -1, false
		case q:
			return j, true
		}
	}
	return -1, false
}

// literalEnd finds the end of any string literal opening at i (quote at
// i), honouring escapes and triple quotes; -1 when unterminated.
func literalEnd(expr string, i int) int {
	q := expr[i]
	triple := strings.Repeat(string(q), 3)
	if strings.HasPrefix(expr[i:], triple) {
		if k := strings.Index(expr[i+3:], triple); k >= 0 {
			return i + 3 + k + 2
		}
		return -1
	}
	for j := i + 1; j < len(expr); j++ {
		switch expr[j] {
		case '\\':
			j++
		case q:
			return j
		case '\n', '\r':
			return -1
		}
	}
	return -1
}

func skipSpace(expr string, i int) int {
	for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n' || expr[i] == '\r') {
		i++
	}
	return i
}

// afterDot reports whether the identifier at i is a member selection
// (x.vars), not the variable.
func afterDot(expr string, i int) bool {
	j := i - 1
	for j >= 0 && (expr[j] == ' ' || expr[j] == '\t' || expr[j] == '\n' || expr[j] == '\r') {
		j--
	}
	return j >= 0 && expr[j] == '.'
}

// varsField matches ".NAME" (not a call: no "(" after it) at i, right after
// the identifier vars; end is just past NAME.
func varsField(expr string, i int) (name string, end int, ok bool) {
	j := skipSpace(expr, i)
	if j >= len(expr) || expr[j] != '.' {
		return "", 0, false
	}
	j = skipSpace(expr, j+1)
	k := j
	for k < len(expr) && isIdentChar(expr[k]) {
		k++
	}
	if k == j || !isIdentStart(expr[j]) || reserved[expr[j:k]] {
		return "", 0, false
	}
	if after := skipSpace(expr, k); after < len(expr) && expr[after] == '(' {
		return "", 0, false // vars.get(...): a method call
	}
	return expr[j:k], k, true
}

// hasVarsField matches "(vars.NAME)" at i, right after the identifier has.
func hasVarsField(expr string, i int) (name string, end int, ok bool) {
	j := skipSpace(expr, i)
	if j >= len(expr) || expr[j] != '(' {
		return "", 0, false
	}
	j = skipSpace(expr, j+1)
	if !strings.HasPrefix(expr[j:], "vars") || (j+4 < len(expr) && isIdentChar(expr[j+4])) {
		return "", 0, false
	}
	name, k, ok := varsField(expr, j+4)
	if !ok {
		return "", 0, false
	}
	k = skipSpace(expr, k)
	if k >= len(expr) || expr[k] != ')' {
		return "", 0, false
	}
	return name, k + 1, true
}
