#!/usr/bin/env bash
# HTTP/2 benchmark: tidegate (1 worker) against nginx (1 worker, `listen ... ssl http2`), both
# terminating TLS 1.3 with ALPN h2 in front of the same backend (nginx serving a 1 KiB file over
# plain HTTP/1.1, keep-alive), measured in one run with h2load (nghttp2-client): CLIENTS
# connections (50) with STREAMS concurrent streams each (10), small responses.
# Prints requests/s and the CPU time per request of each proxy process (utime + stime from
# /proc over the run: h2load and the backend share the machine), and the tidegate/nginx ratios.
#
# Both without access logs, nginx configured as bench/proxy.sh configures it (the forwarding
# headers and X-Request-ID that ingress-nginx's template sets).
#
# Then gRPC unary calls the same way: tidegate with backend-protocol GRPC against nginx's
# grpc_pass (keepalive 128, the same forwarding headers), both to one cleartext HTTP/2 gRPC
# backend (bench/grpc-backend, Go standard library, built once into ~/.cache/tidegate/), h2load
# posting a 5-byte gRPC message with content-type application/grpc. GRPC=0 skips this part.
#
# Environment: DURATION (seconds per run, default 5), ROUNDS (3; peers interleaved, the median
# round reported), CLIENTS (50), STREAMS (10), PIN=1 (default) pins the proxies to CPU 0 and
# h2load + the backend to CPU 1, BASELINE_BIN_DIR=dir adds tidegate from another build.
# Needs: scripts/build done (or it builds), nginx, h2load, openssl, curl (scripts/install-deps).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
STREAMS=${STREAMS:-10}
GRPC=${GRPC:-1}
PIN=${PIN:-1}
BIN=${TIDEGATE_BIN_DIR:-$ROOT/build/bin}

if [ ! -x "$BIN/tidegate-dataplane" ] || [ ! -x "$BIN/tidegate-controller" ]; then
  scripts/install-deps
  scripts/build --target tidegate-dataplane tidegate-controller
fi
for tool in nginx h2load openssl curl; do
  command -v "$tool" >/dev/null || { echo "bench: $tool missing; run scripts/install-deps" >&2; exit 1; }
done

BACKEND_PORT=19300
NGINX_PORT=19301
TG_PORT=19302 TG_HTTP=19303 TG_ADMIN=19304
BASE_PORT=19305 BASE_HTTP=19306 BASE_ADMIN=19307
GRPC_BACKEND_PORT=19310
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_setup tidegate-bench-h2
head -c 1024 /dev/zero | tr '\0' 'x' >"$WORK/www/1k.html"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=bench.example.com -addext subjectAltName=DNS:bench.example.com \
  -keyout "$WORK/ec.key" -out "$WORK/ec.crt" 2>/dev/null
chmod 644 "$WORK"/*.key

write_backend_conf ""
cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  upstream backend { server 127.0.0.1:$BACKEND_PORT; keepalive 128; }
  server {
    listen 127.0.0.1:$NGINX_PORT ssl http2 backlog=4096;
    ssl_certificate $WORK/ec.crt;
    ssl_certificate_key $WORK/ec.key;
    ssl_protocols TLSv1.3;
    keepalive_requests 10000000;
    http2_max_concurrent_streams 128;
$(nginx_proxy_location)
    location /test.Echo/ {
      grpc_pass grpc://grpc_backend;
      grpc_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      grpc_set_header X-Forwarded-Proto \$scheme;
      grpc_set_header X-Request-ID \$request_id;
    }
  }
  upstream grpc_backend { server 127.0.0.1:$GRPC_BACKEND_PORT; keepalive 128; }
}
CONF
write_bench_manifest "$WORK/manifests/bench.yaml" "$BACKEND_PORT"
cat >"$WORK/manifests/grpc.yaml" <<CONF
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: grpc
  namespace: bench
  annotations: {tidegate.io/backend-protocol: GRPC}
spec:
  ingressClassName: tidegate
  rules:
    - http:
        paths:
          - path: /test.Echo/
            pathType: Prefix
            backend: {service: {name: grpc, port: {number: 80}}}
---
apiVersion: v1
kind: Service
metadata: {name: grpc, namespace: bench}
spec:
  ports: [{name: grpc, port: 80, targetPort: $GRPC_BACKEND_PORT}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: grpc-1, namespace: bench, labels: {kubernetes.io/service-name: grpc}}
addressType: IPv4
ports: [{name: grpc, port: $GRPC_BACKEND_PORT}]
endpoints: [{addresses: ["127.0.0.1"]}]
CONF
if [ "$GRPC" = 1 ]; then
  GRPC_BACKEND=$("$ROOT/bench/grpc-backend/build.sh")/grpc-backend
  "${LOAD_CPU[@]}" "$GRPC_BACKEND" -listen "127.0.0.1:$GRPC_BACKEND_PORT" \
    >"$WORK/grpc-backend.log" 2>&1 & PIDS+=($!)
  # One gRPC message: flag 0, length 5, "hello".
  printf '\0\0\0\0\5hello' >"$WORK/grpc-request.bin"
fi

"${LOAD_CPU[@]}" nginx -c "$WORK/backend.conf" -p "$WORK" & PIDS+=($!)
"${PROXY_CPU[@]}" nginx -c "$WORK/nginx.conf" -p "$WORK" & PIDS+=($!)
start_tidegate() {  # name https_port http_port admin_port [bin_dir]
  local bin=${5:-$BIN}
  "${PROXY_CPU[@]}" "$bin/tidegate-dataplane" --control-socket "$WORK/$1.sock" \
    --http-listen "127.0.0.1:$3" --https-listen "127.0.0.1:$2" \
    --admin-listen "127.0.0.1:$4" --workers 1 --log-level warn --access-log off \
    --default-ssl-certificate "$WORK/ec.crt" --default-ssl-key "$WORK/ec.key" \
    >"$WORK/$1-dataplane.log" 2>&1 &
  PIDS+=($!)
  "$bin/tidegate-controller" --dataplane-socket "$WORK/$1.sock" --manifests "$WORK/manifests" \
    --log-level warn >"$WORK/$1-controller.log" 2>&1 & PIDS+=($!)
}
start_tidegate tg "$TG_PORT" "$TG_HTTP" "$TG_ADMIN"
PEERS=(tidegate nginx)
if [ -n "${BASELINE_BIN_DIR:-}" ]; then
  start_tidegate base "$BASE_PORT" "$BASE_HTTP" "$BASE_ADMIN" "$BASELINE_BIN_DIR"
  PEERS=(tidegate baseline nginx)
fi
wait_ok "http://127.0.0.1:$BACKEND_PORT/1k.html"
for port in "$NGINX_PORT" "$TG_PORT" ${BASELINE_BIN_DIR:+"$BASE_PORT"}; do
  wait_ok "https://127.0.0.1:$port/1k.html"
  # Both must speak h2 (h2load fails otherwise, but say so plainly).
  proto=$(curl -ks --http2 -o /dev/null -w '%{http_version}' "https://127.0.0.1:$port/1k.html")
  [ "$proto" = 2 ] || { echo "bench: port $port does not speak HTTP/2 (got $proto)" >&2; exit 1; }
done

server_pids() {  # tidegate-instance-name | nginx
  case $1 in
    nginx) pgrep -P "$(cat "$WORK/nginx.pid")" ;;
    *) pgrep -f "tidegate-dataplane --control-socket $WORK/$1.sock" ;;
  esac
}

# "requests_per_second failed cpu_us_per_request" for one h2load run.
measure() {  # server url
  local pids out u0 s0 u1 s1 hz
  hz=$(getconf CLK_TCK)
  mapfile -t pids < <(server_pids "$1")
  read -r u0 s0 < <(cpu_ticks "${pids[@]}")
  out=$("${LOAD_CPU[@]}" h2load -c "$CLIENTS" -m "$STREAMS" -D "$DURATION" --warm-up-time=1 \
    "${H2LOAD_EXTRA[@]}" "$2" 2>&1)
  read -r u1 s1 < <(cpu_ticks "${pids[@]}")
  # CPU over the warm-up too: count the requests done in it as well (h2load reports only the
  # measured part), so the per-request figure is slightly high for both peers alike.
  echo "$out" | awk -v du=$((u1 - u0)) -v ds=$((s1 - s0)) -v hz="$hz" -v d="$DURATION" '
    /^finished in/ { rps = $4 + 0 }
    /^requests:/ { done = $8 + 0; failed = $10 + 0 + $12 }
    END { total = rps * (d + 1); if (total == 0) total = 1
          printf "%.0f %d %.1f\n", rps, failed, (du + ds) * 1e6 / hz / total }'
}

# Interleaved rounds of every peer on `path`, then the table of medians and ratios.
compare() {  # title path unit(request|call)
  local title=$1 target=$2 unit=$3 round name port server rps failed cpu t n i ratios
  local -A RPS=() CPU=()
  local -a mine theirs
  for round in $(seq 1 "$ROUNDS"); do
    for name in "${PEERS[@]}"; do
      case $name in
        tidegate) port=$TG_PORT server=tg ;;
        baseline) port=$BASE_PORT server=base ;;
        nginx) port=$NGINX_PORT server=nginx ;;
      esac
      read -r rps failed cpu < <(measure "$server" "https://127.0.0.1:$port$target")
      echo "bench: $title round $round $name: $rps/s, failed: $failed, CPU per $unit: $cpu us" >&2
      [ "$failed" = 0 ] || { echo "bench: $name had failed ${unit}s" >&2; exit 1; }
      RPS[$name]+="$rps "
      CPU[$name]+="$cpu "
    done
  done
  printf '\n%-28s %12s %12s %8s\n' "$title" tidegate nginx ratio
  t=$(echo "${RPS[tidegate]}" | median)
  n=$(echo "${RPS[nginx]}" | median)
  awk -v t="$t" -v n="$n" -v u="${unit}s/s" \
    'BEGIN { printf "%-28s %12.0f %12.0f %8.2f\n", u, t, n, t / n }'
  read -r -a mine <<<"${CPU[tidegate]}"
  read -r -a theirs <<<"${CPU[nginx]}"
  ratios=""
  for i in "${!mine[@]}"; do
    ratios+="$(awk -v a="${mine[$i]}" -v b="${theirs[$i]}" 'BEGIN { printf "%.3f", b / a }') "
  done
  awk -v t="$(echo "${CPU[tidegate]}" | median)" -v n="$(echo "${CPU[nginx]}" | median)" \
    -v r="$(echo "$ratios" | median)" -v u="CPU us per $unit" \
    'BEGIN { printf "%-28s %12.1f %12.1f %8.2f  (nginx/tidegate: above 1 = tidegate cheaper)\n",
             u, t, n, r }'
  if [ -n "${BASELINE_BIN_DIR:-}" ]; then
    awk -v t="$(echo "${CPU[baseline]}" | median)" -v r="$(echo "${RPS[baseline]}" | median)" \
      -v u="$unit" 'BEGIN { printf "%-28s %12.0f %ss/s, %.1f us per %s\n", "baseline", r, u, t, u }'
  fi
}

H2LOAD_EXTRA=()
echo "bench: $ROUNDS rounds of ${DURATION}s, $CLIENTS connections x $STREAMS streams, 1 KiB" >&2
compare "h2, TLS 1.3" /1k.html request

[ "$GRPC" = 1 ] || exit 0

# --- gRPC unary ------------------------------------------------------------------------------
grpc_check() {  # port: one call must come back with the message and grpc-status 0
  local out
  out=$(h2load -n 1 -c 1 -d "$WORK/grpc-request.bin" -H 'content-type: application/grpc' \
    -H 'te: trailers' "https://127.0.0.1:$1/test.Echo/Unary" 2>&1)
  echo "$out" | grep -q '1 succeeded' || { echo "bench: gRPC through port $1 failed:" >&2
    echo "$out" >&2; exit 1; }
}
for port in "$NGINX_PORT" "$TG_PORT" ${BASELINE_BIN_DIR:+"$BASE_PORT"}; do
  for _ in $(seq 1 50); do
    if h2load -n 1 -c 1 -d "$WORK/grpc-request.bin" -H 'content-type: application/grpc' \
      "https://127.0.0.1:$port/test.Echo/Unary" 2>&1 | grep -q '1 succeeded'; then break; fi
    sleep 0.1
  done
  grpc_check "$port"
done
H2LOAD_EXTRA=(-d "$WORK/grpc-request.bin" -H 'content-type: application/grpc' -H 'te: trailers')
echo "bench: gRPC unary, $ROUNDS rounds of ${DURATION}s, $CLIENTS connections x $STREAMS streams" >&2
compare "gRPC unary, TLS 1.3" /test.Echo/Unary call
