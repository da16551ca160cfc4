#!/usr/bin/env bash
# The live plan of a spec the state record has all done, against the
# no-op apply of the same spec: STEPS `apply:` steps (default 3000), each
# one inline ConfigMap, with `state: {}`, applied once, then timed in
# paired rounds whose order alternates (plan apply, apply plan, ...) so
# that both see the same load: wall time of the whole `kubectl khook plan`
# and `kubectl khook apply` processes. The record resumes every step: the
# apply sends no request per step, and neither should the plan (it plans
# a step the run resumes from the record). Prints each round, the medians
# and the median of the per-round ratios plan/apply.
#
#   bench/plan.sh                        # the build of this checkout
#   KHOOK_BIN=/tmp/khook-8ffcfe8 bench/plan.sh
#   STEPS=1000 RUNS=9 bench/plan.sh
#
# KHOOK_BIN names a binary built already (another commit's, built outside
# the repo) instead of building this checkout. Runs against the cluster
# KUBECONFIG names (a test cluster: hack/with-cluster.sh or make
# cluster-up), in a namespace of its own, removed at the end with the
# record.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/bench/paired.sh"
runs="${RUNS:-7}"
steps="${STEPS:-3000}"

tmp="$(mktemp -d)"
ns="plan-bench-$$"
cleanup() {
	"$kubectl" delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
	"$kubectl" delete secret -n default "khook-state-plan-bench-$$" >/dev/null 2>&1 || true
	"$kubectl" delete lease -n default "khook-state-plan-bench-$$" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

bin="${KHOOK_BIN:-}"
if [[ -z "$bin" ]]; then
	echo "building..." >&2
	(cd "$root/kubectl-khook" && CGO_ENABLED=0 "$go" build -trimpath -o "$tmp/khook" .)
	bin="$tmp/khook"
fi

"$kubectl" create namespace "$ns" >/dev/null
spec="$tmp/spec.yaml"
{
	printf 'apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: plan-bench-%d}\nstate: {}\nsteps:\n' $$
	for i in $(seq 1 "$steps"); do
		printf '  - name: s%d\n    apply:\n      manifests:\n        - inline: |\n            apiVersion: v1\n            kind: ConfigMap\n            metadata: {name: c%d, namespace: %s}\n            data: {k: v%d}\n' "$i" "$i" "$ns" "$i"
	done
} >"$spec"
echo "applying $steps steps..." >&2
"$bin" apply -f "$spec" >/dev/null 2>"$tmp/first" || { cat "$tmp/first" >&2; exit 1; }

# timed VARIANT: one live plan or one no-op apply, its wall time (ms)
# appended to $tmp/VARIANT; the apply must resume every step.
timed() {
	local start end
	start=$(date +%s%N)
	"$bin" "$1" -f "$spec" -o json >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
	end=$(date +%s%N)
	if [[ $1 == apply ]] && grep -q '"attempts": *[1-9]' "$tmp/out"; then
		echo "the no-op apply ran a step" >&2
		exit 1
	fi
	echo $(((end - start) / 1000000)) >>"$tmp/$1"
}

for round in $(seq "$runs"); do
	if ((round % 2)); then order=(plan apply); else order=(apply plan); fi
	for v in "${order[@]}"; do timed "$v"; done
	echo "round $round: plan $(tail -1 "$tmp/plan") ms, apply $(tail -1 "$tmp/apply") ms" >&2
done

paired_report "$steps apply: steps recorded done ($bin)" plan "$tmp/plan" apply "$tmp/apply"
