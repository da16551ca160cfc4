package main

import (
	"context"
	"fmt"
	"io"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"khook.io/core/testing/testcluster"
)

// ready watches the Deployments of namespace until count of them are
// Current by kstatus, and prints when (Unix milliseconds): the first
// Deployment seen and the moment the last of them turned Current. It is
// the cluster's own pace, seen from outside the tool under test
// (bench/charts.sh runs it beside an install with wait: true). It prints
// "watching" once the watch is established.
//
//	watching
//	first 1764170000123
//	current 1764170000456
func ready(ctx context.Context, dir, namespace string, count int, timeout time.Duration, stdout io.Writer) error {
	if namespace == "" || count < 1 {
		return fmt.Errorf("ready needs --namespace and --count")
	}
	c, err := testcluster.Load(dir)
	if err != nil {
		return err
	}
	cfg, err := c.RESTConfigE()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deployments := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(namespace)
	w, err := deployments.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()
	fmt.Fprintln(stdout, "watching")
	var first int64
	current := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d Deployments in %s Current: %w", len(current), count, namespace, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the watch of Deployments in %s ended", namespace)
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			if !isObj || ev.Type == watch.Error || ev.Type == watch.Bookmark {
				continue
			}
			now := time.Now().UnixMilli()
			if first == 0 {
				first = now
			}
			res, err := kstatus.Compute(u)
			current[u.GetName()] = err == nil && res.Status == kstatus.CurrentStatus && ev.Type != watch.Deleted
			if n := countTrue(current); n >= count {
				fmt.Fprintf(stdout, "first %d\ncurrent %d\n", first, now)
				return nil
			}
		}
	}
}

func countTrue(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}
