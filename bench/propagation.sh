#!/usr/bin/env bash
# Propagation benchmark against a real kube-apiserver (e2e/kube/build.sh): N Ingresses (one host
# and path each, with their Services and EndpointSlices), then CHANGES EndpointSlice updates; for
# each, the time from the API write to the data plane answering from the new endpoint (p50, p99),
# plus the controller's and data plane's memory (RSS). Then the same N hosts as an nginx
# configuration: the time from `nginx -s reload` to the new configuration serving.
# Runs in a private network namespace (see e2e/kube/kubecluster.py); needs root.
#
# Environment: N (10000), CHANGES (200), RELOADS (5), TIDEGATE_BIN_DIR (build/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TIDEGATE_BIN_DIR:-$PWD/build/bin}
if [ ! -x "$BIN/tidegate-dataplane" ] || [ ! -x "$BIN/tidegate-controller" ]; then
  scripts/install-deps
  scripts/build --target tidegate-dataplane tidegate-controller
fi
e2e/kube/build.sh >/dev/null
TIDEGATE_BIN_DIR=$BIN exec python3 bench/propagation.py
