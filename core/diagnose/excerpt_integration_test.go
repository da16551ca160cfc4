//go:build integration

package diagnose_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/kube"
	"khook.io/core/redact"
	"khook.io/core/step"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

// The secrets planted across every cut of a crashing container's log
// and termination message: each begins and ends with four characters
// nothing else holds, so that any part of one that shows is found.
const (
	secretOldKubeletCut = "Vq8Zold-kubelet-cut-secret-Xw2J" // where a 4 KiB LimitBytes read ends
	secretKubeletCut    = "Hb3Kkubelet-cut-secret-Pd9T"     // where a 64 KiB LimitBytes read ends
	secretLineCut       = "Mf6Rline-cut-secret-Lz4Q"        // across khook's 400-byte line bound
	secretWhole         = "Ty1Nwhole-secret-Gc7W"           // in the last line, whole
	secretTermination   = "Rj5Dtermination-cut-secret-Nx8B" // where the kubelet's 2 KiB termination message begins
)

var plantedSecrets = []string{secretOldKubeletCut, secretKubeletCut, secretLineCut, secretWhole, secretTermination}

// crashLog is the log of the crashing container (kwok serves its CRI
// form), and the termination message the kubelet keeps of it
// (FallbackToLogsOnError: its last 2 KiB). Its last 21 lines, oldest
// first: a short line; ten of 390 bytes and one holding
// secretOldKubeletCut where a read of the last 20 lines cut at 4 KiB
// ends; lines that bring the last 21 to 64 KiB just before a line that
// holds secretKubeletCut where a read of them cut at 64 KiB ends; then
// lines read again: one holding secretLineCut across khook's 400-byte
// line bound, and the last, holding secretWhole.
func crashLog(t *testing.T) (cri []byte, termination string) {
	var lines []string
	add := func(l string) { lines = append(lines, l) }
	for i := 0; i < 5; i++ {
		add(fmt.Sprintf("early line %d", i))
	}
	add("oldest of the tail")
	for i := 0; i < 10; i++ {
		add(fmt.Sprintf("%03d ", i) + strings.Repeat("a", 386))
	}
	// the last 20 lines begin after "oldest of the tail": 10 lines of
	// 391 bytes, then this one holds the secret at byte 4096
	at := 4096 - 10*391 - 5
	add(strings.Repeat("b", at) + secretOldKubeletCut + " " + strings.Repeat("b", 390-at-len(secretOldKubeletCut)-1))
	// bring the last 21 lines to 64 KiB - 200 before the next line:
	// three lines
	sum := 0
	for _, l := range lines[len(lines)-12:] {
		sum += len(l) + 1
	}
	rest := 64<<10 - 200 - sum
	for i := 0; i < 3; i++ {
		n := rest / (3 - i)
		add(strings.Repeat("c", n-1))
		rest -= n
	}
	add(strings.Repeat("d", 195) + secretKubeletCut + " " + strings.Repeat("d", 300))
	for i := 0; i < 3; i++ {
		add(fmt.Sprintf("after the long lines %d", i))
	}
	add(strings.Repeat("e", 390) + secretLineCut + " tail of the line")
	add("fatal: cannot authenticate with token " + secretWhole)
	if len(lines[len(lines)-21]) != len("oldest of the tail") {
		t.Fatalf("the tail is not as planned")
	}
	var b bytes.Buffer
	for i, l := range lines {
		fmt.Fprintf(&b, "2026-11-22T05:00:%02d.000000000Z stderr F %s\n", i%60, l)
	}
	// the termination message: the log's last 2 KiB, beginning inside
	// secretTermination (a message as the kubelet cuts it)
	body := ""
	for i := 0; i < 30; i++ {
		body += fmt.Sprintf("goodbye %02d %s\n", i, strings.Repeat("g", 40))
	}
	head := secretTermination[6:] + "\nexit: the token above is refused"
	msg := head + strings.Repeat(".", 2<<10-len(head)-1-len(body)) + "\n" + body
	if len(msg) != 2<<10 {
		t.Fatalf("the termination message is %d bytes", len(msg))
	}
	return b.Bytes(), msg
}

// TestCrashExcerptsShowNoPartOfASecret: a crash-looping container whose
// log plants secrets across every cut (a 4 KiB and a 64 KiB read's
// LimitBytes cut, khook's line bound) and whose termination message
// begins inside one (the kubelet keeps a log's last 2 KiB), waited on
// every way khook waits: no part of a secret (its first or last four
// characters or more) shows in the error, the progress lines, or helm's
// release record; the excerpt is the log's last lines.
func TestCrashExcerptsShowNoPartOfASecret(t *testing.T) {
	cl := testcluster.Get(t)
	e := &env{cl: cl, c: steptest.Clients(t, cl.RESTConfig(t)), red: redact.New(), timeout: stuckTimeout}
	for _, s := range plantedSecrets {
		e.red.Add(s)
	}
	log, msg := crashLog(t)
	crash := cause{
		annotations: map[string]string{"kwok.khook.io/pod": "crash-loop", "kwok.khook.io/exit-code": "3", "kwok.khook.io/termination-message": msg},
		container:   "terminationMessagePolicy: FallbackToLogsOnError",
	}
	var namespaces []string
	var execs []step.Executor
	var reqs []*step.Request
	for _, w := range ways {
		namespaces = append(namespaces, cl.NewNamespace(t, "excerpt-"+w.name))
	}
	logFile := filepath.Join(t.TempDir(), "crash.log")
	if err := os.WriteFile(logFile, log, 0o644); err != nil {
		t.Fatal(err)
	}
	servePodLogs(t, e.c, namespaces, logFile)
	for i, w := range ways {
		ex, req := w.request(t, e, namespaces[i], crash.deployment())
		execs, reqs = append(execs, ex), append(reqs, req)
	}
	outcomes := run(execs, reqs)
	for i, w := range ways {
		o, ns := outcomes[i], namespaces[i]
		t.Run(w.name, func(t *testing.T) {
			if o.err == nil {
				t.Fatal("the step succeeded")
			}
			msg := o.err.Error()
			t.Logf("error: %s", msg)
			texts := map[string]string{"the error": msg, "the progress": strings.Join(o.progress, "\n")}
			if w.name == "helm-wait" {
				texts["helm's release record"] = releaseRecord(t, e.c, ns, "web")
				if !strings.Contains(texts["helm's release record"], "CrashLoopBackOff") {
					t.Errorf("helm's release record does not hold the wait's cause: %.300s", texts["helm's release record"])
				}
			}
			for what, text := range texts {
				if part := secretPart(text); part != "" {
					t.Errorf("%s shows %q, part of a planted secret", what, part)
				}
			}
			for _, want := range []string{
				"container app: CrashLoopBackOff: last exit code 3 (Error: exit: the token above is refused",
				"; last 5 log lines:\n    after the long lines 0\n    after the long lines 1\n    after the long lines 2\n    " + strings.Repeat("e", 390) + "*** tail o...\n    fatal: cannot authenticate with token ***",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("the error lacks %q", want)
				}
			}
		})
	}
}

// secretPart returns the longest part of a planted secret that text
// shows: a beginning or an end of at least four characters; "" when none.
func secretPart(text string) string {
	for _, s := range plantedSecrets {
		for k := len(s); k >= 4; k-- {
			if strings.Contains(text, s[:k]) {
				return s[:k]
			}
			if strings.Contains(text, s[len(s)-k:]) {
				return s[len(s)-k:]
			}
		}
	}
	return ""
}

// releaseRecord is what helm's release record of revision 1 of release
// in ns says of it (its info: status, description, notes), decoded as
// helm history reads it (the storage Secret's data: base64 of gzip of
// JSON). The chart and the manifest are the test's own (the termination
// message is planted there).
func releaseRecord(t *testing.T, c *kube.Clients, ns, release string) string {
	t.Helper()
	s, err := c.Typed.CoreV1().Secrets(ns).Get(context.Background(), "sh.helm.release.v1."+release+".v1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("helm's release record: %v", err)
	}
	raw, err := base64.StdEncoding.DecodeString(string(s.Data["release"]))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var rel struct {
		Info json.RawMessage `json:"info"`
	}
	if err := json.Unmarshal(out, &rel); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rel.Info), `"failed"`) {
		t.Fatalf("helm's release record does not record the failed wait: %.300s", rel.Info)
	}
	return string(rel.Info)
}
