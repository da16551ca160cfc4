//go:build integration

package state

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/kube"
	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// TestConflictOnTheCluster: a second writer updating (or deleting) the
// record between two of a run's writes: the API server refuses the run's
// next write or delete, the store reports the conflict and writes nothing
// more, and the Secret keeps the other writer's version.
func TestConflictOnTheCluster(t *testing.T) {
	c, err := kubernetes.NewForConfig(testcluster.Get(t).RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// when the other writer acts: "begin" (before Begin's write),
		// "step" (before the next write), "delete" (before Delete);
		// "none" never
		when string
		// deletes: the other writer deletes the record instead of writing
		deletes bool
		what    string // the conflict, "" for none
	}{
		{"updated before Begin", "begin", false, "changed"},
		{"updated mid-run", "step", false, "changed"},
		{"deleted mid-run", "step", true, "deleted"},
		{"updated before the delete", "delete", false, "changed"},
		{"no other writer", "none", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			loc := Location{Namespace: testcluster.Get(t).NewNamespace(t, "rec"), Name: "khook-state-t"}
			// a record from an earlier run
			first, err := Open(ctx, c, loc, "t")
			if err != nil {
				t.Fatal(err)
			}
			if err := first.Begin(ctx, Run{Command: "apply", Steps: []string{"a"}}); err != nil {
				t.Fatal(err)
			}
			first.Step("a", StepRecord{Type: "apply", Hash: "sha256:a", Status: StepOK})
			if err := first.Finish(ctx, "ok"); err != nil {
				t.Fatal(err)
			}

			s, err := Open(ctx, c, loc, "t")
			if err != nil {
				t.Fatal(err)
			}
			// the other writer: a run of its own, or a delete
			meddle := func() {
				t.Helper()
				if tc.deletes {
					if err := c.CoreV1().Secrets(loc.Namespace).Delete(ctx, loc.Name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					return
				}
				o, err := Open(ctx, c, loc, "t")
				if err != nil {
					t.Fatal(err)
				}
				if err := o.Begin(ctx, Run{Command: "destroy", Steps: []string{"a"}, Changing: map[string]string{"a": "the other run"}}); err != nil {
					t.Fatal(err)
				}
				o.stopWriter(ctx)
			}
			if tc.when == "begin" {
				meddle()
			}
			err = s.Begin(ctx, Run{Command: "apply", Steps: []string{"a"}, Changing: map[string]string{"a": "this run"}})
			if tc.when == "begin" {
				var ce *ConflictError
				if !errors.As(err, &ce) || !ce.Begin || ce.What != tc.what {
					t.Fatalf("Begin: %v, want a conflict", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if tc.when == "step" {
				meddle()
			}
			// what the Secret holds now is the other writer's, if any
			theirs, theirErr := c.CoreV1().Secrets(loc.Namespace).Get(ctx, loc.Name, metav1.GetOptions{})
			if tc.when == "step" {
				s.Step("a", StepRecord{Type: "apply", Hash: "sha256:a2", Status: StepOK})
				select {
				case <-s.Lost():
				case <-time.After(30 * time.Second):
					t.Fatal("the store never reported the conflict")
				}
			}
			switch tc.when {
			case "begin", "step":
				if err := s.Finish(ctx, "ok"); err == nil || s.Err() == nil || !errors.Is(err, s.Err()) {
					t.Fatalf("Finish: %v; Err: %v", err, s.Err())
				}
			case "delete":
				if err := s.Finish(ctx, "ok"); err != nil {
					t.Fatal(err)
				}
				meddle()
				theirs, theirErr = c.CoreV1().Secrets(loc.Namespace).Get(ctx, loc.Name, metav1.GetOptions{})
				var ce *ConflictError
				if err := s.Delete(ctx); !errors.As(err, &ce) || !ce.Delete || ce.What != tc.what {
					t.Fatalf("Delete: %v, want a conflict", err)
				}
			default:
				if err := s.Delete(ctx); err != nil {
					t.Fatal(err)
				}
			}
			var ce *ConflictError
			if got := s.Err(); tc.what != "" && (!errors.As(got, &ce) || ce.What != tc.what) {
				t.Fatalf("Err: %v, want a conflict (%s)", got, tc.what)
			}

			now, err := c.CoreV1().Secrets(loc.Namespace).Get(ctx, loc.Name, metav1.GetOptions{})
			switch {
			case tc.what == "" || tc.deletes:
				if !apierrors.IsNotFound(err) {
					t.Fatalf("the record is there: %v", err)
				}
			case theirErr != nil:
				t.Fatal(theirErr)
			case err != nil:
				t.Fatalf("the other writer's record is gone: %v", err)
			case now.ResourceVersion != theirs.ResourceVersion:
				t.Fatalf("the other writer's record was written over (resourceVersion %s, now %s)", theirs.ResourceVersion, now.ResourceVersion)
			default:
				rec, err := DecodeSecret(now)
				if err != nil || rec.Command != "destroy" {
					t.Fatalf("the record is not the other writer's: %v %+v", err, rec)
				}
			}
		})
	}
}

// TestLostAnswersOfTheRecord: every write of the record whose answer the
// lossy link cuts after the API server stored it (the create, updates by
// the writer and by Finish, the delete) is resent and recognised as the
// run's own: no "another run wrote it" about itself, and the record holds
// what the run wrote.
func TestLostAnswersOfTheRecord(t *testing.T) {
	c := testcluster.Get(t)
	link := c.NewLossyLink(t, testcluster.LossyOptions{Seed: 136})
	clients, err := kube.NewForConfig(link.RESTConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	loc := Location{Namespace: c.NewNamespace(t, "rec"), Name: "khook-state-t"}
	cut := func(suffix string) { link.CutNext(testcluster.WriteTo(suffix)) }
	s, err := Open(ctx, clients.Typed, loc, "t")
	if err != nil {
		t.Fatal(err)
	}
	cut("/secrets") // the create
	if err := s.Begin(ctx, Run{Command: "apply", Steps: []string{"a", "b"}}); err != nil {
		t.Fatalf("Begin: %v", err)
	}
	cut("/secrets/" + loc.Name) // the writer's update
	s.Step("a", StepRecord{Type: "apply", Hash: "sha256:a", Status: StepOK})
	deadline := time.Now().Add(time.Minute)
	for link.Counts().CutWrites < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	s.Step("b", StepRecord{Type: "apply", Hash: "sha256:b", Status: StepOK})
	cut("/secrets/" + loc.Name) // Finish's update
	if err := s.Finish(ctx, "ok"); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if n := link.Counts().CutWrites; n != 3 {
		t.Errorf("%d answers of the record's writes cut, want 3", n)
	}
	rec, found, err := Read(ctx, clients.Typed, loc)
	if err != nil || !found || rec.RunStatus != "ok" || rec.Steps["a"] == nil || rec.Steps["b"] == nil || rec.Steps["b"].Status != StepOK {
		t.Fatalf("the record after the run: %+v, %v, %v", rec, found, err)
	}

	// a destroy's delete of the record it wrote
	d, err := Open(ctx, clients.Typed, loc, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Begin(ctx, Run{Command: "destroy", Steps: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	cut("/secrets/" + loc.Name)
	if err := d.Delete(ctx); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, found, err := Read(ctx, clients.Typed, loc); found || err != nil {
		t.Errorf("the record after the delete: found %v, %v", found, err)
	}
}
