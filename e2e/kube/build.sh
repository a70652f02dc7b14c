#!/usr/bin/env bash
# Builds real Kubernetes programs (the versions pinned in go.mod) for the e2e tests, into
# ~/.cache/tidegate/kube/<version>-<hash>/ — outside the clone, so that a fresh clone on the same
# machine (CI's) reuses them. Rebuilds only what is missing for the pinned versions (go.mod/go.sum):
# the output folder is named after the Kubernetes version plus a hash of go.mod, go.sum and this
# script's build flags.
#
#   build.sh            kube-apiserver and etcd (the apiserver-only harness of e2e/kube)
#   build.sh --cluster  also kube-controller-manager, kube-scheduler, kubelet, kube-proxy and
#                       kubectl (the one-node cluster of e2e/cluster)
#
# Prints the folder holding the binaries on stdout (progress goes to stderr).
#
# Why Kubernetes 1.36.x and no newer: Debian 12's containerd is 1.6, which lacks the CRI
# RuntimeConfig call. Kubelet 1.36 then falls back to its own cgroupDriver setting; newer kubelets
# drop that fallback and need containerd 2 (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")"

GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; else
    echo "kube/build.sh: no Go toolchain (go or /usr/local/go/bin/go)" >&2
    exit 1
  fi
fi

programs=(kube-apiserver etcd)
if [ "${1:-}" = "--cluster" ]; then
  programs+=(kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
fi

cache=${TIDEGATE_CACHE:-$HOME/.cache/tidegate}
version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' go.mod)
major=${version#v}
major=${major%%.*}
minor=${version#v*.}
minor=${minor%%.*}
# Without these every program reports v0.0.0-master, which kubectl and the kubelet then compare.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=$major"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$version"
stamp=$( (cat go.mod go.sum; echo "$ldflags") | sha256sum | cut -c1-12)
out="$cache/kube/$version-$stamp"

missing=()
for p in "${programs[@]}"; do
  [ -x "$out/$p" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "$out"
  exit 0
fi

# The module and build caches live beside the binaries so that they are reused too; -p 2 keeps
# the link of kube-apiserver (the peak) within memory on a 2-core machine.
export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOTOOLCHAIN=local GOFLAGS=-mod=mod
export CGO_ENABLED=0
mkdir -p "$out"
trap 'rm -f "$out"/.*.tmp.$$' EXIT
echo "kube/build.sh: building ${missing[*]} ($version) into $out" >&2
start=$SECONDS
for p in "${missing[@]}"; do
  case $p in
    etcd) pkg=go.etcd.io/etcd/server/v3 ;;
    *) pkg=k8s.io/kubernetes/cmd/$p ;;
  esac
  t=$SECONDS
  # Each program is written under a temporary name and renamed, so that an interrupted build
  # never leaves a truncated binary that a later run would take as built.
  "$GO" build -p 2 -trimpath -ldflags="$ldflags" -o "$out/.$p.tmp.$$" "$pkg"
  mv "$out/.$p.tmp.$$" "$out/$p"
  echo "kube/build.sh: $p built in $((SECONDS - t)) s" >&2
done
echo "kube/build.sh: built in $((SECONDS - start)) s" >&2
echo "$out"
