package render

import (
	"fmt"
	"io"

	"khook.io/core/engine"
)

// Note writes one of the engine's notes to w (standard error, redacting)
// as khook words it: a line as it is, "note: ...", "warning: ...", a
// step's "Warning: STEP: ..." as kubectl words the API server's, or a
// release's NOTES under a header.
func Note(w io.Writer, n engine.Note) {
	switch n.Kind {
	case engine.NoteInfo:
		fmt.Fprintf(w, "note: %s\n", n.Text)
	case engine.NoteWarning:
		fmt.Fprintf(w, "warning: %s\n", n.Text)
	case engine.NoteStepWarning:
		fmt.Fprintf(w, "Warning: %s: %s\n", n.Subject, n.Text)
	case engine.NoteRelease:
		fmt.Fprintf(w, "NOTES of %s:\n%s\n", n.Subject, n.Text)
	default:
		fmt.Fprintln(w, n.Text)
	}
}

// Notes is a notes receiver writing each note to w.
func Notes(w io.Writer) func(engine.Note) {
	if w == nil {
		return nil
	}
	return func(n engine.Note) { Note(w, n) }
}
