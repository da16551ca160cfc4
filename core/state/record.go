package state

import (
	"crypto/rand"
	"encoding/base64"
	"slices"
	"time"
	"unicode/utf8"
)

// RecordVersion is the record's format version.
const RecordVersion = 1

// Step outcomes as the record keeps them. A step that skipIf found already
// done is recorded ok: it resumes like a success.
const (
	StepOK          = "ok"
	StepFailed      = "failed"
	StepInterrupted = "interrupted" // Ctrl-C cut it short
	StepSkipped     = "skipped"
	// StepRunning: a run is changing the step (re-running it with changed
	// inputs, or undoing it), or was killed before it recorded an end. The
	// record stops claiming the step's success before the run touches
	// anything of it, so a crash can never leave it claiming more than the
	// cluster has.
	StepRunning = "running"
)

// ResumeReason is the skip reason of a step the record lets a run resume.
const ResumeReason = "unchanged since it succeeded in a previous run (state record)"

// maxText bounds the error and detail text kept per step.
const maxText = 512

// Record is the journal of the last run of a spec.
type Record struct {
	Version      int        `json:"version"`
	Spec         string     `json:"spec"`
	SpecHash     string     `json:"specHash"`
	KhookVersion string     `json:"khookVersion"`
	Command      string     `json:"command"`
	RunStatus    string     `json:"runStatus"`
	StartedAt    time.Time  `json:"startedAt"`
	UpdatedAt    time.Time  `json:"updatedAt"`
	FinishedAt   *time.Time `json:"finishedAt,omitempty"`
	Salt         string     `json:"salt"`
	// TraceID is the OpenTelemetry trace of the run (hex), "" when the
	// run was not traced.
	TraceID string `json:"traceId,omitempty"`
	// Trimmed says what the record left out to fit its Secret (the step
	// details, ...), "" when nothing.
	Trimmed string                 `json:"trimmed,omitempty"`
	Steps   map[string]*StepRecord `json:"steps"`
}

// StepRecord is one step's last outcome.
type StepRecord struct {
	Type       string    `json:"type"`
	Hash       string    `json:"hash"`
	Status     string    `json:"status"`
	Attempts   int       `json:"attempts"`
	DurationMs int64     `json:"durationMs"`
	FinishedAt time.Time `json:"finishedAt"`
	// Error (failed) and Detail (what it did, or why it was skipped) are
	// redacted and truncated before they are recorded.
	Error  string `json:"error,omitempty"`
	Detail string `json:"detail,omitempty"`
	// StartedAt is when the step's first attempt began (nil: it never
	// started, or an earlier khook recorded it); Timeline is when each of
	// its attempts ran and waited, for the timeline picture (status
	// --timeline). Times only: nothing of what the step did.
	StartedAt *time.Time     `json:"startedAt,omitempty"`
	Timeline  []AttemptTimes `json:"timeline,omitempty"`
	// Reads are the file system calls ("op path", paths relative to the
	// kustomization) the build of each kustomize: source made when Hash
	// was computed, by source; the next run replays them to check the
	// hash without building. File paths only, never content.
	Reads map[string][]string `json:"reads,omitempty"`
}

// AttemptTimes is when one attempt of a step ran, in milliseconds after
// the step's StartedAt: from Start to End, waiting (for objects to become
// ready or gone, for a chart's hooks) during Waits.
type AttemptTimes struct {
	Start int64      `json:"start"`
	End   int64      `json:"end"`
	Waits [][2]int64 `json:"waits,omitempty"`
}

// Resumes reports whether a step with this input hash may be skipped: it
// succeeded with the same inputs.
func (r *Record) Resumes(name, hash string) bool {
	if r == nil {
		return false
	}
	s, ok := r.Steps[name]
	return ok && s.Status == StepOK && s.Hash == hash && hash != ""
}

// SaltBytes decodes the record's salt.
func (r *Record) SaltBytes() []byte {
	b, _ := base64.StdEncoding.DecodeString(r.Salt)
	return b
}

func newRecord() *Record {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt) // crypto/rand.Read never fails on supported platforms
	return &Record{Version: RecordVersion, Salt: base64.StdEncoding.EncodeToString(salt), Steps: map[string]*StepRecord{}}
}

// Truncate cuts s to the record's text limit on a character boundary.
func Truncate(s string) string { return cut(s, maxText) }

// cut shortens s to n bytes on a character boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "… (truncated)"
}

func (r *Record) clone() *Record {
	c := *r
	c.Steps = make(map[string]*StepRecord, len(r.Steps))
	for k, v := range r.Steps {
		s := *v
		if v.StartedAt != nil {
			t := *v.StartedAt
			s.StartedAt = &t
		}
		s.Timeline = slices.Clone(v.Timeline)
		c.Steps[k] = &s
	}
	if r.FinishedAt != nil {
		t := *r.FinishedAt
		c.FinishedAt = &t
	}
	return &c
}
