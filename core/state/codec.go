package state

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The record's keys in the Secret. GzipDataKey holds the record's JSON
// gzipped, as helm stores its releases for the same 1 MiB limit; DataKey is
// where khook before the compressed record kept it plain. Both are read;
// every write stores GzipDataKey alone, so the next write migrates a plain
// record.
const (
	GzipDataKey = "record.json.gz"
	DataKey     = "record.json"
)

// Size limits.
const (
	// MaxSecretBytes is the most data a Secret holds (the API server's
	// corev1.MaxSecretSize: the sum of its values).
	MaxSecretBytes = 1 << 20
	// recordBudget is what the compressed record may take: the limit less
	// a margin, so that a record at the budget is never the write the API
	// server refuses.
	recordBudget = MaxSecretBytes - 16<<10
	// shortError is what an error text is cut to when the record must
	// shrink.
	shortError = 64
)

// maxDecoded bounds the JSON a record may inflate to when read (a real
// one inflates about fivefold).
var maxDecoded = 64 << 20

// DecodeSecret reads the record a record Secret holds, from GzipDataKey,
// else from the plain DataKey an earlier khook wrote.
func DecodeSecret(sec *corev1.Secret) (*Record, error) {
	data, err := SecretJSON(sec)
	if err != nil {
		return nil, err
	}
	rec := &Record{}
	if err := json.Unmarshal(data, rec); err != nil {
		return nil, fmt.Errorf("unreadable record (delete the Secret to start afresh): %w", err)
	}
	if rec.Steps == nil {
		rec.Steps = map[string]*StepRecord{}
	}
	return rec, nil
}

// SecretJSON returns the record's JSON as a record Secret holds it,
// inflated.
func SecretJSON(sec *corev1.Secret) ([]byte, error) {
	if z, ok := sec.Data[GzipDataKey]; ok {
		zr, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			return nil, fmt.Errorf("unreadable record (delete the Secret to start afresh): %s: %w", GzipDataKey, err)
		}
		data, err := io.ReadAll(io.LimitReader(zr, int64(maxDecoded)+1))
		if err == nil && len(data) > maxDecoded {
			err = fmt.Errorf("inflates to more than %d bytes", maxDecoded)
		}
		if err != nil {
			return nil, fmt.Errorf("unreadable record (delete the Secret to start afresh): %s: %w", GzipDataKey, err)
		}
		return data, nil
	}
	if data, ok := sec.Data[DataKey]; ok {
		return data, nil
	}
	return nil, fmt.Errorf("unreadable record (delete the Secret to start afresh): neither %s nor %s in its data", GzipDataKey, DataKey)
}

// compress gzips the record's JSON.
func compress(rec *Record) ([]byte, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// trims are the ways the record shrinks when it does not fit, in order,
// each on top of the ones before: what each step did (Detail), then when
// each attempt ran and waited (the timeline picture then draws a step as
// one bar), then the kustomize: reads (an optimisation: without them the
// next run builds to check the hash), then the error texts, first cut
// short, then dropped. Step names, types, hashes, statuses, attempts and
// times always stay: they decide what the next run resumes.
var trims = []struct {
	what string
	trim func(*StepRecord)
}{
	{"details", func(s *StepRecord) { s.Detail = "" }},
	{"attempt timelines", func(s *StepRecord) { s.Timeline = nil }},
	{"kustomize reads", func(s *StepRecord) { s.Reads = nil }},
	{"error texts cut to 64 characters", func(s *StepRecord) { s.Error = cut(s.Error, shortError) }},
	{"error texts", func(s *StepRecord) { s.Error = "" }},
}

// SizeError: even the essential record (names, types, hashes, statuses)
// does not fit in a Secret.
type SizeError struct {
	Location Location
	Steps    int
	// Need is the compressed size of the essential record, Limit what a
	// record may take.
	Need, Limit int
	// Before: Begin found it before any step ran.
	Before bool
}

func (e *SizeError) Error() string {
	s := fmt.Sprintf("state record %s: the record of %d steps needs at least %d bytes compressed (step names, types, hashes and statuses alone), over the %d bytes a record may take of the %d (1 MiB) a Secret holds", e.Location, e.Steps, e.Need, e.Limit, MaxSecretBytes)
	if e.Before {
		s += ": split the spec into several specs, each with its own state record (state.name), shorten the step names, or run it without state:; nothing ran"
	}
	return s
}

// encode compresses rec, shrinking it as trims says until it fits budget.
// It changes rec (which must be the caller's copy) and returns the data.
func encode(rec *Record, budget int, loc Location) ([]byte, error) {
	rec.Trimmed = ""
	data, err := compress(rec)
	if err != nil || len(data) <= budget {
		return data, err
	}
	var dropped []string
	for _, t := range trims {
		for _, s := range rec.Steps {
			t.trim(s)
		}
		dropped = append(dropped, t.what)
		rec.Trimmed = "to fit a Secret, this record left out: " + strings.Join(dropped, ", ")
		if data, err = compress(rec); err != nil || len(data) <= budget {
			return data, err
		}
	}
	return nil, &SizeError{Location: loc, Steps: len(rec.Steps), Need: len(data), Limit: budget}
}

// EssentialSize is the compressed size of the record of a run of the named
// steps when it keeps no more than what decides resuming: every step with
// a type and a status drawn at random, a full hash, large attempts and
// duration and a timestamp to the nanosecond, all of them random where
// real ones vary, so that compression finds no more in it than in a real
// record (measured, not bounded: the names are the spec's own).
// khookVersion is the version the record names.
func EssentialSize(steps []string, khookVersion string) (int, error) {
	now := time.Now().UTC()
	rec := newRecord()
	rec.Spec = strings.Repeat("s", 63)
	rec.SpecHash = randomHash()
	rec.KhookVersion = khookVersion
	rec.Command, rec.RunStatus = "destroy", StepInterrupted
	rec.StartedAt, rec.UpdatedAt, rec.FinishedAt = now, now, &now
	rec.Trimmed = "to fit a Secret, this record left out: " + strings.Repeat("x", 80)
	types := []string{"helm", "apply", "delete", "patch", "wait", "rollout", "job"}
	statuses := []string{StepOK, StepFailed, StepInterrupted, StepSkipped, StepRunning}
	var r [12]byte
	for _, name := range steps {
		_, _ = rand.Read(r[:])
		n := func(i int) int64 { return int64(r[i])<<8 | int64(r[i+1]) }
		rec.Steps[name] = &StepRecord{
			Type:       types[int(r[10])%len(types)],
			Hash:       randomHash(),
			Status:     statuses[int(r[11])%len(statuses)],
			Attempts:   100 + int(n(0)%900),
			DurationMs: 1_000_000 + n(2)*n(4)%(math.MaxInt32-1_000_000),
			FinishedAt: now.Add(-time.Duration(n(6))*time.Second - time.Duration(n(8)*n(2))%time.Second),
		}
	}
	data, err := compress(rec)
	return len(data), err
}

func randomHash() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "sha256:" + hex.EncodeToString(b[:])
}
