#!/usr/bin/env bash
# Builds bench/grpc-backend (Go standard library only) into ~/.cache/tidegate/bench/, named by a
# hash of its sources, so that later runs and fresh clones on this machine reuse it. Prints the
# folder holding the binary.
set -euo pipefail
cd "$(dirname "$0")"
GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; else
    echo "grpc-backend/build.sh: no Go toolchain (go or /usr/local/go/bin/go)" >&2
    exit 1
  fi
fi
cache=${TIDEGATE_CACHE:-$HOME/.cache/tidegate}
stamp=$(sha256sum go.mod main.go build.sh | sha256sum | cut -c1-12)
out="$cache/bench/grpc-backend-$stamp"
if [ ! -x "$out/grpc-backend" ]; then
  mkdir -p "$out"
  GOCACHE="$cache/go/build" GOMODCACHE="$cache/go/mod" GOTOOLCHAIN=local CGO_ENABLED=0 \
    "$GO" build -o "$out/grpc-backend.tmp" . >&2
  mv "$out/grpc-backend.tmp" "$out/grpc-backend"
fi
echo "$out"
