package state

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// realistic is the record of an apply of n one-ConfigMap steps as khook
// writes it: an ok entry per step with a detail, times a few milliseconds
// apart.
func realistic(n int) *Record {
	rec := newRecord()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec.Spec, rec.SpecHash, rec.KhookVersion = "platform", randomHash(), "v0.9.0"
	rec.Command, rec.RunStatus, rec.StartedAt, rec.UpdatedAt = "apply", "ok", start, start
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("configmap-%05d", i)
		rec.Steps[name] = &StepRecord{
			Type: "apply", Hash: randomHash(), Status: StepOK, Attempts: 1,
			DurationMs: int64(20 + i*7919%400),
			FinishedAt: start.Add(time.Duration(i)*3*time.Millisecond + time.Duration(i*104729%1000000)),
			Detail:     fmt.Sprintf("1 object applied: ConfigMap bootstrap/%s created", name),
		}
	}
	return rec
}

// TestRecordCapacity measures how many steps of a realistic spec a record
// holds, and checks that EssentialSize, which Begin compares with the
// budget, is never below what the essential record really takes.
func TestRecordCapacity(t *testing.T) {
	for _, n := range []int{1000, 5000, 20000} {
		rec := realistic(n)
		full, err := compress(rec)
		if err != nil {
			t.Fatal(err)
		}
		raw := len(mustJSON(t, rec))
		names := make([]string, 0, n)
		for name, s := range rec.Steps {
			names = append(names, name)
			s.Detail = ""
		}
		bare, err := compress(rec)
		if err != nil {
			t.Fatal(err)
		}
		need, err := EssentialSize(names, rec.KhookVersion)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%5d steps: JSON %8d bytes, gzipped %7d (%3d per step), without details %7d; Begin's estimate %7d; budget %d", n, raw, len(full), len(full)/n, len(bare), need, recordBudget)
		if need < len(bare) {
			t.Errorf("%d steps: Begin's estimate %d is below the essential record's %d", n, need, len(bare))
		}
		if fits := need <= recordBudget; fits != (n <= 5000) {
			t.Errorf("%d steps: Begin lets it run: %v", n, fits)
		}
	}
}

func mustJSON(t *testing.T, rec *Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	zr, err := compress(rec)
	if err != nil {
		t.Fatal(err)
	}
	r, err := gzip.NewReader(bytes.NewReader(zr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := buf.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestEncodeShrinksInOrder: a record over the budget loses, in order, the
// details, the attempts' timelines, the kustomize reads, the length of the error texts and then
// the error texts, and never a name, hash or status.
func TestEncodeShrinksInOrder(t *testing.T) {
	base := func() *Record {
		rec := newRecord()
		for i := 0; i < 300; i++ {
			rec.Steps[fmt.Sprintf("s%d", i)] = &StepRecord{
				Type: "apply", Hash: randomHash(), Status: StepFailed, Attempts: 1,
				Error:  Truncate(fmt.Sprintf("apply %d failed: %s", i, randomHash()+randomHash()+randomHash())),
				Detail: randomHash() + randomHash(),
				Reads:  map[string][]string{"kustomize": {"read " + randomHash(), "stat " + randomHash()}},
			}
			// attempts with their waits, at times that differ per step
			for a := int64(0); a < 3; a++ {
				o := int64(i)*7919%100000 + a*12345
				rec.Steps[fmt.Sprintf("s%d", i)].Timeline = append(rec.Steps[fmt.Sprintf("s%d", i)].Timeline,
					AttemptTimes{Start: o, End: o + 4321 + int64(i), Waits: [][2]int64{{o + 17, o + 999 + int64(i)*3}, {o + 1500, o + 4000 + int64(i)}}})
			}
		}
		return rec
	}
	size := func(rec *Record, trim int) int {
		rec = rec.clone()
		for _, tr := range trims[:trim] {
			for _, s := range rec.Steps {
				tr.trim(s)
			}
		}
		data, err := compress(rec)
		if err != nil {
			t.Fatal(err)
		}
		return len(data)
	}
	rec := base()
	for trim := 0; trim <= len(trims); trim++ {
		t.Run(fmt.Sprint(trim), func(t *testing.T) {
			// a budget that fits the record with this many trims (and a
			// little room for the note saying so), not with fewer
			budget := size(rec, trim) + 200
			if trim > 0 && size(rec, trim-1) <= budget {
				t.Fatalf("trim %d saves too little to test", trim)
			}
			got := rec.clone()
			data, err := encode(got, budget, testLoc)
			if err != nil {
				t.Fatal(err)
			}
			if len(data) > budget {
				t.Fatalf("%d bytes over the budget %d", len(data), budget)
			}
			dec, err := DecodeSecret(&corev1.Secret{Data: map[string][]byte{GzipDataKey: data}})
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range rec.Steps {
				s := dec.Steps[name]
				if s == nil || s.Hash != want.Hash || s.Status != want.Status || s.Type != want.Type || s.Attempts != want.Attempts {
					t.Fatalf("%s: %+v, want %+v", name, s, want)
				}
				kept := []bool{s.Detail != "", s.Timeline != nil, s.Reads != nil, s.Error == want.Error, s.Error != ""}
				for i, k := range kept {
					if k != (i >= trim) {
						t.Fatalf("%s after %d trims: %q kept: %v", name, trim, trims[i].what, k)
					}
				}
			}
			if (dec.Trimmed == "") != (trim == 0) || trim > 0 && !strings.Contains(dec.Trimmed, trims[trim-1].what) {
				t.Errorf("trimmed: %q", dec.Trimmed)
			}
		})
	}
	t.Run("essentials over the budget", func(t *testing.T) {
		budget := size(rec, len(trims)) - 100
		_, err := encode(rec.clone(), budget, testLoc)
		if se, ok := err.(*SizeError); !ok || se.Steps != 300 || se.Limit != budget {
			t.Fatalf("encode: %v, want a size error", err)
		}
	})
}

func TestDecodeSecret(t *testing.T) {
	rec := newRecord()
	rec.Steps["a"] = okStep("sha256:a")
	gz, err := compress(rec)
	if err != nil {
		t.Fatal(err)
	}
	plain := mustJSON(t, rec)
	defer func(n int) { maxDecoded = n }(maxDecoded)
	maxDecoded = 4 << 20
	bomb := func() []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zero := make([]byte, 1<<20)
		for i := 0; i <= maxDecoded>>20; i++ {
			_, _ = zw.Write(zero)
		}
		_ = zw.Close()
		return buf.Bytes()
	}()
	for _, tc := range []struct {
		name string
		data map[string][]byte
		err  string
	}{
		{"gzipped", map[string][]byte{GzipDataKey: gz}, ""},
		{"plain", map[string][]byte{DataKey: plain}, ""},
		{"both: gzipped wins", map[string][]byte{GzipDataKey: gz, DataKey: []byte("{")}, ""},
		{"neither", map[string][]byte{"other": plain}, "neither record.json.gz nor record.json"},
		{"not gzip", map[string][]byte{GzipDataKey: plain}, "record.json.gz: gzip: invalid header"},
		{"cut short", map[string][]byte{GzipDataKey: gz[:len(gz)/2]}, "unexpected EOF"},
		{"too large", map[string][]byte{GzipDataKey: bomb}, "inflates to more than"},
		{"not JSON", map[string][]byte{DataKey: []byte("{")}, "unreadable record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeSecret(&corev1.Secret{Data: tc.data})
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err == "" && !got.Resumes("a", "sha256:a"):
				t.Fatalf("decoded %+v", got)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}
