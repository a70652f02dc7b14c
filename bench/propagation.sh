#!/usr/bin/env bash
# Propagation benchmark against a real kube-apiserver (e2e/kube/build.sh): N Ingresses (one host
# and path each, with their Services and EndpointSlices), then EndpointSlice updates that move a
# host from backend A to B, timed from the API write to the data plane answering from the new
# endpoint (p50, p99):
#  - CHANGES isolated changes, GAP_MS apart (a quiet period before each write), then CHANGES
#    back-to-back (each written as soon as the previous one is served). Each is split into the
#    PUT's own round trip (API server and etcd's commit), PUT answered -> serving, and from the
#    controller's debug log: PUT answered -> watch event read, decoding, batching wait, build,
#    push -> ACK, ACK -> probe.
#  - BURSTS bursts of BURST changes written within BURST_WINDOW_MS over WRITERS connections: the
#    time until all of them are served.
# Writes use persistent HTTPS connections (no TLS handshake in the timing); the probe is one
# keep-alive connection through the data plane, requests back to back (its round trip is
# printed: the resolution). Then the controller's and data plane's memory (RSS), and the same N
# hosts as an nginx configuration: the time from `nginx -s reload` to the new configuration
# serving. etcd runs with --unsafe-no-fsync (e2e/kube/kubecluster.py), its data under /tmp.
# Runs in a private network namespace (see e2e/kube/kubecluster.py); needs root.
#
# Start-up (before the changes): the data plane and the controller are started together, as a new
# replica's pod starts, and timed until the last of the N hosts is served (polled every 10 ms on
# new connections), with the CPU time each process used until then, the phases of the start from
# both logs (lists and their decoding per kind, the first translation, encoding the first
# snapshot, the data plane's decoding and build)
# and the peak RSS of the two processes during the start (sampled every 10 ms, and VmHWM); then
# nginx is started cold with the same N server blocks and timed the same way. STARTS of each.
#
# Environment: N (10000), CHANGES (200; 0 skips the changes and bursts: start-up only),
# RELOADS (5; 0 skips them), STARTS (1), GAP_MS (50), BURST (50), BURST_WINDOW_MS (100),
# BURSTS (5), WRITERS (8), TIDEGATE_BIN_DIR (build/bin), COMPARE_BIN_DIR (other builds' bin
# folders, ':' between them, measured after the first against the same API server: a
# before/after in one run), CACHE (1: etcd's data with the N objects is kept in
# ~/.cache/tidegate/propagation/ (PROPAGATION_CACHE) after the first run at that N and reused by
# the next ones; 0: created afresh, nothing kept). The Services are headless (no ClusterIP to
# allocate): the slices' endpoints are what the data plane sends to either way.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TIDEGATE_BIN_DIR:-$PWD/build/bin}
if [ ! -x "$BIN/tidegate-dataplane" ] || [ ! -x "$BIN/tidegate-controller" ]; then
  scripts/install-deps
  scripts/build --target tidegate-dataplane tidegate-controller
fi
e2e/kube/build.sh >/dev/null
TIDEGATE_BIN_DIR=$BIN exec python3 bench/propagation.py
