#!/usr/bin/env bash
# Helm steps at the speed of a watch: wall time of `kubectl khook` applying
# and destroying specs of helm steps on a fresh test cluster, medians of
# RUNS rounds (default 3).
#
# Scenario "10 charts": ten local charts in parallel steps, each a
# ConfigMap and a 1-replica Deployment (kwok makes pods Ready at once):
#   install wait: false   (fresh namespace)
#   install wait: true    (fresh namespace)
#   no-op re-run          (the wait: true spec again)
#   destroy               (of the wait: true spec)
#   pace                  the cluster's own pace during the wait: from the
#                         first Deployment created to the last one Current
#                         by kstatus, seen by a watch outside khook
#                         (khook-testcluster ready)
#   lag                   how long after that the wait: true apply ended
#                         (the wait noticing, helm's release record,
#                         khook's state record, the process exiting)
#   lead                  from the wait: true apply's start to the first
#                         Deployment seen (the process starting, loading,
#                         rendering, creating what comes before)
# The wait: true apply starts on a settled cluster: it waits until the
# no-wait install's Deployments are Current. (The no-wait apply ends about
# 0.1 s before they are, and that work used to slow the next apply.)
# Scenario "real-shaped": ten releases of a chart with three Deployments
# (2 replicas), a StatefulSet, a DaemonSet, two Services, a PVC bound to a
# PV and a post-install hook Job (kwok completes Job pods after 1 s),
# installed with wait: true, then destroyed.
#
# Every scenario runs with three builds, in alternating rounds so that all
# see the same load:
#   khook       the default: khook's readiness waiter, background uninstall
#   helm        Helm 4's status watcher for readiness
#               (-X khook.io/core/helm.readinessWaiter=helm)
#   foreground  khook's waiter, foreground uninstall
#               (-X khook.io/core/helm.deletionPropagation=foreground)
#
# The namespaces exist beforehand, with their default ServiceAccount: in a
# namespace created by the step, the ReplicaSet controller cannot create a
# Pod until the ServiceAccount controller made that account, and retries
# with a backoff of its own (seconds), which would measure the cluster.
# Prints each median and the ratios the targets of issue 13 are about.
#
#   bench/charts.sh
#   RUNS=5 bench/charts.sh
#   BEFORE=44c8b74 bench/charts.sh   # adds a variant "before": kubectl-khook
#                                    # built from that commit (helm 3 SDK)
#   BEFORE_BIN=/tmp/kubectl-khook bench/charts.sh   # the same, a binary
#                                    # built beforehand (outside the repo)
#   VARIANTS=khook REAL=0 bench/charts.sh   # only these builds (with
#                                    # "before" when asked), and without the
#                                    # real-shaped scenario
#
# Needs the test cluster's binaries (make testbin; KHOOK_TESTBIN, default
# .cache/testbin/bin). The cluster is started in a temporary directory and
# always stopped.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs="${RUNS:-3}"
go="${GO:-go}"
export KHOOK_TESTBIN="${KHOOK_TESTBIN:-$root/.cache/testbin/bin}"
charts="$root/core/testing/chartrepo/testdata/charts"

tmp="$(mktemp -d)"
tool="$tmp/khook-testcluster"
cluster="$tmp/cluster"
started=0
cleanup() {
	if [[ $started -eq 1 ]]; then
		"$tool" down --dir "$cluster" --remove >&2 || true
	fi
	if [[ -d "$tmp/before-src" ]]; then
		git -C "$root" worktree remove --force "$tmp/before-src" >&2 || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "building..." >&2
(cd "$root/kubectl-khook" &&
	CGO_ENABLED=0 "$go" build -trimpath -o "$tmp/khook-khook" . &&
	CGO_ENABLED=0 "$go" build -trimpath -ldflags '-X khook.io/core/helm.readinessWaiter=helm' -o "$tmp/khook-helm" . &&
	CGO_ENABLED=0 "$go" build -trimpath -ldflags '-X khook.io/core/helm.deletionPropagation=foreground' -o "$tmp/khook-foreground" .)
read -r -a variants <<<"${VARIANTS:-khook helm foreground}"
if [[ -n "${BEFORE:-}" ]]; then
	git -C "$root" worktree add --detach "$tmp/before-src" "$BEFORE" >&2
	(cd "$tmp/before-src/kubectl-khook" && CGO_ENABLED=0 "$go" build -trimpath -o "$tmp/khook-before" .)
	variants=(before "${variants[@]}")
elif [[ -n "${BEFORE_BIN:-}" ]]; then
	cp "$BEFORE_BIN" "$tmp/khook-before"
	variants=(before "${variants[@]}")
fi
(cd "$root" && "$go" build -o "$tool" ./dev/cmd/khook-testcluster)

echo "starting a test cluster..." >&2
started=1
"$tool" up --dir "$cluster" >/dev/null
export KUBECONFIG="$cluster/kubeconfig"

# spec NAME CHART NAMESPACE WAIT: ten helm steps of CHART in NAMESPACE.
spec() {
	local name="$1" chart="$2" ns="$3" wait="$4" f="$tmp/$1.yaml"
	{
		printf 'apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: %s}\nsteps:\n' "$name"
		for i in $(seq 0 9); do
			printf '  - name: r%d\n    helm: {chart: %s, namespace: %s, createNamespace: true, wait: %s, values: {color: c%d}}\n' \
				"$i" "$chart" "$ns" "$wait" "$i"
		done
	} >"$f"
	echo "$f"
}

# timed LABEL CMD...: runs CMD, appends its wall time (ms) to $tmp/LABEL.
timed() {
	local label="$1"
	shift
	local start end
	start=$(date +%s%N)
	if ! "$@" >"$tmp/out" 2>&1; then
		echo "$label: failed: $*" >&2
		cat "$tmp/out" >&2
		exit 1
	fi
	end=$(date +%s%N)
	echo $(((end - start) / 1000000)) >>"$tmp/$label"
	echo $((start / 1000000)) >"$tmp/start"
	echo $((end / 1000000)) >"$tmp/end"
}

# watch_ready NS: starts a watch of NS's Deployments outside khook, which
# notes when the first appears and when all ten are Current; returns once
# it watches.
watch_ready() {
	"$tool" ready --dir "$cluster" --namespace "$1" --count 10 --timeout 120s >"$tmp/ready" 2>&1 &
	ready_pid=$!
	until grep -q watching "$tmp/ready"; do
		kill -0 "$ready_pid" 2>/dev/null || { cat "$tmp/ready" >&2; exit 1; }
		sleep 0.01
	done
}

# pace_and_lag IMPL: after the timed apply, notes the cluster's pace (first
# Deployment seen to the last Current), khook's lead (the apply's start to
# the first Deployment seen) and lag (last Current to the apply's end).
pace_and_lag() {
	wait "$ready_pid"
	local first current
	first=$(awk '$1 == "first" { print $2 }' "$tmp/ready")
	current=$(awk '$1 == "current" { print $2 }' "$tmp/ready")
	echo $((first - $(cat "$tmp/start"))) >>"$tmp/$1-lead"
	echo $((current - first)) >>"$tmp/$1-pace"
	echo $(($(cat "$tmp/end") - current)) >>"$tmp/$1-lag"
}

median() { sort -n "$tmp/$1" | awk '{ t[NR] = $1 } END { printf "%.2f", t[int((NR + 1) / 2)] / 1000 }'; }

# namespace NS: creates NS and waits for its default ServiceAccount.
kubectl="$KHOOK_TESTBIN/kubectl"
namespace() {
	"$kubectl" create namespace "$1" >/dev/null
	"$kubectl" wait --for=create serviceaccount/default -n "$1" --timeout=60s >/dev/null
}

for round in $(seq "$runs"); do
	for impl in "${variants[@]}"; do
		bin="$tmp/khook-$impl"
		echo "round $round/$runs, $impl..." >&2
		for ns in "nw-$impl-$round" "w-$impl-$round" "rs-$impl-$round"; do namespace "$ns"; done
		nowait="$(spec "nowait-$impl-$round" "$charts/cmdeploy" "nw-$impl-$round" false)"
		wait="$(spec "wait-$impl-$round" "$charts/cmdeploy" "w-$impl-$round" true)"
		real="$(spec "real-$impl-$round" "$charts/platform" "rs-$impl-$round" true)"
		# the wait: true apply starts on a settled cluster: the no-wait
		# install ends before the cluster has made its Deployments Current,
		# and that work would otherwise slow the next apply
		watch_ready "nw-$impl-$round"
		timed "$impl-install" "$bin" apply -f "$nowait"
		wait "$ready_pid"
		watch_ready "w-$impl-$round"
		timed "$impl-wait" "$bin" apply -f "$wait"
		pace_and_lag "$impl"
		timed "$impl-noop" "$bin" apply -f "$wait"
		timed "$impl-destroy" "$bin" destroy --yes -f "$wait"
		"$bin" destroy --yes -f "$nowait" >/dev/null 2>&1
		if [[ "${REAL:-1}" != 0 ]]; then
			timed "$impl-real-wait" "$bin" apply -f "$real"
			timed "$impl-real-destroy" "$bin" destroy --yes -f "$real"
		fi
	done
done

echo
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); medians of $runs runs (seconds)"
printf '%-16s' ""
printf ' %12s' "${variants[@]}"
echo
metrics=(install wait lead pace lag noop destroy)
if [[ "${REAL:-1}" != 0 ]]; then metrics+=(real-wait real-destroy); fi
for m in "${metrics[@]}"; do
	printf '%-16s' "$m"
	for impl in "${variants[@]}"; do printf ' %12s' "$(median "$impl-$m")"; done
	echo
done
echo
for impl in "${variants[@]}"; do
	i="$(median "$impl-install")" w="$(median "$impl-wait")" d="$(median "$impl-destroy")" p="$(median "$impl-pace")" l="$(median "$impl-lag")"
	awk -v impl="$impl" -v i="$i" -v w="$w" -v d="$d" -v p="$p" -v l="$l" 'BEGIN {
		printf "%s: wait adds %.2f s over no wait (target < 0.10): the cluster took %.2f s from the first Deployment to the last Current, the apply ended %.2f s after; destroy / no-wait install = %.2f (target <= 1.3), destroy %.2f s\n", impl, w - i, p, l, d / i, d }'
done
