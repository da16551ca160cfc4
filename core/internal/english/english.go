// Package english words counts for messages, in one place: the steps'
// outcomes and the renderers print "1 object", "3 objects".
package english

import "strconv"

// CountNoun is n followed by noun, in the plural unless n is 1: "1
// object", "3 objects". The plural is noun+"s", which every noun khook
// counts takes.
func CountNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// IsAre is "is" for one, "are" for any other count.
func IsAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
