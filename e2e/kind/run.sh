#!/usr/bin/env bash
# The 2↔4 scale test on kind, for users with Docker (docs/benchmarks.md, "Scaling 2↔4 under
# load"; the same test runs in scripts/test on a one-node cluster built without Docker):
#   1. a one-node kind cluster (kind-config.yaml maps the ingress's NodePorts to localhost),
#   2. Tidegate's image from the Dockerfile and the echo backend's, loaded into kind,
#   3. `helm install` of the chart (NodePort 30080/30443), the echo Deployment (2 replicas,
#      about 1 KiB answers naming the pod) behind a TLS Ingress for `localhost`,
#   4. wrk2 -t2 -c50 -d60s -R1000 -L against https://localhost:8443/ while
#      `kubectl scale --replicas=4` / `--replicas=2` runs every 10 s,
#   5. the report: wrk2's latency distribution (to p99.999), errors and timeouts.
#
# Usage: e2e/kind/run.sh [--dry-run] [--backend graceful|abrupt] [--keep]
#   --dry-run   print every command instead of running it (needs none of the tools)
#   --backend   graceful (default: serves 5 s after SIGTERM) or abrupt (exits at once)
#   --keep      leave the kind cluster up afterwards (default: deleted)
# Needs: docker, kind, kubectl, helm, go (for the echo backend), openssl, and wrk2 (its binary is
# often installed as `wrk`; set WRK2=path to choose). Environment: RATE (1000), DURATION (60s),
# CONNECTIONS (50), SCALE_EVERY (10), OUT (output folder).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CLUSTER=tidegate-scale
NS=tidegate-scale
IMAGE=docker.io/tidegate/tidegate:test
ECHO_IMAGE=docker.io/tidegate/echo:test
RATE=${RATE:-1000}
DURATION=${DURATION:-60s}
CONNECTIONS=${CONNECTIONS:-50}
SCALE_EVERY=${SCALE_EVERY:-10}
OUT=${OUT:-$ROOT/out/kind-scale-$(date +%Y%m%d-%H%M%S)}
WRK2=${WRK2:-}

DRY=
BACKEND=graceful
KEEP=
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --backend) BACKEND=${2:?--backend needs graceful or abrupt}; shift ;;
    --keep) KEEP=1 ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
case $BACKEND in
  graceful) GRACE=5 ;;
  abrupt) GRACE=0 ;;
  *) echo "run.sh: --backend must be graceful or abrupt" >&2; exit 2 ;;
esac

# run CMD...: runs it, or with --dry-run prints it (quoted so that it can be pasted).
run() {
  if [ -n "$DRY" ]; then
    printf '+'
    printf ' %q' "$@"
    printf '\n'
  else
    "$@"
  fi
}
log() { echo "kind-scale: $*" >&2; }
kctl() { run kubectl --context "kind-$CLUSTER" "$@"; }

if [ -z "$DRY" ]; then
  for tool in docker kind kubectl helm go openssl; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is missing" >&2; exit 1; }
  done
  if [ -z "$WRK2" ]; then
    # wrk2 installs as wrk2 or as wrk; only wrk2 knows -R (a constant rate).
    for cand in wrk2 wrk; do
      if command -v "$cand" >/dev/null && "$cand" --help 2>&1 | grep -q -- '-R'; then
        WRK2=$(command -v "$cand")
        break
      fi
    done
    [ -n "$WRK2" ] || { echo "run.sh: no wrk2 (a wrk with -R); set WRK2=path" >&2; exit 1; }
  fi
else
  WRK2=${WRK2:-wrk2}
fi
run mkdir -p "$OUT"

# 1. The cluster.
if [ -z "$DRY" ] && kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  log "kind cluster $CLUSTER exists; reusing it"
else
  run kind create cluster --config "$HERE/kind-config.yaml" --wait 120s
fi
cleanup() {
  if [ -z "$KEEP" ]; then
    run kind delete cluster --name "$CLUSTER"
  fi
}
trap cleanup EXIT

# 2. Images: Tidegate's from the Dockerfile (the bases come from Docker Hub here), the echo
#    backend's from its static binary.
run docker build -t "$IMAGE" "$ROOT"
ECHO_CTX=$OUT/echo-image
run mkdir -p "$ECHO_CTX"
run env -C "$ROOT/e2e/cluster/images/echo" CGO_ENABLED=0 go build -trimpath -ldflags=-s\ -w \
  -o "$ECHO_CTX/echo" .
run docker build -t "$ECHO_IMAGE" -f "$ROOT/e2e/cluster/images/echo/Containerfile" "$ECHO_CTX"
run kind load docker-image --name "$CLUSTER" "$IMAGE" "$ECHO_IMAGE"

# 3. Tidegate by its chart, the backend, its certificate and Ingress.
kctl create namespace "$NS"
run helm --kube-context "kind-$CLUSTER" install tidegate "$ROOT/helm/tidegate" -n "$NS" \
  --set image.repository=docker.io/tidegate/tidegate --set image.tag=test \
  --set image.pullPolicy=Never --set service.type=NodePort \
  --set service.nodePorts.http=30080 --set service.nodePorts.https=30443 --wait --timeout 180s
run openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$OUT/tls.key" -out "$OUT/tls.crt" -days 2 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost
kctl -n "$NS" create secret tls echo-tls --cert "$OUT/tls.crt" --key "$OUT/tls.key"
kctl -n "$NS" apply -f "$HERE/echo.yaml"
kctl -n "$NS" set env deployment/echo "GRACE_SECONDS=$GRACE"
kctl -n "$NS" rollout status deployment/echo --timeout 120s
# The Ingress answers once the controller has pushed it.
if [ -n "$DRY" ]; then
  run curl -sf --cacert "$OUT/tls.crt" https://localhost:8443/ready-check
else
  for _ in $(seq 1 60); do
    curl -sf -o /dev/null --cacert "$OUT/tls.crt" https://localhost:8443/ready-check && break
    sleep 1
  done
fi

# 4. The load, and the scaling beside it.
log "wrk2: $RATE requests/s, $CONNECTIONS connections, $DURATION; scaling every ${SCALE_EVERY} s"
if [ -n "$DRY" ]; then
  run "$WRK2" -t2 -c"$CONNECTIONS" -d"$DURATION" -R"$RATE" -L https://localhost:8443/
  for replicas in 4 2 4 2 4 2; do
    run sleep "$SCALE_EVERY"
    kctl -n "$NS" scale deployment echo --replicas="$replicas"
  done
else
  "$WRK2" -t2 -c"$CONNECTIONS" -d"$DURATION" -R"$RATE" -L https://localhost:8443/ \
    > "$OUT/wrk2.txt" 2>&1 &
  wrk_pid=$!
  seconds=${DURATION%s}
  elapsed=0
  for replicas in 4 2 4 2 4 2; do
    sleep "$SCALE_EVERY"
    elapsed=$((elapsed + SCALE_EVERY))
    [ "$elapsed" -lt "$seconds" ] || break
    kctl -n "$NS" scale deployment echo --replicas="$replicas" >/dev/null
    log "scaled to $replicas"
  done
  wait "$wrk_pid"
fi

# 5. The report.
if [ -n "$DRY" ]; then
  run cat "$OUT/wrk2.txt"
else
  grep -E 'Latency Distribution|^ *[0-9.]+% |requests in|Socket errors|Non-2xx|Requests/sec' \
    "$OUT/wrk2.txt" || cat "$OUT/wrk2.txt"
  kctl -n "$NS" get pods -o wide
  log "full wrk2 output: $OUT/wrk2.txt ($BACKEND backend)"
fi
