#!/usr/bin/env bash
# The 2↔4 scale test at benchmark size (docs/benchmarks.md, "Scaling 2↔4 under load"): the
# experiment of e2e/cluster/test_scale.py with 10,000 hosts in both Tidegate's and the
# reload-based nginx's configuration (where a reload costs seconds), on the one-node cluster
# (brought up if it is not, left up afterwards; e2e/cluster/down takes it down).
# Prints the table; the run's folder keeps each run's summary and latencies, report.md and the
# latency-percentile plot latency.svg.
#
# Environment: HOSTS (10000), SECONDS_PER_RUN (60), OUT (default /tmp/tidegate-scale-<time>).
# Needs root (the cluster), scripts/install-deps and the cluster's images
# (e2e/cluster/images/build, which this runs; cached).
set -euo pipefail
cd "$(dirname "$0")/.."

HOSTS=${HOSTS:-10000}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-60}
OUT=${OUT:-/tmp/tidegate-scale-$(date +%Y%m%d-%H%M%S)}

e2e/cluster/images/build >/dev/null
exec python3 e2e/cluster/scale.py --hosts "$HOSTS" --seconds "$SECONDS_PER_RUN" --out "$OUT"
