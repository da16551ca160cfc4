package testcluster

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"
)

// crdFiles are kwok's ClusterLogs and Logs CRDs (copied from kwok v0.8.0).
//
//go:embed crds/*.yaml
var crdFiles embed.FS

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs creates kwok's CRDs and waits until they are Established.
func installCRDs(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	files, err := fs.Glob(crdFiles, "crds/*.yaml")
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := crdFiles.ReadFile(f)
		if err != nil {
			return err
		}
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if _, err := dyn.Resource(crdGVR).Create(ctx, &obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", obj.GetName(), err)
		}
		name := obj.GetName()
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.FieldSelector = byName(name).String()
				return dyn.Resource(crdGVR).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.FieldSelector = byName(name).String()
				return dyn.Resource(crdGVR).Watch(ctx, o)
			},
		}
		if err := waitFor(ctx, "CRD "+name+" established", lw, &unstructured.Unstructured{}, established); err != nil {
			return err
		}
	}
	return nil
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
