package load

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"khook.io/core/redact"
	"khook.io/core/steps/builtin"
	"khook.io/core/vars"
)

const envelope = "apiVersion: khook.io/v1\nkind: Khook\nmetadata:\n  name: t\nsteps:\n"

// parseSpec loads src (a whole document) with testdata as its folder.
func parseSpec(t *testing.T, src string, env ...string) (*Document, error) {
	t.Helper()
	red := redact.New()
	set, err := vars.Resolve(vars.Options{Environ: env}, red)
	if err != nil {
		t.Fatalf("resolve vars: %v", err)
	}
	base, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	l := Loader{Steps: builtin.Registry}
	return l.Parse([]byte(src), "spec.yaml", base, set, red)
}

// problems returns the problems of an invalid spec as "path: message" lines.
func problems(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("want *InvalidError, got %T: %v", err, err)
	}
	out := make([]string, len(inv.Problems))
	for i, p := range inv.Problems {
		out[i] = p.Path + ": " + p.Msg
	}
	return out
}

// TestValidationRules covers every rule of the DSL: each case is one step
// list (or a whole document when it starts with apiVersion) and the
// problems it must produce, as "path: message" substrings, all of them and
// nothing else.
func TestValidationRules(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // substrings, one per expected problem
	}{
		// envelope
		{"valid minimal", `
  - name: a
    wait: {for: delete, on: pods/x}`, nil},
		{"wrong apiVersion and kind", "apiVersion: khook.io/v0\nkind: ClusterBootstrap\nmetadata: {name: x}\nsteps: [{name: a, wait: {for: delete, on: pods/x}}]\n",
			[]string{`apiVersion: must be "khook.io/v1", not "khook.io/v0"`, `kind: must be "Khook", not "ClusterBootstrap"`}},
		{"missing envelope fields", "steps: [{name: a, wait: {for: delete, on: pods/x}}]\n",
			[]string{": apiVersion is required", ": kind is required", ": metadata is required"}},
		{"missing metadata.name", "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {}\nsteps: [{name: a, wait: {for: delete, on: pods/x}}]\n",
			[]string{"metadata: name is required"}},
		{"no steps", "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps: []\n", []string{"steps: at least one step is required"}},
		{"steps missing", "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\n", []string{": steps is required"}},
		{"unknown top-level field with hint", "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\ndefault: {}\nsteps: [{name: a, wait: {for: delete, on: pods/x}}]\n",
			[]string{`default: unknown field "default" (did you mean "defaults"?)`}},
		{"empty document", "", []string{"the spec is empty"}},
		{"invalid YAML", "apiVersion: [\n", []string{"invalid YAML"}},
		{"duplicate key", "apiVersion: khook.io/v1\napiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps: [{name: a, wait: {for: delete, on: pods/x}}]\n",
			[]string{`apiVersion: duplicate key "apiVersion"`}},
		{"wrong types", "apiVersion: khook.io/v1\nkind: Khook\nmetadata: x\nsteps: {a: 1}\n",
			[]string{"metadata: must be a mapping, not a string", "steps: must be a list, not a mapping"}},

		// defaults
		{"defaults", "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\ndefaults: {timeout: 0s, retries: -1, retryDelay: soon, onError: ignore}\nsteps: [{name: a, wait: {for: delete, on: pods/x}}]\n",
			[]string{"defaults.timeout: must be greater than zero", "defaults.retries: must not be negative", `defaults.retryDelay: invalid duration "soon"`, `defaults.onError: must be one of "fail" or "continue", not "ignore"`}},
		{"retries must be a number", `
  - name: a
    retries: two
    wait: {for: delete, on: pods/x}`, []string{`steps[0].retries: must be a whole number, not "two"`}},

		// state
		{"state names", "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nstate: {namespace: Kube_System, name: -bad-, enabled: yes}\nsteps: [{name: a, wait: {for: delete, on: pods/x}}]\n",
			[]string{`state.namespace: "Kube_System" is not a valid namespace`, `state.name: "-bad-" is not a valid Secret name`, `state.enabled: must be true or false, not "yes"`}},
		{"state name derived from metadata.name", "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: My Bootstrap}\nstate: {}\nsteps: [{name: a, wait: {for: delete, on: pods/x}}]\n",
			[]string{`metadata.name: the state record would be named "khook-state-My Bootstrap"`}},
		{"state disabled does not check the derived name", "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: My Bootstrap}\nstate: {enabled: false}\nsteps: [{name: a, wait: {for: delete, on: pods/x}}]\n", nil},

		// common step fields
		{"step name rules", `
  - name: Cilium_CNI
    wait: {for: delete, on: pods/x}
  - name: a
    wait: {for: delete, on: pods/x}
  - name: a
    wait: {for: delete, on: pods/x}
  - wait: {for: delete, on: pods/x}`, []string{`steps[0].name: "Cilium_CNI" is not a valid step name`, `steps[2].name: duplicate step name "a" (also steps[1])`, "steps[3]: name is required"}},
		{"step name too long", "\n  - name: " + strings.Repeat("a", 64) + "\n    wait: {for: delete, on: pods/x}", []string{"is not a valid step name"}},
		{"no action key", `
  - name: a
    needs: []`, []string{"steps[0]: a step needs exactly one action key"}},
		{"two action keys", `
  - name: a
    wait: {for: delete, on: pods/x}
    job: {image: busybox}`, []string{"steps[0].job: a step has exactly one action key, but this one has wait and job"}},
		{"type field is explained", `
  - name: a
    type: helm
    wait: {for: delete, on: pods/x}`, []string{`steps[0].type: unknown field "type": the action key`}},
		{"action field at step level", `
  - name: a
    namespace: x
    wait: {for: delete, on: pods/x}`, []string{`steps[0].namespace: unknown field "namespace": namespace is a field of the action block`}},
		{"needs", `
  - name: a
    needs: [b, a, c, b, ""]
    wait: {for: delete, on: pods/x}
  - name: b
    wait: {for: delete, on: pods/x}`, []string{`steps[0].needs[1]: a step cannot need itself`, `steps[0].needs[2]: no step named "c"`, `steps[0].needs[3]: "b" is listed twice`, `steps[0].needs[4]: must not be empty`}},
		{"needs typo hint", `
  - name: remove-aws-node
    wait: {for: delete, on: pods/x}
  - name: cilium
    needs: [remove-aws-nod]
    wait: {for: delete, on: pods/x}`, []string{`no step named "remove-aws-nod" (did you mean "remove-aws-node"?)`}},
		{"cycle named", `
  - name: a
    needs: [c]
    wait: {for: delete, on: pods/x}
  - name: b
    needs: [a]
    wait: {for: delete, on: pods/x}
  - name: c
    needs: [b]
    wait: {for: delete, on: pods/x}`, []string{"steps[0].needs: dependency cycle: a -> c -> b -> a"}},
		{"two-step cycle", `
  - name: a
    needs: [b]
    wait: {for: delete, on: pods/x}
  - name: b
    needs: [a]
    wait: {for: delete, on: pods/x}`, []string{"dependency cycle: a -> b -> a"}},
		{"durations and onError", `
  - name: a
    timeout: 10
    retryDelay: -1s
    onError: skip
    wait: {for: delete, on: pods/x}`, []string{`steps[0].timeout: invalid duration "10"`, "steps[0].retryDelay: must not be negative", `steps[0].onError: must be one of "fail" or "continue", not "skip"`}},

		// when
		{"when must be bool", `
  - name: a
    when: vars.get("ENV", "dev")
    wait: {for: delete, on: pods/x}`, []string{"steps[0].when: invalid condition: must evaluate to a bool, not string"}},
		{"when syntax", `
  - name: a
    when: vars.ENV ==
    wait: {for: delete, on: pods/x}`, []string{"steps[0].when: invalid condition: Syntax error: mismatched input '<EOF>'"}},
		{"when unset variable", `
  - name: a
    when: vars.ENV == "prod"
    wait: {for: delete, on: pods/x}`, []string{"steps[0].when: variable ENV is not set"}},

		// skipIf per type
		{"skipIf words", `
  - name: a
    helm: {chart: ./charts/app, skipIf: exists}
  - name: b
    apply: {manifests: [{file: ./manifests/two.yaml}], skipIf: installed}
  - name: c
    job: {image: busybox, skipIf: exists}`, []string{`steps[0].helm.skipIf: helm steps accept only skipIf: installed, not "exists"`, `steps[1].apply.skipIf: apply steps accept only skipIf: exists, not "installed"`, `steps[2].job.skipIf: job steps accept only skipIf: succeeded, not "exists"`}},
		{"skipIf on types without one", `
  - name: a
    delete: {resource: pods/x, skipIf: exists}
  - name: b
    patch: {target: ds/x, patch: {a: 1}, skipIf: exists}
  - name: c
    wait: {for: delete, on: pods/x, skipIf: exists}
  - name: d
    rollout: {status: deployment/x, namespace: a, skipIf: exists}`, []string{"steps[0].delete.skipIf: unknown field \"skipIf\": delete steps have no skipIf", "steps[1].patch.skipIf: unknown field \"skipIf\": patch steps have no skipIf", "steps[2].wait.skipIf: unknown field \"skipIf\": wait steps have no skipIf", "steps[3].rollout.skipIf: unknown field \"skipIf\": rollout steps have no skipIf"}},

		// helm: chart sources
		{"helm valid forms", `
  - name: a
    helm: {chart: cilium, repo: https://helm.cilium.io/, version: 1.18.4}
  - name: b
    helm: {chart: "cilium:1.18.4", repo: https://helm.cilium.io/}
  - name: c
    helm: {chart: "oci://ghcr.io/org/charts/app:1.2.3"}
  - name: d
    helm: {chart: "oci://ghcr.io/org/charts/app", version: 1.2.3}
  - name: e
    helm: {chart: "oci://ghcr.io/org/charts/app@sha256:abc"}
  - name: f
    helm: {chart: ./charts/app}
  - name: g
    helm: {chart: ./charts/app-0.1.0.tgz}
  - name: h
    helm: {chart: "oci://localhost:5000/charts/app:1.0.0", auth: {username: u, password: p}}`, nil},
		{"bare name needs repo", `
  - name: a
    helm: {chart: cilium}`, []string{`steps[0].helm: repo is required for the bare chart name "cilium"`}},
		{"oci forbids repo", `
  - name: a
    helm: {chart: "oci://ghcr.io/org/app", repo: https://x}`, []string{"steps[0].helm.repo: an oci:// chart carries its registry"}},
		{"local forbids version repo auth", `
  - name: a
    helm: {chart: ./charts/app, version: 1.0.0, repo: https://x, auth: {username: u, password: p}}`, []string{"steps[0].helm.version: a local chart path already pins the chart", "steps[0].helm.repo: a local chart path takes no repo", "steps[0].helm.auth: a local chart path takes no auth"}},
		{"inline version vs version", `
  - name: a
    helm: {chart: "cilium:1.18.4", repo: https://x, version: 1.18.4}`, []string{`steps[0].helm.version: the chart already pins its version with name:version ("1.18.4")`}},
		{"oci tag vs version", `
  - name: a
    helm: {chart: "oci://ghcr.io/org/app:1.0", version: "1.0"}`, []string{"steps[0].helm.version: the chart already pins its version with an OCI :tag"}},
		{"oci digest vs version", `
  - name: a
    helm: {chart: "oci://ghcr.io/org/app@sha256:abc", version: "1.0"}`, []string{"steps[0].helm.version: the chart already pins a digest"}},
		{"chart shapes", `
  - name: a
    helm: {chart: "charts/app"}
  - name: b
    helm: {chart: "https://x/app", repo: https://x}
  - name: c
    helm: {chart: "a:b:c", repo: https://x}
  - name: d
    helm: {chart: "oci://ghcr.io"}`, []string{"steps[0].helm.chart: chart \"charts/app\": a local chart path must start with ./, ../ or /", "steps[1].helm.chart: chart \"https://x/app\": only oci:// references", "steps[2].helm.chart: chart \"a:b:c\": write name:version with exactly one colon", "steps[3].helm.chart: chart oci://ghcr.io: an OCI reference is oci://<registry>/<path>/<chart>"}},
		{"local chart missing", `
  - name: a
    helm: {chart: ./charts/nope}
  - name: b
    helm: {chart: ./charts/nope.tgz}
  - name: c
    helm: {chart: ./kust}`, []string{`steps[0].helm.chart: local chart "./charts/nope": no such file or directory`, `steps[1].helm.chart: chart archive "./charts/nope.tgz": no such file or directory`, `steps[2].helm.chart: local chart "./kust" has no Chart.yaml`}},
		{"auth vs userinfo", `
  - name: a
    helm: {chart: app, repo: "https://u:p@charts.example", auth: {username: u, password: p}}
  - name: b
    helm: {chart: "oci://u:p@ghcr.io/org/app", auth: {username: u, password: p}}`, []string{"steps[0].helm.auth: credentials are given twice", "steps[1].helm.auth: credentials are given twice"}},
		{"userinfo must be a full pair", `
  - name: a
    helm: {chart: app, repo: "https://user@charts.example"}
  - name: b
    helm: {chart: app, repo: "https://:pw@charts.example"}
  - name: c
    helm: {chart: "oci://user@ghcr.io/org/app"}`, []string{"steps[0].helm.repo: URL credentials must be a full user:password@ pair", "steps[1].helm.repo: URL credentials must be a full user:password@ pair", "steps[2].helm.chart: URL credentials must be a full user:password@ pair"}},
		{"auth needs both fields", `
  - name: a
    helm: {chart: "oci://ghcr.io/org/app", auth: {username: u}}`, []string{"steps[0].helm.auth: password is required"}},
		{"repo must be http", `
  - name: a
    helm: {chart: app, repo: "oci://ghcr.io/org"}`, []string{`steps[0].helm.repo: "oci://ghcr.io/org" is not an http:// or https:// URL`}},
		{"release name", `
  - name: ` + strings.Repeat("a", 60) + `
    helm: {chart: ./charts/app}
  - name: b
    helm: {chart: ./charts/app, release: Bad_Release}`, []string{"steps[0].name: the step name is the release name by default", `steps[1].helm.release: "Bad_Release" is not a valid Helm release name`}},
		{"valuesFrom entries", `
  - name: a
    helm:
      chart: ./charts/app
      valuesFrom:
        - file: ./values/base.yaml
        - url: https://example.com/v.yaml
        - {}
        - {file: ./values/base.yaml, url: https://example.com/v.yaml}
        - file: ./values/missing.yaml
        - file: ./values/list.yaml
        - url: ftp://example.com/v.yaml`, []string{"steps[0].helm.valuesFrom[2]: a valuesFrom entry needs one of file or url", "steps[0].helm.valuesFrom[3]: a valuesFrom entry has exactly one of file or url", `steps[0].helm.valuesFrom[4].file: values file "./values/missing.yaml": no such file or directory`, `steps[0].helm.valuesFrom[5].file: values file "./values/list.yaml" must hold a mapping, not a list`, `steps[0].helm.valuesFrom[6].url: "ftp://example.com/v.yaml" is not an http:// or https:// URL`}},
		{"values file syntax error at its line and column", `
  - name: a
    helm: {chart: ./charts/app, valuesFrom: [{file: ./values/broken.yaml}]}`, []string{`steps[0].helm.valuesFrom[0].file: values file "./values/broken.yaml", line 2, column 8: invalid YAML: '[' is not closed: did not find expected ',' or ']' at line 3, column 1`}},
		{"values must be a mapping", `
  - name: a
    helm: {chart: ./charts/app, values: [1, 2]}`, []string{"steps[0].helm.values: must be a mapping, not a list"}},
		{"helm namespace", `
  - name: a
    helm: {chart: ./charts/app, namespace: Kube_System}`, []string{`steps[0].helm.namespace: "Kube_System" is not a valid namespace`}},

		// apply
		{"apply valid sources", `
  - name: a
    apply:
      namespace: demo
      createNamespace: true
      serverSide: true
      skipIf: exists
      waitFor: jsonpath={.status.phase}=Active
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: x}
        - file: ./manifests/two.yaml
        - url: https://example.com/m.yaml
        - kustomize: ./kust`, nil},
		{"manifests entries", `
  - name: a
    apply:
      manifests:
        - {}
        - {inline: "a: 1", file: ./manifests/two.yaml}
        - file: ./manifests/missing.yaml
        - kustomize: github.com/org/repo//base
        - kustomize: ./manifests
        - kustomize: ./nope
        - url: /local/path`, []string{"steps[0].apply.manifests[0]: a manifests entry needs exactly one of inline, file, url or kustomize", "steps[0].apply.manifests[1]: a manifests entry has exactly one source, but this one has inline and file", `steps[0].apply.manifests[2].file: manifest file "./manifests/missing.yaml": no such file or directory`, `steps[0].apply.manifests[3].kustomize: "github.com/org/repo//base": kustomize sources must be local paths`, `steps[0].apply.manifests[4].kustomize: kustomization "./manifests" has no kustomization.yaml`, `steps[0].apply.manifests[5].kustomize: kustomization "./nope": no such file or directory`, `steps[0].apply.manifests[6].url: "/local/path" is not an http:// or https:// URL`}},
		{"manifests required and non-empty", `
  - name: a
    apply: {namespace: x}
  - name: b
    apply: {manifests: []}`, []string{"steps[0].apply: manifests is required", "steps[1].apply.manifests: at least one manifest source is required"}},
		{"manifest content checked", `
  - name: a
    apply:
      manifests:
        - inline: |
            kind: ConfigMap
            metadata: {}
        - inline: "- a\n- b\n"
        - file: ./manifests/noname.yaml
        - file: ./manifests/broken.yaml`, []string{"steps[0].apply.manifests[0].inline: inline manifest, document 1 (line 1): missing apiVersion, metadata.name", "steps[0].apply.manifests[1].inline: inline manifest, document 1 (line 1): a manifest must be a mapping, not a list", "steps[0].apply.manifests[2].file: ./manifests/noname.yaml, document 1 (line 1): missing metadata.name", "steps[0].apply.manifests[3].file: ./manifests/broken.yaml, document 1: invalid YAML"}},
		{"apply createNamespace needs namespace and waitFor grammar", `
  - name: a
    apply: {manifests: [{file: ./manifests/two.yaml}], createNamespace: true, waitFor: delete}
  - name: b
    apply: {manifests: [{file: ./manifests/two.yaml}], waitFor: ready}`, []string{"steps[0].apply.createNamespace: createNamespace needs namespace", "steps[0].apply.waitFor: waitFor cannot be delete", `steps[1].apply.waitFor: "ready": want condition=<Name>[=<value>], jsonpath=<expr>[=<value>] or delete`}},

		// delete
		{"delete valid forms", `
  - name: a
    delete: {manifests: [{file: ./manifests/two.yaml}], namespace: x, ignoreNotFound: false}
  - name: b
    delete: {resource: daemonset/aws-node, namespace: kube-system}
  - name: c
    delete: {resource: pods, allNamespaces: true, selector: "app in (a,b)", fieldSelector: status.phase=Failed}
  - name: d
    delete: {release: nginx-ingress, namespace: ingress}`, nil},
		{"delete forms exclusive", `
  - name: a
    delete: {}
  - name: b
    delete: {resource: pods/x, release: y}`, []string{"steps[0].delete: delete needs exactly one of manifests, resource or release", "steps[1].delete: delete has exactly one form, but this one has resource and release"}},
		{"delete fields per form", `
  - name: a
    delete: {release: x, selector: a=b, allNamespaces: true}
  - name: b
    delete: {manifests: [{file: ./manifests/two.yaml}], fieldSelector: a=b}`, []string{"steps[0].delete.allNamespaces: allNamespaces does not apply to delete by release", "steps[0].delete.selector: selector does not apply to delete by release", "steps[1].delete.fieldSelector: fieldSelector does not apply to delete by manifests"}},
		{"delete resource rules", `
  - name: a
    delete: {resource: daemonset/aws-node, namespace: kube-system, allNamespaces: true}
  - name: b
    delete: {resource: deployment/x, selector: app=x}
  - name: c
    delete: {resource: "pods", selector: "a in b"}
  - name: d
    delete: {resource: "Pod Thing"}
  - name: e
    delete: {resource: pods, fieldSelector: "status.phase"}`, []string{"steps[0].delete.allNamespaces: namespace and allNamespaces are mutually exclusive", `steps[0].delete.allNamespaces: "daemonset/aws-node" names one object, which cannot be looked up across all namespaces`, `steps[1].delete.resource: "deployment/x" names one object, so selector and fieldSelector cannot apply`, `steps[2].delete.selector: invalid label selector "a in b"`, `steps[3].delete.resource: "Pod Thing": want a resource type`, `steps[4].delete.fieldSelector: invalid field selector "status.phase"`}},
		{"delete release name", `
  - name: a
    delete: {release: Bad_Name}`, []string{`steps[0].delete.release: "Bad_Name" is not a valid Helm release name`}},

		// patch
		{"patch valid", `
  - name: a
    patch: {target: daemonset/aws-node, namespace: kube-system, patch: {spec: {template: {spec: {nodeSelector: {a: "b"}}}}}}
  - name: b
    patch: {target: storageclass/gp3, type: merge, patch: {metadata: {annotations: {a: "true"}}}}
  - name: c
    patch:
      target: deployment/x
      type: json
      patch:
        - {op: remove, path: /spec/template/spec/nodeSelector}
        - {op: add, path: /metadata/labels/a, value: b}
        - {op: move, from: /a, path: /b}`, nil},
		{"patch type and body shape", `
  - name: a
    patch: {target: deployment/x, type: jsonpatch, patch: {a: 1}}
  - name: b
    patch: {target: deployment/x, type: json, patch: {a: 1}}
  - name: c
    patch: {target: deployment/x, patch: [{op: add, path: /a, value: 1}]}
  - name: d
    patch: {target: deployment/x, type: merge, patch: {}}
  - name: e
    patch: {target: deployment, patch: {a: 1}}
  - name: f
    patch: {target: deployment/x}`, []string{`steps[0].patch.type: must be one of "strategic", "merge" or "json", not "jsonpatch"`, "steps[1].patch.patch: a json patch is a list of operations (op, path, value), not a mapping", "steps[2].patch.patch: a strategic patch is a mapping of the fields to change, not a list", "steps[3].patch.patch: must not be empty", `steps[4].patch.target: "deployment": want kind/name`, "steps[5].patch: patch is required"}},
		{"json patch operations", `
  - name: a
    patch:
      target: deployment/x
      type: json
      patch:
        - {op: add, path: /a}
        - {op: upsert, path: /a, value: 1}
        - {op: copy, path: /a}
        - {path: /a}
        - {op: remove, path: a}
        - {op: remove, path: /a, extra: 1}
        - "remove /a"`, []string{`steps[0].patch.patch[0]: a "add" operation needs value`, `steps[0].patch.patch[1]: op must be add, remove, replace, move, copy or test, not "upsert"`, `steps[0].patch.patch[2]: a "copy" operation needs from`, "steps[0].patch.patch[3]: op is required", "steps[0].patch.patch[4]: path must be a JSON pointer", `steps[0].patch.patch[5]: unknown json patch field "extra"`, "steps[0].patch.patch[6]: a json patch operation is a mapping with op and path, not a string"}},

		// wait
		{"wait valid forms", `
  - name: a
    wait: {for: condition=Ready, on: pods, allNamespaces: true}
  - name: b
    wait: {for: condition=Available=False, on: deployment/x, namespace: a}
  - name: c
    wait: {for: "jsonpath={.status.readyReplicas}=2", on: deployment/coredns, namespace: kube-system}
  - name: d
    wait: {for: "jsonpath=.status.phase=Running", on: pods/x}
  - name: e
    wait: {for: "jsonpath=status.phase", on: pods/x}
  - name: f
    wait: {for: 'jsonpath={.status.conditions[?(@.type=="Ready")].status}=True', on: pods, selector: app=web}
  - name: g
    wait: {for: delete, on: pods, selector: app=old}
  - name: h
    wait: {for: 'jsonpath=.status.conditions[?(@.type=="Ready")].status=True', on: pods/x}`, nil},
		{"wait.for grammar", `
  - name: a
    wait: {for: ready, on: pods/x}
  - name: b
    wait: {for: "condition=", on: pods/x}
  - name: c
    wait: {for: "jsonpath=", on: pods/x}
  - name: d
    wait: {for: "jsonpath={.status.phase", on: pods/x}
  - name: e
    wait: {for: "jsonpath=.a[?(@.type=\"Ready\")].status=True", on: pods/x}
  - name: f
    wait: {for: "jsonpath={.status.phase}=", on: pods/x}
  - name: g
    wait: {for: "condition=Ready=", on: pods/x}
  - name: h
    wait: {for: "jsonpath={.status.phase}x", on: pods/x}`, []string{`steps[0].wait.for: "ready": want condition=<Name>[=<value>]`, `steps[1].wait.for: "condition=": want condition=<Name>`, `steps[2].wait.for: "jsonpath=": empty jsonpath expression`, `steps[3].wait.for: "jsonpath={.status.phase": unbalanced braces`, `steps[4].wait.for: "jsonpath=.a[?(@.type=\"Ready\")].status=True": too many "=": an expression with a filter needs the braced form`, `steps[5].wait.for: "jsonpath={.status.phase}=": empty value`, `steps[6].wait.for: "condition=Ready=": empty value`, `steps[7].wait.for: "jsonpath={.status.phase}x": unexpected "x"`}},
		{"wait required and scope", `
  - name: a
    wait: {on: pods}
  - name: b
    wait: {for: delete, on: pods/x, namespace: a, allNamespaces: true}
  - name: c
    wait: {for: delete, on: deployment/x, selector: app=x}`, []string{"steps[0].wait: for is required", "steps[1].wait.allNamespaces: namespace and allNamespaces are mutually exclusive", `steps[1].wait.allNamespaces: "pods/x" names one object`, `steps[2].wait.on: "deployment/x" names one object, so selector and fieldSelector cannot apply`}},
		{"wait on key is a string under YAML 1.2", `
  - name: a
    wait:
      for: delete
      on: pods/x
      namespace: default`, nil},

		// rollout
		{"rollout valid", `
  - name: a
    rollout: {restart: daemonset/eks-pod-identity-agent, namespace: kube-system}
  - name: b
    rollout: {status: deploy/x, namespace: a}
  - name: c
    rollout: {status: statefulsets.apps/db, namespace: a}`, nil},
		{"rollout rules", `
  - name: a
    rollout: {restart: deployment/x, status: deployment/x, namespace: a}
  - name: b
    rollout: {namespace: a}
  - name: c
    rollout: {restart: cronjob/x, namespace: a}
  - name: d
    rollout: {status: deployment, namespace: a}
  - name: e
    rollout: {status: deployment/x}`, []string{"steps[0].rollout: rollout takes exactly one of restart or status, not both", "steps[1].rollout: rollout needs one of restart or status", `steps[2].rollout.restart: "cronjob/x": rollout supports deployment, daemonset and statefulset, not "cronjob"`, `steps[3].rollout.status: "deployment": want kind/name`, "steps[4].rollout: namespace is required"}},

		// job
		{"job valid", `
  - name: a
    job:
      image: public.ecr.aws/aws-cli/aws-cli:2.17.0
      command: ["sh", "-c"]
      args: ["aws sts get-caller-identity"]
      env: {AWS_REGION: us-east-1, RETRIES: 3, DEBUG: true}
      namespace: kube-system
      createNamespace: true
      serviceAccount: bootstrap-admin
      skipIf: succeeded`, nil},
		{"job rules", `
  - name: a
    job: {command: [sh]}
  - name: b
    job: {image: "busy box", env: {"A=B": x, OK: {nested: 1}}, serviceAccount: Admin_SA, args: "not a list"}`, []string{"steps[0].job: image is required", `steps[1].job.image: "busy box" is not a valid image reference`, `steps[1].job.serviceAccount: "Admin_SA" is not a valid ServiceAccount name`, `steps[1].job.env.A=B: "A=B" is not a valid environment variable name`, "steps[1].job.env.OK: must be a string, not a mapping", "steps[1].job.args: must be a list, not a string"}},

		// variables
		{"missing variables all reported with their field", `
  - name: a
    job: {image: "${IMAGE}", args: ["${A}", "${B|upper}"]}`, []string{"steps[0].job.image: variable IMAGE is not set", "steps[0].job.args[0]: variable A is not set", "steps[0].job.args[1]: variable B is not set"}},
		{"excluded pipeline function", `
  - name: a
    job: {image: "busybox:${TAG:-x|now}"}`, []string{`function "now" is not available in khook pipelines`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.src
			if !strings.HasPrefix(src, "apiVersion") && !strings.HasPrefix(src, "steps") && src != "" {
				src = envelope + strings.TrimPrefix(src, "\n") + "\n"
			}
			_, err := parseSpec(t, src)
			got := problems(t, err)
			if len(tt.want) == 0 {
				if len(got) > 0 {
					t.Fatalf("want a valid spec, got:\n%s", strings.Join(got, "\n"))
				}
				return
			}
			for _, w := range tt.want {
				found := false
				for _, g := range got {
					if strings.Contains(g, w) {
						found = true
						break
					}
				}
				if !found {
					t.Errorf("missing problem %q", w)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("want %d problems, got %d", len(tt.want), len(got))
			}
			if t.Failed() {
				t.Logf("got:\n%s", strings.Join(got, "\n"))
			}
		})
	}
}

// TestSuggestionOfATie: of step names equally near a misspelled need, the
// suggestion is the first in the spec, on every run (it was whichever a
// map gave first).
func TestSuggestionOfATie(t *testing.T) {
	src := "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: t}\nsteps:\n" +
		"  - name: b\n    wait: {for: delete, on: pods/x}\n" +
		"  - name: a\n    wait: {for: delete, on: pods/x}\n" +
		"  - name: d\n    needs: [c]\n    wait: {for: delete, on: pods/x}\n"
	for range 30 {
		_, err := parseSpec(t, src)
		if got := problems(t, err); len(got) != 1 || !strings.HasSuffix(got[0], `no step named "c" (did you mean "b"?)`) {
			t.Fatalf("problems %q, want the one suggesting b, the first step", got)
		}
	}
}
