#!/usr/bin/env bash
# Whole-process wall time of both plugins: `version`, and `validate` of a
# generated 500-step spec (with and without a when: on every step). Prints
# the median and the best of RUNS runs (default 20) in milliseconds.
#
#   bench/startup.sh            # builds bin/ first
#   RUNS=50 bench/startup.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs="${RUNS:-20}"
make -s -C "$root" build >/dev/null
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go run ./dev/cmd/khook-specgen -steps 500 >"$tmp/500.yaml" &&
	go run ./dev/cmd/khook-specgen -steps 500 -when >"$tmp/500-when.yaml")

measure() {
	local label="$1"
	shift
	local times=()
	for _ in $(seq "$runs"); do
		local start end
		start=$(date +%s%N)
		"$@" >/dev/null 2>&1 || { echo "$label: failed: $*" >&2; exit 1; }
		end=$(date +%s%N)
		times+=($(((end - start) / 1000)))
	done
	printf '%s\n' "${times[@]}" | sort -n | awk -v label="$label" '{ t[NR] = $1 } END {
		printf "%-50s median %6.1f ms   best %6.1f ms   (%d runs)\n", label, t[int((NR + 1) / 2)] / 1000, t[1] / 1000, NR }'
}

for bin in kubectl-khook helm-khook; do
	b="$root/bin/$bin"
	measure "$bin version" "$b" version
	measure "$bin validate (500 steps)" "$b" validate -f "$tmp/500.yaml"
	measure "$bin validate (500 steps, when: on each)" "$b" validate -f "$tmp/500-when.yaml" --set ENV=prod
done
