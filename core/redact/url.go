package redact

import (
	"bytes"
	"strings"
)

// StripURLUserinfo replaces the userinfo of every URL-looking substring with
// Mask: "https://u:p@host/x" becomes "https://***@host/x". Any scheme is
// covered (http, https, oci, ssh, git+https, ...); a "://" followed by an
// authority containing '@' is enough. The authority ends at '/', '?', '#',
// whitespace, a quote, '<', '>' or '\'; the userinfo runs to the last '@'
// before that end, so an unencoded '@' inside a password is masked too.
// When nothing needs stripping, s itself is returned without allocating.
func StripURLUserinfo(s string) string {
	i := strings.Index(s, "://")
	if i < 0 || strings.IndexByte(s[i:], '@') < 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for i >= 0 {
		us, ue := userinfoAt(s, i)
		if ue > us {
			if b.Cap() == 0 {
				b.Grow(len(s))
			}
			b.WriteString(s[last:us])
			b.WriteString(Mask)
			last = ue
		}
		next := strings.Index(s[i+3:], "://")
		if next < 0 {
			break
		}
		i += 3 + next
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func stripURLUserinfoBytes(s []byte) []byte {
	i := bytes.Index(s, []byte("://"))
	if i < 0 || bytes.IndexByte(s[i:], '@') < 0 {
		return s
	}
	var out []byte
	last := 0
	for i >= 0 {
		us, ue := userinfoAt(s, i)
		if ue > us {
			if out == nil {
				out = make([]byte, 0, len(s))
			}
			out = append(out, s[last:us]...)
			out = append(out, Mask...)
			last = ue
		}
		next := bytes.Index(s[i+3:], []byte("://"))
		if next < 0 {
			break
		}
		i += 3 + next
	}
	if out == nil {
		return s
	}
	return append(out, s[last:]...)
}

// userinfoAt returns the userinfo interval [start, end) of the URL whose
// "://" is at s[sep:], or equal values when there is none to strip (no '@',
// empty userinfo, or already masked).
func userinfoAt[T text](s T, sep int) (int, int) {
	start := sep + 3
	at := -1
	for j := start; j < len(s); j++ {
		c := s[j]
		if authorityEnd(c) {
			break
		}
		if c == '@' {
			at = j
		}
	}
	if at <= start || string(s[start:at]) == Mask {
		return start, start
	}
	return start, at
}

func authorityEnd(c byte) bool {
	switch c {
	case '/', '?', '#', ' ', '\t', '\n', '\r', '\v', '\f', '"', '\'', '`', '<', '>', '\\':
		return true
	}
	return false
}
