#!/usr/bin/env bash
# The no-op re-run of the 10-chart spec of bench/charts.sh (ten local
# charts of a ConfigMap and a 1-replica Deployment, wait: true, no state:),
# before and after a change: wall time of the whole `kubectl khook apply`
# process, two builds in paired rounds whose order alternates (before
# after, after before, ...) so that both see the same load. Prints each
# run, the medians and the median of the per-round ratios after/before.
#
#   BEFORE=75a0f50 bench/noop.sh
#   RUNS=15 BEFORE=main bench/noop.sh
#   BEFORE=main BEFORE_BIN=/tmp/khook-main bench/noop.sh   # a build made elsewhere
#
# Runs against the cluster KUBECONFIG names (a test cluster: make
# cluster-up), in a namespace of its own, removed at the end.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs="${RUNS:-11}"
go="${GO:-go}"
before="${BEFORE:?BEFORE=<commit> names the build to compare with}"
before_bin="${BEFORE_BIN:-}"
: "${KUBECONFIG:?KUBECONFIG must name a test cluster}"
kubectl="${KHOOK_TESTBIN:-$root/.cache/testbin/bin}/kubectl"
charts="$root/core/testing/chartrepo/testdata/charts"

tmp="$(mktemp -d)"
ns="noop-bench-$$"
cleanup() {
	"$kubectl" delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
	if [[ -d "$tmp/before-src" ]]; then
		git -C "$root" worktree remove --force "$tmp/before-src" >&2 || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "building..." >&2
(cd "$root/kubectl-khook" && CGO_ENABLED=0 "$go" build -trimpath -o "$tmp/khook-after" .)
if [[ -n "$before_bin" ]]; then
	cp "$before_bin" "$tmp/khook-before"
else
	git -C "$root" worktree add --detach "$tmp/before-src" "$before" >&2
	(cd "$tmp/before-src/kubectl-khook" && CGO_ENABLED=0 "$go" build -trimpath -o "$tmp/khook-before" .)
fi

"$kubectl" create namespace "$ns" >/dev/null
"$kubectl" wait --for=create serviceaccount/default -n "$ns" --timeout=60s >/dev/null
spec="$tmp/spec.yaml"
{
	printf 'apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: noop}\nsteps:\n'
	for i in $(seq 0 9); do
		printf '  - name: r%d\n    helm: {chart: %s, namespace: %s, wait: true, values: {color: c%d}}\n' "$i" "$charts/cmdeploy" "$ns" "$i"
	done
} >"$spec"
"$tmp/khook-after" apply -f "$spec" >/dev/null 2>&1

# timed VARIANT: one no-op re-run, its wall time (ms) appended to
# $tmp/VARIANT; it must change nothing.
timed() {
	local start end
	start=$(date +%s%N)
	"$tmp/khook-$1" apply -f "$spec" -o json >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
	end=$(date +%s%N)
	if grep -q '"message": *"upgraded\|repaired' "$tmp/out"; then
		echo "$1: the no-op re-run changed something" >&2
		cat "$tmp/out" >&2
		exit 1
	fi
	echo $(((end - start) / 1000000)) >>"$tmp/$1"
}

for round in $(seq "$runs"); do
	if ((round % 2)); then order=(before after); else order=(after before); fi
	for v in "${order[@]}"; do timed "$v"; done
	echo "round $round: before $(tail -1 "$tmp/before") ms, after $(tail -1 "$tmp/after") ms" >&2
done

median() { sort -n "$1" | awk '{ t[NR] = $1 } END { printf "%.3f", t[int((NR + 1) / 2)] / 1000 }'; }
paste "$tmp/before" "$tmp/after" | awk '{ printf "%.4f\n", $2 / $1 }' >"$tmp/ratio"
echo
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $runs paired rounds, alternating order"
echo "no-op re-run, 10 charts: before ($before) median $(median "$tmp/before") s, after median $(median "$tmp/after") s"
echo "median of the per-round ratios after/before: $(sort -n "$tmp/ratio" | awk '{ t[NR] = $1 } END { printf "%.3f", t[int((NR + 1) / 2)] }')"
echo "before: $(tr '\n' ' ' <"$tmp/before")"
echo "after:  $(tr '\n' ' ' <"$tmp/after")"
