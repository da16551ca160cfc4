package diagnose

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"khook.io/core/kube"
)

// Bounds of the log excerpt a cause carries.
const (
	LogTailLines = 20
	LogMaxBytes  = 4 << 10
	logLineMax   = 400
	// logReadBytes is how much of the log is read to hold the last
	// LogTailLines lines whole: the kubelet cuts a read at LimitBytes,
	// in the middle of a line, and a secret cut there keeps a prefix
	// the redactor cannot know. A read that reaches it lost the end of
	// the log; the lines after the cut are read again.
	logReadBytes = 64 << 10
	// logReads bounds the reads of one excerpt.
	logReads = 3
	// partialRecord is the size at which container runtimes split a
	// long log line into partial CRI records (16 KiB): the kubelet's
	// tail counts records, so a tail may begin inside such a line.
	partialRecord = 16 << 10
)

// logs returns the container's last log lines as a suffix ("; last 3 log
// lines:\n    ..."), bounded to LogTailLines lines and LogMaxBytes, or a
// note saying why there are none. A container waiting to restart has the
// lines of its last run. The log is read in whole lines (wholeLines),
// redacted (redact, when set) as a whole, and only then cut to its
// bounds: a cut never leaves a part of a secret the redactor would not
// see whole.
func (w *walk) logs(c *container, redact func(string) string) string {
	lines, note, ok, err := w.readLines(c)
	if err != nil {
		return "; its logs are unavailable: " + logsError(err)
	}
	if !ok {
		return ""
	}
	text := strings.Join(lines, "\n")
	if redact != nil {
		text = redact(text)
	}
	out := FormatLogs([]byte(text))
	if note != "" {
		if len(lines) == 0 {
			return "; " + note
		}
		out += "\n    (" + note + ")"
	}
	return out
}

// readLines reads the container's last LogTailLines log lines, each
// whole. The kubelet's LimitBytes cut ends a read inside a line: a read
// that reaches logReadBytes keeps its complete lines, drops the cut one
// and reads the lines after it again (fewer each time, at most logReads
// reads), so that the lines kept are the last ones. The first read asks
// for one line more than it keeps: the kubelet's tail counts a runtime's
// records, and its first line may begin inside a longer one (so may a
// first line as long as a partial record); such a first line is dropped.
// note says what is left out; ok is false when the request budget is
// spent.
func (w *walk) readLines(c *container) (lines []string, note string, ok bool, err error) {
	tail, first := int64(LogTailLines+1), true
	for read := 1; ; read++ {
		if !w.spend() {
			return nil, "", false, nil
		}
		limit := int64(logReadBytes)
		raw, err := w.d.c.Typed.CoreV1().Pods(c.ns).GetLogs(c.pod, &corev1.PodLogOptions{
			Container: c.name, TailLines: &tail, LimitBytes: &limit,
		}).Do(w.ctx).Raw()
		if err != nil {
			return nil, "", false, err
		}
		cut := int64(len(raw)) >= limit
		lines = wholeLines(raw, cut)
		if len(lines) > 0 && (first && (cut || int64(len(lines)) >= tail) || len(lines[0]) >= partialRecord) {
			lines = lines[1:]
		}
		if !cut {
			if len(lines) > LogTailLines {
				lines = lines[len(lines)-LogTailLines:]
			}
			if read > 1 {
				note = fmt.Sprintf("earlier log lines left out: the last %d are longer than %d KiB together", LogTailLines+1, logReadBytes>>10)
			}
			return lines, note, true, nil
		}
		// the read ended inside a line: the lines after it are the last
		after := tail - int64(len(wholeLines(raw, true))) - 1
		if after <= 0 {
			return lines, fmt.Sprintf("its last log line is longer than %d KiB: left out", logReadBytes>>10), true, nil
		}
		if read == logReads {
			return nil, fmt.Sprintf("its last %d log lines are longer than %d KiB: left out", after, logReadBytes>>10), true, nil
		}
		tail, first = after, false
	}
}

// wholeLines splits raw log output into lines; a read cut at its limit
// (cut) loses its last, partial line.
func wholeLines(raw []byte, cut bool) []string {
	text := string(raw)
	if cut {
		i := strings.LastIndexByte(text, '\n')
		if i < 0 {
			return nil
		}
		text = text[:i]
	}
	text = strings.TrimSuffix(text, "\n")
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// logsError explains a failed log request: the node's own answer when the
// API server relays one, else the API error.
func logsError(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if d := status.Status().Details; d != nil {
			for _, c := range d.Causes {
				if m := strings.TrimSpace(c.Message); m != "" {
					return m
				}
			}
		}
	}
	return kube.Reason(err)
}

// FormatLogs turns raw log output into a message suffix: the last
// LogTailLines lines, each cut to a bounded length, at most LogMaxBytes.
func FormatLogs(raw []byte) string {
	raw = bytes.TrimRight(raw, "\n")
	if len(bytes.TrimSpace(raw)) == 0 {
		return "; it logged nothing"
	}
	lines := strings.Split(string(raw), "\n")
	if len(lines) > LogTailLines {
		lines = lines[len(lines)-LogTailLines:]
	}
	for i, l := range lines {
		l = strings.TrimRight(l, "\r")
		if len(l) > logLineMax {
			n := logLineMax
			for n > 0 && !utf8.RuneStart(l[n]) {
				n--
			}
			l = l[:n] + "..."
		}
		lines[i] = l
	}
	for total(lines) > LogMaxBytes && len(lines) > 1 {
		lines = lines[1:]
	}
	what := "log line"
	if len(lines) > 1 {
		what = fmt.Sprintf("%d log lines", len(lines))
	}
	return "; last " + what + ":\n    " + strings.Join(lines, "\n    ")
}

func total(lines []string) int {
	n := 0
	for _, l := range lines {
		n += len(l) + 5
	}
	return n
}
