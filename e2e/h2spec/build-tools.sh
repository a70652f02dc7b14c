#!/usr/bin/env bash
# Builds h2spec (github.com/summerwind/h2spec, the version pinned in go.mod) for the HTTP/2 tests, into
# ~/.cache/tidegate/h2spec/<version>-<hash>/ — outside the clone, so that a fresh clone on the same
# machine (CI's) reuses it. Rebuilds only when the pins (go.mod/go.sum) change: the output folder is
# named after h2spec's version plus a hash of go.mod, go.sum and this script. Same pattern as e2e/chart/build-tools.sh.
# Prints the folder holding the binary on stdout (progress goes to stderr).
set -euo pipefail
cd "$(dirname "$0")"

GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; else
    echo "h2spec/build-tools.sh: no Go toolchain (go or /usr/local/go/bin/go)" >&2
    exit 1
  fi
fi

cache=${TIDEGATE_CACHE:-$HOME/.cache/tidegate}
version=$(awk '$1 == "require" && $2 == "github.com/summerwind/h2spec" {print $3; exit}' go.mod)
stamp=$(sha256sum go.mod go.sum build-tools.sh | sha256sum | cut -c1-12)
out="$cache/h2spec/h2spec-$version-$stamp"

if [ -x "$out/h2spec" ]; then
  echo "$out"
  exit 0
fi

export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOTOOLCHAIN=local GOFLAGS=-mod=mod
export CGO_ENABLED=0
tmp="$out.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
echo "h2spec/build-tools.sh: building h2spec $version into $out (first time only)" >&2
# A fetch from the module proxy can fail for a moment: up to three tries, each error printed.
for try in 1 2 3; do
  if "$GO" build -p 2 -trimpath -ldflags="-s -w" -o "$tmp/h2spec" github.com/summerwind/h2spec/cmd/h2spec; then
    break
  fi
  if [ "$try" -eq 3 ]; then
    echo "h2spec/build-tools.sh: go build failed three times (errors above)" >&2
    exit 1
  fi
  echo "h2spec/build-tools.sh: go build failed (try $try), trying again in 5 s" >&2
  sleep 5
done
rm -rf "$out"
mv "$tmp" "$out"
echo "$out"
