#!/usr/bin/env bash
# Usage: hack/integration-tests.sh <go test flags...> -- <package patterns...>
#
# Runs `go test <flags> -tags ...` on the integration tests only: the Test,
# Fuzz and Example functions defined in files whose build constraint is
# `//go:build integration`, in the packages that have such files. The
# untagged tests ran in `make test-unit` already; under -tags integration
# they would run a second time (issue 23). The flags must include -tags with
# `integration`.
#
# One `go test` runs the packages (-p keeps both cores busy) with one -run
# pattern, the names of their integration tests. When an integration test
# and an untagged test of another selected package share a name, that
# package runs in a second `go test` (the pattern would run its untagged
# test again). A `//go:build` line mentioning `integration` other than
# `integration` or `!integration` is refused: this script would not know
# which phase its tests belong to.
#
# Env: GO (go command). `-n` as the first argument prints the command
# instead of running it.
set -euo pipefail

go="${GO:-go}"
dry=0
if [[ ${1:-} == -n ]]; then
	dry=1
	shift
fi
flags=()
while [[ $# -gt 0 && $1 != -- ]]; do
	flags+=("$1")
	shift
done
if [[ $# -lt 2 ]]; then
	echo "usage: $0 [-n] <go test flags...> -- <package patterns...>" >&2
	exit 2
fi
shift

pkgs=()
declare -A integ=() unit=()
while read -r path dir; do
	for f in "$dir"/*_test.go; do
		[[ -e $f ]] || continue
		tag="$(sed -n 's/^\/\/go:build[[:space:]]*//p;T;q' "$f")"
		case "$tag" in
		integration) kind=integ ;;
		'!integration') continue ;;
		*integration*)
			echo "$0: $f: build constraint '$tag': neither 'integration' nor '!integration'" >&2
			exit 2
			;;
		*) kind=unit ;;
		esac
		names="$(sed -n 's/^func \(\(Test\|Fuzz\|Example\)[A-Za-z0-9_]*\)(.*/\1/p' "$f" | grep -vx TestMain || true)"
		if [[ $kind == integ ]]; then
			integ[$path]="${integ[$path]:-} $names"
		else
			unit[$path]="${unit[$path]:-} $names"
		fi
	done
	[[ -n ${integ[$path]:-} ]] && pkgs+=("$path")
done < <("$go" list -e -f '{{.ImportPath}} {{.Dir}}' "$@")

if [[ ${#pkgs[@]} -eq 0 ]]; then
	echo "$0: no integration test files in $*" >&2
	exit 2
fi

# Packages go into one `go test` as long as none of their unit tests bears
# the name of an integration test of the group; a package that would clash
# waits for the next group (today: one group, or two when an integration
# test and a unit test of another package share a name).
rc=0
remaining=("${pkgs[@]}")
while [[ ${#remaining[@]} -gt 0 ]]; do
	declare -A gi=() gu=()
	group=() rest=()
	for p in "${remaining[@]}"; do
		ok=1
		for n in ${integ[$p]}; do [[ -n ${gu[$n]:-} ]] && ok=0; done
		for n in ${unit[$p]:-}; do [[ -n ${gi[$n]:-} ]] && ok=0; done
		if [[ $ok -eq 0 ]]; then
			rest+=("$p")
			continue
		fi
		group+=("$p")
		for n in ${integ[$p]}; do gi[$n]=1; done
		for n in ${unit[$p]:-}; do gu[$n]=1; done
	done
	pattern="^($(printf '%s\n' "${!gi[@]}" | sort | paste -sd '|'))\$"
	cmd=("$go" test "${flags[@]}" -run "$pattern" "${group[@]}")
	if [[ $dry -eq 1 ]]; then
		printf '%q ' "${cmd[@]}"
		echo
	else
		"${cmd[@]}" || rc=$?
	fi
	unset gi gu
	remaining=("${rest[@]+"${rest[@]}"}")
done
exit $rc
