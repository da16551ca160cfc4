#!/usr/bin/env bash
# build-tofu.sh VERSION OUT: build OpenTofu's CLI of VERSION (v1.12.6) from
# its Go module into OUT. The module is copied out of the read-only module
# cache and built there with its own go.mod (GOWORK=off, -mod=mod).
set -euo pipefail
version=$1 out=$2
GO=${GO:-go}
dir=$(GOWORK=off GOFLAGS=-mod=mod "$GO" mod download -json "github.com/opentofu/opentofu@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] || { echo "build-tofu: no module directory for opentofu $version" >&2; exit 1; }
src=$(mktemp -d)
trap 'chmod -R u+w "$src"; rm -rf "$src"' EXIT
cp -r "$dir"/. "$src"/
chmod -R u+w "$src"
mkdir -p "$(dirname "$out")"
(cd "$src" && GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 "$GO" build -trimpath -ldflags '-s -w' -o "$out.tmp" ./cmd/tofu)
mv "$out.tmp" "$out"
