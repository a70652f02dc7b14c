#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3, the version pinned in go.mod) for the chart tests, into
# ~/.cache/tidegate/chart/<version>-<hash>/ — outside the clone, so that a fresh clone on the same
# machine (CI's) reuses it. Rebuilds only when the pins (go.mod/go.sum) change: the output folder is
# named after helm's version plus a hash of go.mod, go.sum and this script. Same pattern as e2e/kube/build.sh.
# Prints the folder holding the binary on stdout (progress goes to stderr).
set -euo pipefail
cd "$(dirname "$0")"

GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; else
    echo "chart/build-tools.sh: no Go toolchain (go or /usr/local/go/bin/go)" >&2
    exit 1
  fi
fi

cache=${TIDEGATE_CACHE:-$HOME/.cache/tidegate}
version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" {print $3; exit}
               $1 == "helm.sh/helm/v3" && $2 ~ /^v/ {print $2; exit}' go.mod)
# The script is in the stamp too: its ldflags are part of what is built.
stamp=$(sha256sum go.mod go.sum build-tools.sh | sha256sum | cut -c1-12)
out="$cache/chart/helm-$version-$stamp"

if [ -x "$out/helm" ]; then
  echo "$out"
  exit 0
fi

# The module and build caches are e2e/kube/build.sh's, so that shared modules (k8s.io/...) are
# downloaded and compiled once.
export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOTOOLCHAIN=local GOFLAGS=-mod=mod
export CGO_ENABLED=0
tmp="$out.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
echo "chart/build-tools.sh: building helm $version into $out (first time only)" >&2
start=$SECONDS
# What helm's own Makefile passes with -X: its version, and the Kubernetes version that
# `helm template` and `helm lint` assume (client-go v0.M.m -> 1.m). Without them `helm template`
# pretends to talk to Kubernetes 1.20 and refuses our chart's kubeVersion.
client_go=$(awk '$1 == "k8s.io/client-go" && $2 ~ /^v0\./ {print $2; exit}' go.mod)
kminor=$(echo "$client_go" | cut -d. -f2)
ld="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ld="$ld -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kminor"
done
"$GO" build -p 2 -trimpath -ldflags="$ld" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm
echo "chart/build-tools.sh: built in $((SECONDS - start)) s" >&2
"$tmp/helm" version --short >&2
rm -rf "$out"
mv "$tmp" "$out"
echo "$out"
