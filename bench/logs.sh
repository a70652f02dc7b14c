#!/usr/bin/env bash
# Access log benchmark: lines per second one thread can log with the shipper on, to a local
# collector that reads (issue #6; target at least 200,000 lines/s per core). Runs
# tidegate-bench-logs once per format: one producer thread formats a typical line (~355 bytes of
# JSON, or ~290 bytes of the default text template) and queues it (the exact call a worker makes
# per request); the writer thread ships 64 KiB frames over a Unix socket to a collector thread
# that reads and counts lines. Prints the producer's offered rate, the delivered rate and the
# drops. There is no peer to compare with: the figures are absolute, and the formats are
# compared with each other in the same run.
#
# Environment: SECONDS_RUN (default 2), QUEUE_BYTES (per-worker queue, default 1048576),
# FORMATS (default "json text"), TIDEGATE_BIN_DIR (default build/bin). The three threads (producer, writer, collector) share
# whatever CPUs the machine has; on the 2-core development machine that is less than a core
# each, so the figure is a lower bound.
# Needs: scripts/build done (or it builds the tidegate-bench-logs target).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SECONDS_RUN=${SECONDS_RUN:-2}
QUEUE_BYTES=${QUEUE_BYTES:-1048576}
FORMATS=${FORMATS:-json text}
BIN=${TIDEGATE_BIN_DIR:-$ROOT/build/bin}

if [ ! -x "$BIN/tidegate-bench-logs" ]; then
  scripts/install-deps
  BUILD_DIR=${BUILD_DIR:-build} scripts/build --target tidegate-bench-logs
fi

echo "bench/logs.sh: $SECONDS_RUN s, queue $QUEUE_BYTES bytes, $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
for format in $FORMATS; do
  echo
  "$BIN/tidegate-bench-logs" --seconds "$SECONDS_RUN" --queue-bytes "$QUEUE_BYTES" --format "$format"
done
