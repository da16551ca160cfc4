#!/usr/bin/env bash
# Builds the test-cluster binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok, and kubectl for the packaging tests) from the tools
# modules next to this script into
# $KHOOK_TESTBIN_OUT/bin (default: <repo>/.cache/testbin/bin).
#
# Each tools module (etcd/, k8s/, kwok/) is a module of its own, outside go.work,
# so the product modules never depend on k8s.io/kubernetes. A module is rebuilt
# only when its cache key changes: the sha256 of its go.mod, go.sum and *.go
# files, this script and the Go version. The key is stored in
# <out>/stamps/<module>.sha256 once all of the module's binaries are built.
#
# A cold build takes about 11 minutes on 2 cores (kube-apiserver alone about 6);
# a no-op run takes well under a second.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${KHOOK_TESTBIN_OUT:-$root/.cache/testbin}"
bin="$out/bin"
stamps="$out/stamps"
logs="$out/logs"
go="${GO:-go}"

# The tools modules sit below the repo's go.work but are not part of it.
export GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=readonly

k8s_version=v1.35.4
k8s_commit=7b8c6cf0edd376b3d7c2f255142977c7f93db258
k8s_date=2026-04-15T18:01:22Z # release time of the module on the proxy: keeps builds reproducible
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=35"
	k8s_ldflags+=" -X $pkg.gitCommit=$k8s_commit -X $pkg.gitTreeState=clean -X $pkg.buildDate=$k8s_date"
done

# module -> "binary:package ..." and ldflags
declare -A targets=(
	[etcd]="etcd:."
	[k8s]="kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager kube-scheduler:k8s.io/kubernetes/cmd/kube-scheduler kubectl:k8s.io/kubernetes/cmd/kubectl"
	[kwok]="kwok:sigs.k8s.io/kwok/cmd/kwok"
)
declare -A ldflags=(
	[etcd]="-s -w"
	[k8s]="$k8s_ldflags"
	[kwok]="-s -w"
)
modules=(k8s etcd kwok) # k8s first: by far the longest

key() {
	local m="$1"
	{
		"$go" version
		cat "$here/build.sh"
		(cd "$here/$m" && sha256sum go.mod go.sum $(ls ./*.go 2>/dev/null))
	} | sha256sum | cut -d' ' -f1
}

up_to_date() {
	local m="$1" t
	[[ -f "$stamps/$m.sha256" && "$(cat "$stamps/$m.sha256")" == "$(key "$m")" ]] || return 1
	for t in ${targets[$m]}; do
		[[ -x "$bin/${t%%:*}" ]] || return 1
	done
}

build() {
	local m="$1" t pkgs=() names=() tmp
	for t in ${targets[$m]}; do
		names+=("${t%%:*}")
		pkgs+=("${t#*:}")
	done
	tmp="$(mktemp -d "$out/tmp.$m.XXXXXX")"
	# go build -o <dir> with several main packages writes one binary each, named
	# after the package's last path element; a single package needs the file name.
	local dest="$tmp/"
	[[ ${#pkgs[@]} -eq 1 ]] && dest="$tmp/${names[0]}"
	(cd "$here/$m" && "$go" build -buildvcs=false -trimpath -ldflags "${ldflags[$m]}" -o "$dest" "${pkgs[@]}")
	for t in "${names[@]}"; do
		mv -f "$tmp/$t" "$bin/$t"
	done
	rmdir "$tmp"
	key "$m" >"$stamps/$m.sha256"
}

mkdir -p "$bin" "$stamps" "$logs"
todo=()
for m in "${modules[@]}"; do
	up_to_date "$m" || todo+=("$m")
done
if [[ ${#todo[@]} -eq 0 ]]; then
	echo "testbin: up to date in $bin" >&2
	exit 0
fi

echo "testbin: building ${todo[*]} into $bin (a cold build takes about 11 minutes on 2 cores; logs in $logs)" >&2
start=$SECONDS
# The modules build concurrently: compilation is CPU bound, but downloads and
# the long single-threaded link steps overlap.
declare -A mods=() # pid -> module
for m in "${todo[@]}"; do
	build "$m" >"$logs/$m.log" 2>&1 &
	mods[$!]=$m
done
trap '[[ ${#mods[@]} -eq 0 ]] || kill "${!mods[@]}" 2>/dev/null || true' INT TERM
failed=0
for _ in "${todo[@]}"; do
	pid=
	if wait -n -p pid "${!mods[@]}"; then
		echo "testbin: ${mods[$pid]} built ($((SECONDS - start)) s)" >&2
	else
		echo "testbin: building ${mods[$pid]} failed; its log, $logs/${mods[$pid]}.log:" >&2
		cat "$logs/${mods[$pid]}.log" >&2
		failed=1
	fi
	unset "mods[$pid]"
done
rm -rf "$out"/tmp.*
[[ $failed -eq 0 ]] || exit 1
echo "testbin: done in $((SECONDS - start)) s" >&2
