package render

import (
	"bytes"
	"testing"
)

func TestDestroyPlan(t *testing.T) {
	v := DestroyPlanView{Spec: "platform", Clusters: []DestroyCluster{
		{Context: "prod-eu", Server: "https://eu.example:6443", Steps: []DestroyStep{
			{Name: "settings", Type: "apply", Items: []DestroyObject{
				{Object: "ConfigMap/extra in team", Action: "delete", Reason: "created by this spec"},
				{Object: "ConfigMap/team-settings in team", Action: "revert", Reason: "it existed before khook: only khook's fields are removed"},
				{Object: "Namespace/team", Action: "keep", Reason: "destroy never deletes namespaces"},
			}},
			{Name: "crds", Type: "apply", Items: []DestroyObject{
				{Object: "CustomResourceDefinition/widgets.example.com", Action: "refuse", Reason: "its kind has 2 custom resources this spec did not create (in namespace other: other/a, other/b): deleting the CRD deletes them; --force-crds deletes it anyway"},
			}},
			{Name: "cilium", Type: "helm", Items: []DestroyObject{{Object: "release cilium (kube-system)", Action: "uninstall", Reason: "revision 2 (deployed, chart cilium 1.18.4)"}}},
			{Name: "migrate", Type: "job", Items: []DestroyObject{{Object: "Job kube-system/migrate", Action: "gone", Reason: "already gone"}}},
			{Name: "aws-node", Type: "delete", Note: "left alone: destroy leaves delete steps alone"},
			{Name: "argocd", Type: "helm", Note: `skipped: when: vars.ENV == "prod" is false`},
		}},
		{Context: "prod-us", Server: "https://us.example:6443", Err: "cannot reach the server"},
		{Context: "staging", Server: "https://staging.example:6443"},
	}}
	var out bytes.Buffer
	if err := DestroyPlan(&out, v); err != nil {
		t.Fatal(err)
	}
	if err := DestroyQuestion(&out, v); err != nil {
		t.Fatal(err)
	}
	golden(t, "destroyplan.txt", out.Bytes())
	if r := v.Refused(); len(r) != 1 || r[0] != "prod-eu: step crds: CustomResourceDefinition/widgets.example.com: "+v.Clusters[0].Steps[1].Items[0].Reason {
		t.Errorf("refused %q", r)
	}
}
