#!/usr/bin/env bash
# Builds the Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance, the version
# pinned in go.mod; standard channel) and what it needs on a cluster without a registry, into
# ~/.cache/tidegate/gateway/<version>-<hash>/ — outside the clone, so that a fresh clone on the
# same machine (CI's) reuses it:
#   conformance.test       `go test -c` of sigs.k8s.io/gateway-api/conformance (TestConformance in
#                          conformance_test.go; flags: `conformance.test -help`, docs/gateway-conformance.md)
#   crd/standard/*.yaml    config/crd/standard of sigs.k8s.io/gateway-api (same version)
#   standard-install.yaml  those files joined in the order of the release's standard-install.yaml
#   gatewayclass.yaml      the GatewayClass `tidegate` (a copy of ./gatewayclass.yaml)
#   echo-basic             the suite's test server (conformance/echo-basic), static, as its Dockerfile builds it
#   coredns                CoreDNS v1.12.2 with the plugins of the base manifests' Corefile (./coredns), static
#   manifests/             the suite's own manifests (base, tests, mesh) as embedded in the test binary
#   images.txt             every image reference those manifests name, one per line
# Rebuilds only when the pins change: the folder is named after the suite's version plus a hash of
# go.mod, go.sum, tools.go, coredns/ and this script. images.sh packs the binaries as images.
# Prints the output folder on stdout (progress goes to stderr). Same pattern as e2e/h2spec/build-tools.sh.
set -euo pipefail
cd "$(dirname "$0")"

GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; else
    echo "gateway/build-tools.sh: no Go toolchain (go or /usr/local/go/bin/go)" >&2
    exit 1
  fi
fi

log() { echo "gateway/build-tools.sh: $*" >&2; }

cache=${TIDEGATE_CACHE:-$HOME/.cache/tidegate}
# The version of a module in go.mod, in a require block or on a require line of its own.
modversion() {
  awk -v m="$1" '($1 == m && $2 ~ /^v/) {print $2; exit}
                 ($1 == "require" && $2 == m) {print $3; exit}' go.mod
}
version=$(modversion sigs.k8s.io/gateway-api/conformance)
api_version=$(modversion sigs.k8s.io/gateway-api)
if [ -z "$version" ] || [ "$version" != "$api_version" ]; then
  # The suite refuses CRDs whose bundle-version differs from its own (consts.BundleVersion).
  log "go.mod must pin sigs.k8s.io/gateway-api and sigs.k8s.io/gateway-api/conformance to one version (found '$api_version' and '$version')"
  exit 1
fi
stamp=$(sha256sum go.mod go.sum tools.go gatewayclass.yaml build-tools.sh coredns/go.mod coredns/go.sum coredns/main.go |
  sha256sum | cut -c1-12)
out="$cache/gateway/$version-$stamp"

if [ -x "$out/conformance.test" ]; then
  echo "$out"
  exit 0
fi

# The module and build caches are the other Go tools' (e2e/kube/build.sh, e2e/h2spec), so that
# shared modules (k8s.io/..., golang.org/x/...) are downloaded and compiled once. -mod=readonly:
# the pins in go.mod/go.sum are used as they are, never rewritten by a build.
export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOTOOLCHAIN=local GOFLAGS=-mod=readonly
export CGO_ENABLED=0
tmp="$out.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
log "building the Gateway API conformance suite $version into $out (first time only)"
start=$SECONDS

# A fetch from the module proxy can fail for a moment: up to three tries, each error printed.
go3() {  # what -- go arguments...
  local what=$1 try t0=$SECONDS
  shift 2
  for try in 1 2 3; do
    if "$GO" "$@"; then
      log "$what: $((SECONDS - t0)) s"
      return 0
    fi
    if [ "$try" -eq 3 ]; then
      log "$what: go $1 failed three times (errors above)"
      exit 1
    fi
    log "$what: go $1 failed (try $try), trying again in 5 s"
    sleep 5
  done
}

# The suite's test binary. Without -test.timeout a test binary has no deadline of its own.
go3 conformance.test -- test -c -p 2 -trimpath -ldflags="-s -w" -o "$tmp/conformance.test" \
  sigs.k8s.io/gateway-api/conformance
# echo-basic with the flags of the suite's docker/Dockerfile.echo-basic (CGO_ENABLED=0: static).
go3 echo-basic -- build -p 2 -trimpath -ldflags="-buildid= -s -w" -o "$tmp/echo-basic" \
  sigs.k8s.io/gateway-api/conformance/echo-basic
# CoreDNS is a module of its own (coredns/go.mod), so that its pins never move the suite's.
(cd coredns && go3 coredns -- build -p 2 -trimpath -ldflags="-s -w" -o "$tmp/coredns" .)

moddir() { "$GO" list -m -f '{{.Dir}}' "$1"; }
go3 "module sources" -- mod download sigs.k8s.io/gateway-api sigs.k8s.io/gateway-api/conformance
api_dir=$(moddir sigs.k8s.io/gateway-api)
suite_dir=$(moddir sigs.k8s.io/gateway-api/conformance)

# The standard channel's CRDs (and the ValidatingAdmissionPolicy the release ships with them),
# joined as the module's hack/build-install-yaml.sh joins release/standard-install.yaml.
mkdir -p "$tmp/crd/standard"
install -m 0644 "$api_dir"/config/crd/standard/*.yaml "$tmp/crd/standard/"
{
  echo "# Gateway API Standard channel install: sigs.k8s.io/gateway-api $version, config/crd/standard"
  echo "# (joined by e2e/gateway/build-tools.sh as hack/build-install-yaml.sh joins the release's file)"
  for f in "$tmp"/crd/standard/gateway*.yaml; do
    printf -- '---\n#\n# config/crd/standard/%s\n#\n' "$(basename "$f")"
    cat "$f"
  done
} > "$tmp/standard-install.yaml"
# Every object must carry this version: the suite compares it with its own.
bad=$(grep -L "gateway.networking.k8s.io/bundle-version: $version" "$tmp"/crd/standard/*.yaml || true)
if [ -n "$bad" ]; then
  log "CRDs without bundle-version $version: $bad"
  exit 1
fi
install -m 0644 gatewayclass.yaml "$tmp/gatewayclass.yaml"

# The manifests the suite applies (embedded in conformance.test: base/, tests/, mesh/), and the
# images they name: images.sh builds the ones that come from this module (and CoreDNS).
mkdir -p "$tmp/manifests"
cp -r "$suite_dir/base" "$suite_dir/tests" "$suite_dir/mesh" "$tmp/manifests/"
find "$tmp/manifests" -name '*.go' -delete
chmod -R u+w "$tmp/manifests"
grep -rhoE '^[[:space:]]*image:[[:space:]]*[^[:space:]]+' "$tmp/manifests" |
  sed -E 's/^[[:space:]]*image:[[:space:]]*//; s/^"//; s/"$//' | sort -u > "$tmp/images.txt"

# The binary runs (its flags and its single test entry), without a cluster.
if ! "$tmp/conformance.test" -test.list '.*' | grep -qx TestConformance; then
  log "conformance.test does not list TestConformance"
  exit 1
fi
log "built in $((SECONDS - start)) s: conformance.test $(du -m "$tmp/conformance.test" | cut -f1) MB," \
  "echo-basic $(du -m "$tmp/echo-basic" | cut -f1) MB, coredns $(du -m "$tmp/coredns" | cut -f1) MB," \
  "$(find "$tmp/crd/standard" -name '*.yaml' | wc -l) CRD files, $(wc -l < "$tmp/images.txt") image references"
rm -rf "$out"
mv "$tmp" "$out"
echo "$out"
