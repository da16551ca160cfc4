package engine

import "fmt"

// NoteKind says what a note is, and so how the CLI words it.
type NoteKind int

const (
	// NoteLine is a line said as it is ("waiting for the run lock ...").
	NoteLine NoteKind = iota
	// NoteInfo is a note ("note: ..."): a run holds the lock of the
	// record plan, diff or status read.
	NoteInfo
	// NoteWarning is a warning of khook's ("warning: ..."): what a day-2
	// flag names that will not happen, a lock that could not be released.
	NoteWarning
	// NoteStepWarning is a step's or the API server's warning, once per
	// step ("Warning: STEP: ..."); Subject is the step.
	NoteStepWarning
	// NoteRelease is a release's NOTES (Engine.ReleaseNotes); Subject is
	// the release.
	NoteRelease
)

// Note is what the engine says besides the events of a run, raw: whoever
// prints it passes it through the redactor (the engine has already
// redacted what steps and the cluster report).
type Note struct {
	Kind    NoteKind
	Subject string
	Text    string
}

// UsageError is a problem of the day-2 flags against the spec (a --steps
// entry that matches no step, a --no-needs need missing): nothing ran, and
// the user must change the command (the CLI exits 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }

func (e *UsageError) Unwrap() error { return e.Err }

// usage marks err as a UsageError.
func usage(err error) error { return &UsageError{Err: err} }

// StoppedError is a plan cut short (Ctrl-C, a deadline) before every step
// was assessed: predictions cut short are no plan to pass a check with.
type StoppedError struct{ Cause error }

func (e *StoppedError) Error() string {
	return fmt.Sprintf("plan stopped (%v) before every step was assessed", e.Cause)
}

func (e *StoppedError) Unwrap() error { return e.Cause }
