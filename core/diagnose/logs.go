package diagnose

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"khook.io/core/kube"
)

// Bounds of the log excerpt a cause carries.
const (
	LogTailLines = 20
	LogMaxBytes  = 4 << 10
	logLineMax   = 400
)

// logs returns the container's last log lines as a suffix ("; last 3 log
// lines:\n    ..."), bounded to LogTailLines lines and LogMaxBytes, or a
// note saying why there are none. A container waiting to restart has the
// lines of its last run. redact, when set, masks secrets in the whole
// output first, so that no cut leaves a part of one.
func (w *walk) logs(c *container, redact func(string) string) string {
	if !w.spend() {
		return ""
	}
	tail, limit := int64(LogTailLines), int64(LogMaxBytes)
	raw, err := w.d.c.Typed.CoreV1().Pods(c.ns).GetLogs(c.pod, &corev1.PodLogOptions{
		Container: c.name, TailLines: &tail, LimitBytes: &limit,
	}).Do(w.ctx).Raw()
	if err != nil {
		return "; its logs are unavailable: " + logsError(err)
	}
	if redact != nil {
		raw = []byte(redact(string(raw)))
	}
	return FormatLogs(raw)
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
			l = l[:logLineMax] + "..."
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

// eventTime is when an event was last seen.
func eventTime(e corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
