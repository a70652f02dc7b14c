#!/usr/bin/env bash
# Packs the conformance suite's test images for the one-node cluster, which reaches no registry:
# every image reference the suite's manifests name (images.txt of build-tools.sh) that can be made
# here becomes a one-layer image archive under that exact reference, for
# `ctr -n k8s.io images import FILE` (its RepoTags carry the full name):
#   registry.k8s.io/gateway-api/echo-basic:<every tag named>  echo-basic of the pinned suite, UID 65532
#                                                            (the upstream image's distroless nonroot)
#   registry.k8s.io/coredns/coredns:<tag>                    ./coredns (CoreDNS v1.12.2, four plugins), root:
#                                                            it binds :53 with the NET_BIND_SERVICE the
#                                                            manifest adds, as a file capability cannot be
#                                                            set by mkimage.py
# Any other reference (echo-advanced: Istio's image, mesh tests only) is reported and skipped.
# The archives are written by e2e/cluster/mkimage.py (docker-archive: manifest.json with RepoTags,
# reproducible) into <build-tools folder>/images/ under ~/.cache/tidegate/gateway/, and are
# rewritten only when the binary, mkimage.py or this script change.
# Prints one line per archive on stdout: `NAME PATH` (as e2e/cluster/images/build); the rest
# goes to stderr.
#
# Usage: images.sh [BUILD_TOOLS_FOLDER]   (default: what build-tools.sh prints, built if needed)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkimage=$root/e2e/cluster/mkimage.py
python=${PYTHON:-python3}

log() { echo "gateway/images.sh: $*" >&2; }

case ${1:-} in
  -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
esac
out=${1:-$("$here/build-tools.sh")}
[ -f "$out/images.txt" ] || { log "$out is not a build-tools.sh folder (no images.txt)"; exit 1; }
[ -f "$mkimage" ] || { log "missing $mkimage"; exit 1; }
mkdir -p "$out/images"

while read -r ref; do
  [ -n "$ref" ] || continue
  case $ref in
    registry.k8s.io/gateway-api/echo-basic:*) bin=echo-basic user=65532:65532 ;;
    registry.k8s.io/coredns/coredns:*) bin=coredns user= ;;
    *)
      log "$ref: not made here (not built from the pinned modules; only the mesh manifests use it)"
      continue
      ;;
  esac
  [ -x "$out/$bin" ] || { log "missing $out/$bin (run build-tools.sh)"; exit 1; }
  tar=$out/images/$(echo "$ref" | tr '/:' '__').tar
  key=$( (echo "$ref $bin $user"; sha256sum "$out/$bin" "$mkimage" "$0" | cut -d' ' -f1) | sha256sum | cut -c1-16)
  if [ ! -f "$tar" ] || [ "$(cat "$tar.key" 2>/dev/null)" != "$key" ]; then
    rm -f "$tar" "$tar.key"
    args=(--name "$ref" --add "$out/$bin:/$bin" --entrypoint "/$bin" --out "$tar")
    if [ -n "$user" ]; then args+=(--user "$user"); fi
    "$python" "$mkimage" "${args[@]}"
    echo "$key" > "$tar.key"
    log "$ref: wrote $tar ($(du -m "$tar" | cut -f1) MB)"
  fi
  echo "$ref $tar"
done < "$out/images.txt"
