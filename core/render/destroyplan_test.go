package render

import (
	"bytes"
	"testing"

	"khook.io/core/step"
)

// uninstall is helm's destroy action, as its kind declares it.
var uninstall = step.DestroyAction{Word: "uninstall", Tally: "to uninstall", Rank: 20}

func TestDestroyPlan(t *testing.T) {
	v := DestroyPlanView{Spec: "platform", Clusters: []DestroyCluster{
		{Context: "prod-eu", Server: "https://eu.example:6443", Steps: []DestroyStep{
			{Name: "settings", Type: "apply", Items: []DestroyObject{
				{Object: "ConfigMap/extra in team", Action: step.DestroyDelete, Reason: "created by this spec"},
				{Object: "ConfigMap/team-settings in team", Action: step.DestroyRevert, Reason: "it existed before khook: only khook's fields are removed"},
				{Object: "Namespace/team", Action: step.DestroyKeep, Reason: "destroy never deletes namespaces"},
			}},
			{Name: "crds", Type: "apply", Items: []DestroyObject{
				{Object: "CustomResourceDefinition/widgets.example.com", Action: step.DestroyRefuse, Reason: "its kind has 2 custom resources this spec did not create (in namespace other: other/a, other/b): deleting the CRD deletes them; --force-crds deletes it anyway"},
			}},
			{Name: "cilium", Type: "helm", Items: []DestroyObject{{Object: "release cilium (kube-system)", Action: uninstall, Reason: "revision 2 (deployed, chart cilium 1.18.4)"}}},
			{Name: "migrate", Type: "job", Items: []DestroyObject{{Object: "Job kube-system/migrate", Action: step.DestroyGone, Reason: "already gone"}}},
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

// A reverted object lists what becomes of each field khook wrote: back
// to a value (long ones cut), removed (with what the server sets
// instead), staying because another writer has it, staying as khook wrote
// it; the fields khook's write did not change are counted. A revert the
// server rejects is counted as such.
func TestDestroyPlanFields(t *testing.T) {
	v := DestroyPlanView{Spec: "platform", Clusters: []DestroyCluster{
		{Context: "prod", Server: "https://prod.example:6443", Steps: []DestroyStep{
			{Name: "settings", Type: "apply", Items: []DestroyObject{
				{Object: "ConfigMap/frozen in team", Action: step.DestroyRejected, Reason: "the server rejects giving back khook's fields (dry run), so it is left as it is: ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"},
				{Object: "Deployment/web in team", Action: step.DestroyRevert, Reason: "it existed before khook: khook's fields are given back", Fields: []DestroyField{
					{Path: ".spec.replicas", Outcome: "stay", Reason: "changed since khook by kubectl, through the scale subresource"},
					{Path: `.spec.template.spec.containers[name="web"].image`, Outcome: "restore", Value: `"nginx:1.0"`, Reason: "khook overwrote it"},
					{Path: `.spec.template.spec.containers[name="web"].env[name="B"]`, Outcome: "remove", Reason: "khook added it"},
					{Path: ".spec.strategy.rollingUpdate.maxSurge", Outcome: "remove", Value: `"25%"`, Reason: "khook wrote it, and what it held before is unknown (no record of it)"},
					{Path: ".spec.selector", Outcome: "same", Reason: "it held this value before khook"},
					{Path: ".spec.template.metadata.labels.app", Outcome: "same", Reason: "it held this value before khook"},
					{Path: ".metadata.annotations.kubectl.kubernetes.io/last-applied-configuration", Outcome: "restore", Value: `"{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"annotations\":{}}}"`, Reason: "another writer's client-side apply held it before khook"},
				}},
				{Object: "Secret/creds in team", Action: step.DestroyRevert, Reason: "it existed before khook: khook's fields are given back", Fields: []DestroyField{
					{Path: ".data.password", Outcome: "lost", Reason: "cannot be given back: khook never records a Secret's values"},
					{Path: ".data.user", Outcome: "same", Reason: "it held this value before khook"},
				}},
			}},
		}},
	}}
	var out bytes.Buffer
	if err := DestroyPlan(&out, v); err != nil {
		t.Fatal(err)
	}
	golden(t, "destroyplan-fields.txt", out.Bytes())
}
