#!/bin/sh
# The install and update hook of `helm khook` on Linux and macOS (plugin.yaml
# runs it as `sh $HELM_PLUGIN_DIR/scripts/install-plugin.sh`). It puts the
# helm-khook binary for this os/arch at $HELM_PLUGIN_DIR/bin/helm-khook:
#
# - a binary already there is kept: `make build` put it there (installing
#   from a working tree), or it came in the release archive the plugin was
#   installed from. Nothing is downloaded.
# - otherwise it downloads the release archive named by plugin.yaml's
#   version from $KHOOK_RELEASE_URL/v<version>/, checks its sha256 against
#   that release's checksums.txt and unpacks the binary.
#
# A binary this script downloaded is replaced when plugin.yaml names another
# version (helm plugin update). KHOOK_FORCE_DOWNLOAD=1 replaces any binary.
# See docs/plugins.md.
set -eu

# Where releases are published: <base>/v<version>/<archive>. hack/dist.mk's
# RELEASE_URL has the same default (a test checks that they agree).
release_url=${KHOOK_RELEASE_URL:-https://github.com/khook-io/khook/releases/download}

die() {
	echo "helm khook: $*" >&2
	exit 1
}

dir=${HELM_PLUGIN_DIR:-$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)}
bin="$dir/bin/helm-khook"
marker="$dir/bin/.downloaded-version"

version=$(sed -n 's/^version:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}[[:space:]]*$/\1/p' "$dir/plugin.yaml" | head -n 1)
[ -n "$version" ] || die "no version: line in $dir/plugin.yaml"

if [ -x "$bin" ] && [ "${KHOOK_FORCE_DOWNLOAD:-}" != 1 ]; then
	if [ ! -f "$marker" ]; then
		echo "helm khook: using $bin (not downloaded)"
		exit 0
	fi
	if [ "$(cat "$marker")" = "v$version" ]; then
		echo "helm khook: using $bin (v$version)"
		exit 0
	fi
fi

case $(uname -s) in
Linux) os=linux ;;
Darwin) os=darwin ;;
*) die "unsupported OS $(uname -s): download a release archive by hand (docs/plugins.md)" ;;
esac
case $(uname -m) in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) die "unsupported CPU $(uname -m): khook ships amd64 and arm64" ;;
esac

archive="helm-khook_v${version}_${os}_${arch}.tar.gz"
base="${release_url%/}/v$version"

fetch() { # url file
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL --retry 3 -o "$2" "$1"
	elif command -v wget >/dev/null 2>&1; then
		wget -q -O "$2" "$1"
	else
		die "neither curl nor wget is installed"
	fi
}

sha256() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$1" | cut -d' ' -f1
	elif command -v shasum >/dev/null 2>&1; then
		shasum -a 256 "$1" | cut -d' ' -f1
	else
		die "neither sha256sum nor shasum is installed"
	fi
}

tmp=$(mktemp -d 2>/dev/null || mktemp -d -t khook)
trap 'rm -rf "$tmp"' EXIT INT TERM

echo "helm khook: downloading $base/$archive"
fetch "$base/$archive" "$tmp/$archive" || die "download of $base/$archive failed (offline? build it: make build, then install from the working tree; or set KHOOK_RELEASE_URL)"
fetch "$base/checksums.txt" "$tmp/checksums.txt" || die "download of $base/checksums.txt failed"
want=$(awk -v f="$archive" '$2 == f || $2 == "*" f { print $1 }' "$tmp/checksums.txt")
[ -n "$want" ] || die "$archive is not in $base/checksums.txt"
got=$(sha256 "$tmp/$archive")
[ "$got" = "$want" ] || die "$archive: sha256 $got, checksums.txt says $want"

mkdir -p "$tmp/x" "$dir/bin"
tar -xzf "$tmp/$archive" -C "$tmp/x"
[ -f "$tmp/x/bin/helm-khook" ] || die "$archive has no bin/helm-khook"
cp "$tmp/x/bin/helm-khook" "$bin.tmp"
chmod 0755 "$bin.tmp"
mv -f "$bin.tmp" "$bin"
echo "v$version" >"$marker"
echo "helm khook: installed $bin (v$version, $os/$arch)"
