//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/state"
	"khook.io/core/testing/testcluster"
)

// recordHasStep reports whether the record Secret sec holds an entry for
// step.
func recordHasStep(sec *corev1.Secret, step string) bool {
	rec, err := state.DecodeSecret(sec)
	return err == nil && rec.Steps[step] != nil
}

// TestFiveThousandStepRecord: a 5000-step spec with state: (one ConfigMap
// a step) is applied, re-applied as a no-op and destroyed, exit 0 each; the
// record fits its Secret throughout, and a further apply converges with
// status matching it.
func TestFiveThousandStepRecord(t *testing.T) {
	const n = 5000
	ns := testcluster.Get(t).NewNamespace(t, "big")
	spec := writeSpec(t, manySteps(ns, n, 1, true))
	env := kubeEnv(t)
	c := typed(t)
	name := "khook-state-" + ns

	// record checks the record Secret: compressed, under the limit, every
	// step in it with status want
	record := func(what, want string) {
		t.Helper()
		sec, err := c.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		size := 0
		for _, v := range sec.Data {
			size += len(v)
		}
		if _, plain := sec.Data[state.DataKey]; plain || size >= state.MaxSecretBytes {
			t.Fatalf("%s: the record takes %d bytes (plain: %v)", what, size, plain)
		}
		rec, err := state.DecodeSecret(sec)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		bad := 0
		for i := 0; i < n; i++ {
			if s := rec.Steps[fmt.Sprintf("s%d", i)]; s == nil || s.Status != want || s.Hash == "" {
				bad++
			}
		}
		if bad > 0 || len(rec.Steps) != n || rec.Trimmed != "" {
			t.Fatalf("%s: %d of %d steps not %s; %d entries; trimmed %q", what, bad, n, want, len(rec.Steps), rec.Trimmed)
		}
		t.Logf("%s: record %d bytes gzipped", what, size)
	}
	// every checks every step of a report
	every := func(what string, r report, res Result, status, skip string) {
		t.Helper()
		if res.Code != 0 || r.Status != "ok" || len(r.Steps) != n {
			t.Fatalf("%s: exit %d, status %s, %d steps\n%s", what, res.Code, r.Status, len(r.Steps), tail(res.Stderr, 2000))
		}
		for _, s := range r.Steps {
			if s.Status != status || s.SkipReason != skip {
				t.Fatalf("%s: step %s %s (%s), want %s (%s)", what, s.Name, s.Status, s.SkipReason, status, skip)
			}
		}
	}
	configMaps := func() int {
		t.Helper()
		list, err := c.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, cm := range list.Items {
			if cm.Name != "kube-root-ca.crt" {
				k++
			}
		}
		return k
	}
	timed := func(what string, f func()) {
		t.Helper()
		start := time.Now()
		f()
		t.Logf("%s: %s", what, time.Since(start).Round(time.Millisecond))
	}

	timed("apply", func() {
		r, res := applyJSON(t, "apply", spec, env)
		every("apply", r, res, "ok", "")
	})
	record("after apply", state.StepOK)
	if k := configMaps(); k != n {
		t.Fatalf("%d ConfigMaps after apply, want %d", k, n)
	}
	timed("no-op re-apply", func() {
		r, res := applyJSON(t, "apply", spec, env)
		every("re-apply", r, res, "skipped", state.ResumeReason)
	})
	record("after the re-apply", state.StepOK)
	timed("destroy", func() {
		r, res := applyJSON(t, "destroy", spec, env)
		if res.Code != 0 || r.Status != "ok" {
			t.Fatalf("destroy: exit %d, status %s\n%s", res.Code, r.Status, tail(res.Stderr, 2000))
		}
	})
	if _, err := c.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the record after a successful destroy: %v", err)
	}
	if k := configMaps(); k != 0 {
		t.Fatalf("%d ConfigMaps after destroy", k)
	}
	timed("apply after destroy", func() {
		r, res := applyJSON(t, "apply", spec, env)
		every("apply after destroy", r, res, "ok", "")
	})
	record("after the last apply", state.StepOK)
	if k := configMaps(); k != n {
		t.Fatalf("%d ConfigMaps after the last apply, want %d", k, n)
	}
	res := run(t, bins.Kubectl, env, "", "status", "-f", spec, "-o", "json")
	var st struct {
		Steps []struct {
			Name string `json:"name"`
			Next string `json:"next"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		t.Fatalf("status -o json: exit %d, %v\n%s", res.Code, err, tail(res.Stderr, 2000))
	}
	if len(st.Steps) != n {
		t.Fatalf("status shows %d steps", len(st.Steps))
	}
	for _, s := range st.Steps {
		if s.Next != state.NextResume {
			t.Fatalf("status: %s next %s, want %s", s.Name, s.Next, state.NextResume)
		}
	}
}
