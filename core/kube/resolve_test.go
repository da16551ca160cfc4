package kube

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	fakedisco "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	clienttesting "k8s.io/client-go/testing"
)

// fakeClients are Clients over a fixed discovery document: apps/v1
// Deployments, v1 Pods and a custom resource with a short name and a
// category.
func fakeClients() *Clients {
	disco := &fakedisco.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", SingularName: "pod", Namespaced: true, Kind: "Pod", ShortNames: []string{"po"}, Categories: []string{"all"}, Verbs: []string{"get", "list", "watch"}},
			{Name: "services", SingularName: "service", Namespaced: true, Kind: "Service", ShortNames: []string{"svc"}, Categories: []string{"all"}, Verbs: []string{"get", "list", "watch"}},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", SingularName: "deployment", Namespaced: true, Kind: "Deployment", ShortNames: []string{"deploy"}, Categories: []string{"all"}, Verbs: []string{"get", "list", "watch"}},
		}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", SingularName: "widget", Namespaced: false, Kind: "Widget", ShortNames: []string{"wd"}, Categories: []string{"gadgets"}, Verbs: []string{"get", "list", "watch"}},
		}},
	}}}
	cached := memory.NewMemCacheClient(disco)
	deferred := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	mapper := restmapper.NewShortcutExpander(deferred, cached, nil)
	return &Clients{
		Config:    &rest.Config{Host: "https://127.0.0.1:1"},
		Discovery: cached,
		Mapper:    mapper,
		mapper:    meta.ToRESTMapperWithContext(mapper),
		deferred:  deferred,
	}
}

func TestMappingForTypeReadsEveryKubectlForm(t *testing.T) {
	c := fakeClients()
	deploy := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	for typ, want := range map[string]schema.GroupVersionResource{
		"deployments": deploy, "deployment": deploy, "deploy": deploy, "Deployment": deploy,
		"deployments.apps": deploy, "deployment.apps": deploy, "deploy.apps": deploy, "Deployment.apps": deploy,
		"deployments.v1.apps": deploy, "deployment.v1.apps": deploy, "Deployment.v1.apps": deploy, "deploy.v1.apps": deploy,
		"pods": pods, "po": pods, "Pod": pods, "pod.v1.": pods,
		"widgets": widgets, "wd": widgets, "Widget": widgets, "widgets.example.com": widgets,
		"Widget.example.com": widgets, "widget.v1.example.com": widgets, "Widget.v1.example.com": widgets,
		"gadgets": widgets, // a category of one type
	} {
		m, err := c.MappingForType(context.Background(), typ)
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if m.Resource != want {
			t.Errorf("%s: resolved to %s, want %s", typ, m.Resource, want)
		}
	}
}

func TestMappingForTypeUnknownIsKubectlsNoMatch(t *testing.T) {
	c := fakeClients()
	for typ, want := range map[string]string{
		"nosuchkinds":           `the server doesn't have a resource type "nosuchkinds"`,
		"deployments.v2.apps":   `"deployments.v2.apps": the server doesn't have a resource type "deployments"`,
		"widgets.other.example": `"widgets.other.example": the server doesn't have a resource type "widgets"`,
	} {
		_, err := c.MappingForType(context.Background(), typ)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", typ, err, want)
			continue
		}
		if !meta.IsNoMatchError(err) {
			t.Errorf("%s: %v is not a no-match error", typ, err)
		}
	}
	_, err := c.MappingForType(context.Background(), "all")
	if err == nil || !strings.Contains(err.Error(), "several types") || meta.IsNoMatchError(err) {
		t.Errorf("all: got %v, want a several-types error", err)
	}
}
