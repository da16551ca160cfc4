package diagnose

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFormatLogs(t *testing.T) {
	var lines []string
	for i := 0; i < 30; i++ {
		lines = append(lines, strings.Repeat("x", 10)+string(rune('a'+i%26)))
	}
	got := FormatLogs([]byte(strings.Join(lines, "\n") + "\n"))
	if !strings.HasPrefix(got, "; last 20 log lines:\n    ") || strings.Count(got, "\n") != 20 {
		t.Errorf("FormatLogs = %q", got)
	}
	if got := FormatLogs([]byte("only\n")); got != "; last log line:\n    only" {
		t.Errorf("one line: %q", got)
	}
	if got := FormatLogs([]byte("\n \n")); got != "; it logged nothing" {
		t.Errorf("empty: %q", got)
	}
	huge := strings.Repeat(strings.Repeat("y", 1000)+"\n", 20)
	if got := FormatLogs([]byte(huge)); len(got) > LogMaxBytes+100 {
		t.Errorf("%d bytes of logs, want at most about %d", len(got), LogMaxBytes)
	}
}

func waiting(name, reason, msg string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
}

func notReady(reason, msg string) corev1.PodCondition {
	return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
}

// TestPodStatus: what a Pod's status says, and how specific it is.
func TestPodStatus(t *testing.T) {
	crashed := waiting("main", "CrashLoopBackOff", "back-off 10s restarting failed container=main pod=p_ns(uid)")
	crashed.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}
	crashed.RestartCount = 4
	restarted := corev1.ContainerStatus{Name: "main", RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}
	for _, tc := range []struct {
		name      string
		status    corev1.PodStatus
		jobFailed bool
		rank      int
		text      string // "" with ok false: nothing to say
		logs      bool
	}{
		{"unschedulable", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}},
			false, rankRefused, "Unschedulable: 0/1 nodes are available", false},
		{"image pull", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting("main", "ImagePullBackOff", "pull failed")}},
			false, rankContainer, "container main: ImagePullBackOff: pull failed", false},
		{"config", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting("main", "CreateContainerConfigError", `configmap "x" not found`)}},
			false, rankContainer, `container main: CreateContainerConfigError: configmap "x" not found`, false},
		{"init container", corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{waiting("setup", "ErrImagePull", "nope")},
			ContainerStatuses: []corev1.ContainerStatus{waiting("main", "PodInitializing", "")}},
			false, rankContainer, "init container setup: ErrImagePull: nope", false},
		{"crash loop: the last exit, not the back-off's changing words", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{crashed}},
			false, rankContainer, "container main: CrashLoopBackOff: last exit code 3 (Error)", true},
		{"restarted, running, not ready", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{restarted}},
			false, rankContainer, "container main restarted 2 times, last exit code 137 (OOMKilled)", true},
		{"exited", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "boom\n"}}}}},
			false, rankContainer, "container main exited with code 2 (Error: boom)", true},
		{"a failed Job's pod that exited 0", corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}},
			true, rankCompleted, "container main exited with code 0 (Completed)", true},
		{"evicted", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."},
			false, rankProbe, "Evicted: The node was low on resource: memory.", false},
		{"not ready, nothing more", corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{notReady("ContainersNotReady", "containers with unready status: [main]")}},
			false, rankNotReady, "ContainersNotReady: containers with unready status: [main]", false},
		{"creating", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting("main", "ContainerCreating", "")}},
			false, rankNotReady, "Pending", false},
		{"ready", corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}, false, 0, "", false},
		{"succeeded", corev1.PodStatus{Phase: corev1.PodSucceeded}, false, 0, "", false},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: tc.status}
		st, ok := podStatus(p, tc.jobFailed)
		if ok != (tc.text != "") || st.text != tc.text || st.rank != tc.rank || (st.logs != nil) != tc.logs {
			t.Errorf("%s: got %v %d %q (logs %v), want %d %q (logs %v)", tc.name, ok, st.rank, st.text, st.logs != nil, tc.rank, tc.text, tc.logs)
		}
	}
	gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", DeletionTimestamp: &metav1.Time{}}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if _, ok := podStatus(gone, false); ok {
		t.Error("a Pod being deleted is not diagnosed")
	}
}

// TestPodsShareACause: Pods of one owner with the same cause are counted
// together, and the most specific cause wins over a more common one; no
// request is made when the Pods' statuses say it.
func TestPodsShareACause(t *testing.T) {
	pod := func(name string, st corev1.PodStatus) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: st}
	}
	unsched := corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}}
	pull := corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting("app", "ErrImagePull", "not found")}}
	ready := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	requests := 0
	w := &walk{d: &Diagnoser{requests: func() { requests++ }}, ctx: context.Background(), budget: maxRequests}
	w.pods([]corev1.Pod{pod("web-c", unsched), pod("web-a", unsched), pod("web-b", pull), pod("web-d", ready)}, false, 1, false)
	best := w.best()
	if best == nil || best.cause.String() != "1 of 4 pods (Pod ns/web-b): container app: ErrImagePull: not found" {
		t.Fatalf("best = %+v", best)
	}
	for _, f := range w.findings {
		if f.cause.Reason == "Unschedulable" && f.cause.String() != "2 of 4 pods (Pod ns/web-a and 1 more): Unschedulable: 0/1 nodes are available: 1 Insufficient cpu." {
			t.Errorf("unschedulable: %s", f.cause.String())
		}
	}
	if requests != 0 {
		t.Errorf("%d requests for Pods whose status says why", requests)
	}
}

func TestCauseString(t *testing.T) {
	for _, tc := range []struct {
		c    Cause
		want string
	}{
		{Cause{Object: "Pod ns/a", Text: "container app: ErrImagePull: x", Pods: 1, Of: 1}, "Pod ns/a: container app: ErrImagePull: x"},
		{Cause{Object: "Pod ns/a", Text: "Unschedulable: y", Pods: 3, Of: 3}, "3 of 3 pods (Pod ns/a and 2 more): Unschedulable: y"},
		{Cause{Object: "Pod ns/a", Text: "t", Pods: 1, Of: 100, Cut: true}, "1 of the first 100 pods (Pod ns/a): t"},
		{Cause{Object: "PersistentVolumeClaim ns/data", Text: "ProvisioningFailed: z", Pods: 2, Of: 2}, "PersistentVolumeClaim ns/data: ProvisioningFailed: z"},
		{Cause{Object: "ReplicaSet ns/web-1", Text: "FailedCreate: q"}, "ReplicaSet ns/web-1: FailedCreate: q"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	for _, tc := range []struct {
		c    Cause
		want string
	}{
		{Cause{Object: "Pod ns/a", Text: "container app: ErrImagePull: x", Pods: 1, Of: 1}, "container app: ErrImagePull: x (Pod ns/a)"},
		{Cause{Object: "Pod ns/a", Text: "Unschedulable: y", Pods: 3, Of: 3}, "Unschedulable: y (3 of 3 pods: Pod ns/a and 2 more)"},
		{Cause{Object: "Pod ns/a", Text: "t", Pods: 1, Of: 100, Cut: true}, "t (1 of the first 100 pods: Pod ns/a)"},
		{Cause{Object: "ReplicaSet ns/web-1", Text: "FailedCreate: q"}, "FailedCreate: q (ReplicaSet ns/web-1)"},
	} {
		if got := tc.c.Brief(); got != tc.want {
			t.Errorf("brief: got %q, want %q", got, tc.want)
		}
	}
	c := &Cause{Object: "Pod ns/a", Text: "t", Logs: "; last log line:\n    boom"}
	if c.Detail() != "Pod ns/a: t; last log line:\n    boom" || (*Cause)(nil).String() != "" {
		t.Errorf("detail %q", c.Detail())
	}
}

// TestPodRefs: what a Pod references, in the order a kubelet needs it,
// each once, optional ones left out.
func TestPodRefs(t *testing.T) {
	yes := true
	p := &corev1.Pod{Spec: corev1.PodSpec{
		ServiceAccountName: "runner",
		Volumes: []corev1.Volume{
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}},
			{Name: "opt", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "maybe", Optional: &yes}}},
			{Name: "tls", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}}}}}}},
		},
		Containers: []corev1.Container{{Name: "app",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}},
			Env: []corev1.EnvVar{{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "pw"}}}}}},
	}}
	var got []string
	for _, r := range podRefs(p) {
		got = append(got, r.kind+" "+r.name+" ("+r.where+")")
	}
	want := []string{"ServiceAccount runner (service account runner)", "ConfigMap app-config (volume cfg)", "Secret tls (volume tls)", "Secret db (container app env PW)"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("refs %q\nwant %q", got, want)
	}
}

// TestTerminationMessageCuts: the lines the kubelet's bounds may have cut
// are dropped, so that no part of a secret cut there shows.
func TestTerminationMessageCuts(t *testing.T) {
	const secret = "Qz7-termination-secret"
	pod := func(policy corev1.TerminationMessagePolicy, containers int) *corev1.Pod {
		p := &corev1.Pod{}
		for i := 0; i < containers; i++ {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprint("c", i), TerminationMessagePolicy: policy})
		}
		return p
	}
	// the log's last 2 KiB, as the kubelet keeps them: the cut falls
	// inside the secret, its end first
	tailText := "\n" + strings.Repeat("y", 100) + "\nfatal: exit\n"
	fromLog := secret[5:] + tailText
	for len(fromLog) < termLogBytes {
		fromLog = "x" + fromLog
	}
	fromLog = fromLog[len(fromLog)-termLogBytes:]
	if !strings.HasPrefix(fromLog, "x") && !strings.HasPrefix(fromLog, secret[5:]) {
		t.Fatal("bad test message")
	}
	fromLog = secret[5:] + fromLog[len(secret[5:]):]
	// a status cut to its share at its end (4 containers: 3 KiB each)
	endCut := "first\n" + strings.Repeat("c", 12<<10/4-len("first\n\n")-4) + "\n" + secret[:4]
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		msg  string
		want string
	}{
		{"short file message", pod("", 1), "boom\n", "boom"},
		{"log fallback, cut at its start", pod(corev1.TerminationMessageFallbackToLogsOnError, 1), fromLog, ""},
		{"file message cut at its start", pod("", 1), strings.Repeat("a", 10) + secret[5:] + "\nrest\n" + strings.Repeat("b", termFileBytes-len(secret[5:])-17) + "\n", ""},
		{"a status cut at its end", pod("", 4), endCut, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := terminationMessage(tc.pod, "c0", tc.msg)
			for k := 4; k <= len(secret); k++ {
				if strings.Contains(got, secret[:k]) || strings.Contains(got, secret[len(secret)-k:]) {
					t.Fatalf("part of the secret shows: %q", got)
				}
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestWholeLines: a read cut at its limit loses its partial last line.
func TestWholeLines(t *testing.T) {
	if got := wholeLines([]byte("a\nb\nc"), true); len(got) != 2 || got[1] != "b" {
		t.Errorf("cut read: %q", got)
	}
	if got := wholeLines([]byte("a\nb\n"), false); len(got) != 2 {
		t.Errorf("whole read: %q", got)
	}
	if got := wholeLines([]byte("abc"), true); got != nil {
		t.Errorf("one cut line: %q", got)
	}
}
