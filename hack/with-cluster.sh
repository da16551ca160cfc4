#!/usr/bin/env bash
# Usage: hack/with-cluster.sh <command...>
#
# Starts a fresh khook test cluster in a directory of its own
# (.cache/clusters/run-XXXXXX), runs <command...> with KHOOK_TEST_CLUSTER
# (the cluster directory) and KUBECONFIG (its admin kubeconfig) exported, then
# ALWAYS stops the cluster, also when the command fails or on Ctrl-C, and
# exits with the command's exit code. On success the directory is removed;
# otherwise the component logs stay there and their path is printed.
#
# The binaries must be built (make testbin). Env: GO (go command), KHOOK_TESTBIN.
set -euo pipefail

if [[ $# -eq 0 ]]; then
	echo "usage: $0 <command...>" >&2
	exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
go="${GO:-go}"
tool="$root/.cache/testbin/khook-testcluster"

# The starter is a small Go program of the dev module (client-go): a warm
# rebuild is about a second. -race as in hack/cluster.mk: it shares the
# compiled packages with `go test -race`.
(cd "$root" && "$go" build -race -o "$tool" ./dev/cmd/khook-testcluster)

mkdir -p "$root/.cache/clusters"
dir="$(mktemp -d "$root/.cache/clusters/run-XXXXXX")"

rc=1
stopped=0
stop_cluster() {
	[[ $stopped -eq 1 ]] && return
	stopped=1
	if [[ $rc -eq 0 ]]; then
		"$tool" down --dir "$dir" --remove >&2 || rc=1
	else
		"$tool" down --dir "$dir" >&2 || true
		echo "with-cluster: exit code $rc; component logs of the cluster: $dir/logs" >&2
	fi
}
# EXIT covers normal ends and errors; INT/TERM set the code, and exiting
# runs the EXIT trap.
trap 'stop_cluster; exit $rc' EXIT
trap 'rc=130; exit 130' INT
trap 'rc=143; exit 143' TERM

"$tool" up --dir "$dir" >/dev/null

set +e
KHOOK_TEST_CLUSTER="$dir" KUBECONFIG="$dir/kubeconfig" "$@"
rc=$?
set -e
