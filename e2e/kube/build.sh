#!/usr/bin/env bash
# Builds a real kube-apiserver and etcd (the versions pinned in go.mod) for the e2e tests, into
# ~/.cache/tidegate/kube/<version>/ — outside the clone, so that a fresh clone on the same machine
# (CI's) reuses them. Rebuilds only when the pinned versions (go.mod/go.sum) change: the output
# folder is named after the Kubernetes version plus a hash of go.sum.
# Prints the folder holding the two binaries on stdout (progress goes to stderr).
set -euo pipefail
cd "$(dirname "$0")"

GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; else
    echo "kube/build.sh: no Go toolchain (go or /usr/local/go/bin/go)" >&2
    exit 1
  fi
fi

cache=${TIDEGATE_CACHE:-$HOME/.cache/tidegate}
version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' go.mod)
stamp=$(sha256sum go.mod go.sum | sha256sum | cut -c1-12)
out="$cache/kube/$version-$stamp"

if [ -x "$out/kube-apiserver" ] && [ -x "$out/etcd" ]; then
  echo "$out"
  exit 0
fi

# The module and build caches live beside the binaries so that they are reused too; -p 2 keeps
# the link of kube-apiserver (the peak) within memory on a 2-core machine.
export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOTOOLCHAIN=local GOFLAGS=-mod=mod
export CGO_ENABLED=0
tmp="$out.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
echo "kube/build.sh: building kube-apiserver $version and etcd into $out (first time only)" >&2
start=$SECONDS
"$GO" build -p 2 -trimpath -ldflags='-s -w' -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
"$GO" build -p 2 -trimpath -ldflags='-s -w' -o "$tmp/etcd" go.etcd.io/etcd/server/v3
echo "kube/build.sh: built in $((SECONDS - start)) s" >&2
rm -rf "$out"
mv "$tmp" "$out"
echo "$out"
