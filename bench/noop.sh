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
#   BEFORE_BIN=/tmp/khook-main TRACED=1 bench/noop.sh
#
# BEFORE_BIN names a binary built already (a checkout's, built outside the
# repo) instead of a commit to build. TRACED=1 adds a third variant, the
# build after the change with tracing on: its spans sent by OTLP/gRPC to
# the OpenTelemetry Collector's receiver (hack/otlpsink, $OTLPSINK, default
# .cache/otlpsink/otlpsink: make otlpsink), started here on loopback.
#
# Runs against the cluster KUBECONFIG names (a test cluster: make
# cluster-up), in a namespace of its own, removed at the end.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/bench/paired.sh"
runs="${RUNS:-11}"
before="${BEFORE:-}"
[[ -n "$before" || -n "${BEFORE_BIN:-}" ]] || { echo "BEFORE=<commit> or BEFORE_BIN=<binary> names the build to compare with" >&2; exit 2; }
charts="$root/core/testing/chartrepo/testdata/charts"

tmp="$(mktemp -d)"
ns="noop-bench-$$"
sink_pid=
cleanup() {
	[[ -z "$sink_pid" ]] || kill "$sink_pid" 2>/dev/null || true
	"$kubectl" delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
	if [[ -d "$tmp/before-src" ]]; then
		git -C "$root" worktree remove --force "$tmp/before-src" >&2 || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "building..." >&2
(cd "$root/kubectl-khook" && CGO_ENABLED=0 "$go" build -trimpath -o "$tmp/khook-after" .)
if [[ -n "${BEFORE_BIN:-}" ]]; then
	cp "$BEFORE_BIN" "$tmp/khook-before"
	before="$BEFORE_BIN"
else
	git -C "$root" worktree add --detach "$tmp/before-src" "$before" >&2
	(cd "$tmp/before-src/kubectl-khook" && CGO_ENABLED=0 "$go" build -trimpath -o "$tmp/khook-before" .)
fi
variants=(before after)
traced_env=()
if [[ -n "${TRACED:-}" ]]; then
	sink="${OTLPSINK:-$root/.cache/otlpsink/otlpsink}"
	port=$((20000 + RANDOM % 20000))
	"$sink" -grpc "127.0.0.1:$port" -http "127.0.0.1:$((port + 1))" -out "$tmp/spans.jsonl" >"$tmp/sink.out" 2>&1 &
	sink_pid=$!
	for _ in $(seq 50); do grep -q ready "$tmp/sink.out" && break; sleep 0.1; done
	grep -q ready "$tmp/sink.out" || { cat "$tmp/sink.out" >&2; exit 1; }
	cp "$tmp/khook-after" "$tmp/khook-traced"
	traced_env=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$port" OTEL_EXPORTER_OTLP_PROTOCOL=grpc)
	variants+=(traced)
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
	local env=()
	[[ $1 != traced ]] || env=("${traced_env[@]}")
	start=$(date +%s%N)
	env "${env[@]}" "$tmp/khook-$1" apply -f "$spec" -o json >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
	end=$(date +%s%N)
	if grep -q '"message": *"upgraded\|repaired' "$tmp/out"; then
		echo "$1: the no-op re-run changed something" >&2
		cat "$tmp/out" >&2
		exit 1
	fi
	echo $(((end - start) / 1000000)) >>"$tmp/$1"
}

for round in $(seq "$runs"); do
	# the order turns every round, so that each variant sees each place
	n=${#variants[@]}
	order=()
	for k in $(seq 0 $((n - 1))); do order+=("${variants[$(((k + round) % n))]}"); done
	if ((n == 2)); then
		if ((round % 2)); then order=(before after); else order=(after before); fi
	fi
	for v in "${order[@]}"; do timed "$v"; done
	line="round $round:"
	for v in "${variants[@]}"; do line+=" $v $(tail -1 "$tmp/$v") ms"; done
	echo "$line" >&2
done

paired_report "no-op re-run, 10 charts (before: $before)" after "$tmp/after" before "$tmp/before"
if [[ -n "${TRACED:-}" ]]; then
	paste "$tmp/before" "$tmp/traced" | awk '{ printf "%.4f\n", $2 / $1 }' >"$tmp/ratio-traced"
	echo "traced (OTLP/gRPC to the collector's receiver): median $(median_s "$tmp/traced") s; median of the per-round ratios traced/before: $(sort -n "$tmp/ratio-traced" | awk '{ t[NR] = $1 } END { printf "%.3f", t[int((NR + 1) / 2)] }')"
	echo "traced: $(tr '\n' ' ' <"$tmp/traced")"
	echo "spans received: $(grep -o '"spanId"' "$tmp/spans.jsonl" | wc -l) in $(wc -l <"$tmp/spans.jsonl") requests"
fi
