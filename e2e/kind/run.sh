#!/usr/bin/env bash
# The 2↔4 scale test on kind, for users with Docker (docs/benchmarks.md, "Scaling 2↔4 under
# load"; the same test runs in scripts/test on a one-node cluster built without Docker):
#   1. a one-node kind cluster (kind-config.yaml maps the ingress's NodePorts to localhost),
#      reused if it exists,
#   2. Tidegate's image from the Dockerfile and the echo backend's (a static Linux binary),
#      both for the node's architecture, loaded into kind,
#   3. the chart (NodePort 30080/30443), the echo Deployment (2 replicas, about 1 KiB answers
#      naming the pod) behind a TLS Ingress for `localhost`,
#   4. for each backend — graceful (serves 5 s after SIGTERM) and abrupt (exits at once) —
#      wrk2 -t2 -c50 -d60s -R1000 -L against https://localhost:8443/ in the background while
#      `kubectl scale --replicas=4` / `--replicas=2` runs at 0, 10, …, 50 s,
#   5. the report: the table of e2e/cluster/scale.py (p50 … p99.999, max, errors, timeouts)
#      from wrk2's latency distributions (report.py), in $OUT/report.md.
#
# Usage: e2e/kind/run.sh [--dry-run] [--backend graceful|abrupt|both] [--keep]
#   --dry-run   print every command as it would run (needs none of the tools, creates nothing)
#   --backend   which backend(s) to run (default: both, graceful first)
#   --keep      leave the kind cluster up afterwards (default: deleted if this run created it)
# Needs: docker, kind, kubectl, helm, go (for the echo backend), openssl, curl, python3 and wrk2
# (often installed as `wrk`; set WRK2=path to choose). Environment: RATE (1000), DURATION (60s;
# whole seconds as 60 or 60s, or minutes as 1m), CONNECTIONS (50), SCALE_EVERY (10, seconds),
# NODE_ARCH (amd64; the kind node's architecture, arm64 on Apple silicon), OUT (output folder).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CLUSTER=tidegate-scale
NS=tidegate-scale
IMAGE=docker.io/tidegate/tidegate:test
ECHO_IMAGE=docker.io/tidegate/echo:test
URL=https://localhost:8443/
RATE=${RATE:-1000}
DURATION=${DURATION:-60s}
CONNECTIONS=${CONNECTIONS:-50}
SCALE_EVERY=${SCALE_EVERY:-10}
NODE_ARCH=${NODE_ARCH:-amd64}
OUT=${OUT:-$ROOT/out/kind-scale-$(date +%Y%m%d-%H%M%S)}
WRK2=${WRK2:-}

usage() { echo "run.sh: $*" >&2; exit 2; }

DRY=
BACKENDS=(graceful abrupt)
KEEP=
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --backend)
      case ${2:-} in
        graceful | abrupt) BACKENDS=("$2") ;;
        both) BACKENDS=(graceful abrupt) ;;
        *) usage "--backend must be graceful, abrupt or both" ;;
      esac
      shift ;;
    --keep) KEEP=1 ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    *) usage "unknown argument $1" ;;
  esac
  shift
done

# DURATION in whole seconds: wrk2 reads 60, 60s and 1m alike, the scale loop needs the number.
if [[ $DURATION =~ ^([0-9]+)s?$ ]]; then
  DURATION_S=$((10#${BASH_REMATCH[1]}))
elif [[ $DURATION =~ ^([0-9]+)m$ ]]; then
  DURATION_S=$((10#${BASH_REMATCH[1]} * 60))
else
  usage "DURATION must be whole seconds (60, 60s) or minutes (1m), not '$DURATION'"
fi
for var in RATE CONNECTIONS SCALE_EVERY DURATION_S; do
  if ! [[ ${!var} =~ ^[0-9]+$ ]] || [ "${!var}" -eq 0 ]; then
    usage "$var must be a positive integer, not '${!var}'"
  fi
done
case $NODE_ARCH in
  amd64 | arm64) ;;
  *) usage "NODE_ARCH must be amd64 or arm64" ;;
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
# run_to FILE CMD...: the same with the command's output written to FILE.
run_to() {
  local file=$1
  shift
  if [ -n "$DRY" ]; then
    printf '+'
    printf ' %q' "$@"
    printf ' > %q\n' "$file"
  else
    "$@" > "$file"
  fi
}
# run_in DIR CMD...: the same in DIR (a subshell: `env -C` is not everywhere).
run_in() {
  local dir=$1
  shift
  if [ -n "$DRY" ]; then
    printf '+ (cd %q &&' "$dir"
    printf ' %q' "$@"
    printf ')\n'
  else
    (cd "$dir" && "$@")
  fi
}
log() { echo "kind-scale: $*" >&2; }
KUBECTL=(kubectl --context "kind-$CLUSTER")
kctl() { run "${KUBECTL[@]}" "$@"; }

if [ -z "$DRY" ]; then
  for tool in docker kind kubectl helm go openssl curl python3; do
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

# 1. The cluster: reused if it exists (and then left up), else created.
CREATED=
if [ -n "$DRY" ]; then
  run kind get clusters
  clusters=
else
  clusters=$(kind get clusters 2>/dev/null || true)
fi
if grep -qx "$CLUSTER" <<<"$clusters"; then
  log "kind cluster $CLUSTER exists; reusing it"
else
  run kind create cluster --config "$HERE/kind-config.yaml" --wait 120s
  CREATED=1
fi
load_pid=
cleanup() {
  # A wrk2 still running (the script failed during a run) stops with it.
  if [ -n "$load_pid" ]; then
    kill "$load_pid" 2>/dev/null || true
  fi
  if [ -n "$CREATED" ] && [ -z "$KEEP" ]; then
    run kind delete cluster --name "$CLUSTER"
  fi
}
trap cleanup EXIT

# 2. Images for the node's architecture: Tidegate's from the Dockerfile (the bases come from
#    Docker Hub), the echo backend's from its static Linux binary.
run docker build --platform "linux/$NODE_ARCH" -t "$IMAGE" "$ROOT"
ECHO_CTX=$OUT/echo-image
run mkdir -p "$ECHO_CTX"
run_in "$ROOT/e2e/cluster/images/echo" env CGO_ENABLED=0 GOOS=linux GOARCH="$NODE_ARCH" \
  go build -trimpath -ldflags=-s\ -w -o "$ECHO_CTX/echo" .
run docker build --platform "linux/$NODE_ARCH" -t "$ECHO_IMAGE" \
  -f "$ROOT/e2e/cluster/images/echo/Containerfile" "$ECHO_CTX"
run kind load docker-image --name "$CLUSTER" "$IMAGE" "$ECHO_IMAGE"

# 3. Tidegate by its chart, the backend, its certificate and Ingress (idempotent: a reused
#    cluster may have them already).
run helm --kube-context "kind-$CLUSTER" upgrade --install tidegate "$ROOT/helm/tidegate" \
  -n "$NS" --create-namespace \
  --set image.repository=docker.io/tidegate/tidegate --set image.tag=test \
  --set image.pullPolicy=Never --set service.type=NodePort \
  --set service.nodePorts.http=30080 --set service.nodePorts.https=30443 --wait --timeout 180s
run openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$OUT/tls.key" -out "$OUT/tls.crt" -days 2 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost
run_to "$OUT/echo-tls.yaml" "${KUBECTL[@]}" -n "$NS" create secret tls echo-tls \
  --cert "$OUT/tls.crt" --key "$OUT/tls.key" --dry-run=client -o yaml
kctl -n "$NS" apply -f "$OUT/echo-tls.yaml"
kctl -n "$NS" apply -f "$HERE/echo.yaml"
kctl -n "$NS" rollout status deployment/echo --timeout 120s
# The Ingress answers once the controller has pushed it: every second, at most 60 s.
log "waiting for Tidegate to serve $URL"
if [ -n "$DRY" ]; then
  run curl -sf -o /dev/null --cacert "$OUT/tls.crt" "${URL}ready-check"
else
  ready=
  for _ in $(seq 1 60); do
    if curl -sf -o /dev/null --cacert "$OUT/tls.crt" "${URL}ready-check"; then
      ready=1
      break
    fi
    sleep 1
  done
  if [ -z "$ready" ]; then
    echo "run.sh: Tidegate did not serve ${URL} within 60 s; its pods and logs:" >&2
    "${KUBECTL[@]}" -n "$NS" get pods,ingress -o wide >&2 || true
    "${KUBECTL[@]}" -n "$NS" logs deployment/tidegate --all-containers --tail 50 >&2 || true
    exit 1
  fi
fi

# 4. One run per backend: back to 2 pods, none terminating; wrk2 in the background; the
#    scaling beside it (4 at 0 s, 2 at 10 s, …, while the load lasts); then wait for wrk2.
wait_two_pods() {
  if [ -n "$DRY" ]; then
    kctl -n "$NS" get pods -l app=echo -o name
    return
  fi
  local n
  for _ in $(seq 1 120); do
    n=$("${KUBECTL[@]}" -n "$NS" get pods -l app=echo -o name | wc -l)
    [ "$n" -ne 2 ] || return 0
    sleep 1
  done
  echo "run.sh: the echo Deployment still has $n pods after 120 s (want 2)" >&2
  exit 1
}

REPORT_ARGS=()
for backend in "${BACKENDS[@]}"; do
  case $backend in
    graceful) grace=5 ;;
    abrupt) grace=0 ;;
  esac
  load_out=$OUT/wrk2-$backend.txt
  log "$backend backend: wrk2 $RATE requests/s, $CONNECTIONS connections, ${DURATION_S} s;" \
    "scaling every $SCALE_EVERY s"
  kctl -n "$NS" set env deployment/echo "GRACE_SECONDS=$grace"
  kctl -n "$NS" scale deployment echo --replicas=2
  kctl -n "$NS" rollout status deployment/echo --timeout 120s
  wait_two_pods
  load=("$WRK2" -t2 -c"$CONNECTIONS" -d"${DURATION_S}s" -R"$RATE" -L --timeout 5s "$URL")
  if [ -n "$DRY" ]; then
    printf '+'
    printf ' %q' "${load[@]}"
    printf ' > %q 2>&1 &\n' "$load_out"
  else
    "${load[@]}" > "$load_out" 2>&1 &
    load_pid=$!
  fi
  k=0
  while [ $((k * SCALE_EVERY)) -lt "$DURATION_S" ]; do
    if [ "$k" -gt 0 ]; then
      run sleep "$SCALE_EVERY"
    fi
    kctl -n "$NS" scale deployment echo --replicas=$((k % 2 == 0 ? 4 : 2))
    k=$((k + 1))
  done
  if [ -n "$DRY" ]; then
    # shellcheck disable=SC2016 # printed as the script runs it, not expanded
    echo '+ wait "$load_pid"  # wrk2'
  else
    wait "$load_pid"
    load_pid=
  fi
  REPORT_ARGS+=("tidegate scaling ($backend)=$load_out")
done

# 5. The report.
run_to "$OUT/report.md" python3 "$HERE/report.py" "${REPORT_ARGS[@]}"
run cat "$OUT/report.md"
kctl -n "$NS" get pods -o wide
log "report: $OUT/report.md; wrk2's full output: $OUT/wrk2-*.txt"
