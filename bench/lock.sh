#!/usr/bin/env bash
# The run lock's price: wall time of a no-op re-run, with a state record, of
# the 10-chart spec of bench/charts.sh (ten local charts in parallel steps,
# each a ConfigMap and a 1-replica Deployment, wait: true), on a fresh test
# cluster, with three builds alternated round by round so that all see the
# same load (paired runs):
#   nolock   this tree with the lock left out (takeLock returns no lock: a
#            copy of the tree patched in a temporary worktree; never a
#            product switch)
#   before   kubectl-khook built from $BEFORE (default: the merge base with
#            main), the lock as it was
#   after    this tree
# Each round runs every build once, in a rotating order, against its own
# copy of the spec (own namespace, own record), installed beforehand.
# Prints the medians, and the medians of the per-round ratios to nolock.
#
#   bench/lock.sh
#   RUNS=41 BEFORE=75a0f50 bench/lock.sh
#
# Needs the test cluster's binaries (KHOOK_TESTBIN, default
# .cache/testbin/bin). The cluster is started in a temporary directory and
# always stopped.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs="${RUNS:-21}"
go="${GO:-go}"
export KHOOK_TESTBIN="${KHOOK_TESTBIN:-$root/.cache/testbin/bin}"
charts="$root/core/testing/chartrepo/testdata/charts"
before="${BEFORE:-$(git -C "$root" merge-base HEAD main)}"

tmp="$(mktemp -d)"
tool="$tmp/khook-testcluster"
cluster="$tmp/cluster"
started=0
cleanup() {
	if [[ $started -eq 1 ]]; then
		"$tool" down --dir "$cluster" --remove >&2 || true
	fi
	for w in before-src nolock-src; do
		if [[ -d "$tmp/$w" ]]; then
			git -C "$root" worktree remove --force "$tmp/$w" >&2 || true
		fi
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "building..." >&2
(cd "$root/kubectl-khook" && CGO_ENABLED=0 "$go" build -trimpath -o "$tmp/khook-after" .)
git -C "$root" worktree add --detach "$tmp/before-src" "$before" >&2
(cd "$tmp/before-src/kubectl-khook" && CGO_ENABLED=0 "$go" build -trimpath -o "$tmp/khook-before" .)
# nolock: this tree (its working copy, committed or not) with takeLock
# taking no lock
git -C "$root" worktree add --detach "$tmp/nolock-src" HEAD >&2
(cd "$root" && git diff HEAD) | (cd "$tmp/nolock-src" && git apply --allow-empty)
sed -i 's/^\tif !c\.doc\.Spec\.State\.IsEnabled() {$/\tif true { \/\/ bench\/lock.sh: no lock/' "$tmp/nolock-src/core/engine/lock.go"
grep -q 'bench/lock.sh: no lock' "$tmp/nolock-src/core/engine/lock.go" || { echo "bench/lock.sh: could not patch takeLock out" >&2; exit 1; }
(cd "$tmp/nolock-src/kubectl-khook" && CGO_ENABLED=0 "$go" build -trimpath -o "$tmp/khook-nolock" .)
(cd "$root" && "$go" build -o "$tool" ./dev/cmd/khook-testcluster)
variants=(nolock before after)

echo "starting a test cluster..." >&2
started=1
"$tool" up --dir "$cluster" >/dev/null
export KUBECONFIG="$cluster/kubeconfig"
kubectl="$KHOOK_TESTBIN/kubectl"

# spec NAME: the 10-chart spec with wait: true and a state record, in
# namespace NAME.
spec() {
	local f="$tmp/$1.yaml"
	{
		printf 'apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: %s}\nstate: {namespace: %s}\nsteps:\n' "$1" "$1"
		for i in $(seq 0 9); do
			printf '  - name: r%d\n    helm: {chart: %s, namespace: %s, wait: true, values: {color: c%d}}\n' \
				"$i" "$charts/cmdeploy" "$1" "$i"
		done
	} >"$f"
	echo "$f"
}

for v in "${variants[@]}"; do
	"$kubectl" create namespace "lock-$v" >/dev/null
	"$kubectl" wait --for=create serviceaccount/default -n "lock-$v" --timeout=60s >/dev/null
	f="$(spec "lock-$v")"
	"$tmp/khook-$v" apply -f "$f" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
	"$tmp/khook-$v" apply -f "$f" >/dev/null 2>&1 # warm: the first re-run reads what the install wrote
done

for round in $(seq "$runs"); do
	n=${#variants[@]}
	for k in $(seq 0 $((n - 1))); do
		v="${variants[$(((round + k) % n))]}"
		start=$(date +%s%N)
		"$tmp/khook-$v" apply -f "$tmp/lock-$v.yaml" >"$tmp/out" 2>&1 || { echo "$v: failed" >&2; cat "$tmp/out" >&2; exit 1; }
		end=$(date +%s%N)
		echo $(((end - start) / 1000)) >>"$tmp/$v"
		echo $(((end - start) / 1000)) >"$tmp/$v-last"
	done
	nl=$(cat "$tmp/nolock-last")
	for v in before after; do
		awk -v a="$(cat "$tmp/$v-last")" -v b="$nl" 'BEGIN { printf "%.4f\n", a / b }' >>"$tmp/$v-ratio"
	done
done

median() { sort -g "$tmp/$1" | awk '{ t[NR] = $1 } END { print t[int((NR + 1) / 2)] }'; }
echo
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $runs rounds, each build once per round, order rotating"
echo "no-op re-run with a state record, 10 charts (wait: true); before = $before"
for v in "${variants[@]}"; do
	printf '%-7s median %6.1f ms\n' "$v" "$(awk -v us="$(median "$v")" 'BEGIN { print us / 1000 }')"
done
for v in before after; do
	printf '%-7s / nolock: median of the per-round ratios %s\n' "$v" "$(median "$v-ratio")"
done
