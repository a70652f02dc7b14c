#!/usr/bin/env bash
# Response cache benchmark: hits. The same backend (nginx serving an HTML page with
# Cache-Control: public, max-age=600), the same load (wrk, keep-alive, 50 connections), through
# tidegate (1 worker, tidegate.io/enable-cache: "true") and nginx (1 worker, proxy_cache with a
# 64 MiB zone as users set it up, proxy_cache_lock on, the ingress-nginx request fields),
# measured in one run after one warming request each: every measured response is a hit (the
# script checks that the backend saw no further request). Prints responses/s, CPU time per
# response of each proxy, and tidegate's ratios.
#
# Environment: DURATION (seconds per run, default 10), ROUNDS (default 3, interleaved, the median
# round is reported), CONNECTIONS (50), PAGE_BYTES (8192), PIN=1 (default: the proxy on CPU 0,
# wrk and the backend on CPU 1).
# Needs: scripts/build done (or it builds), nginx, wrk, curl (scripts/install-deps).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-50}
PAGE_BYTES=${PAGE_BYTES:-8192}
PIN=${PIN:-1}
BIN=${TIDEGATE_BIN_DIR:-$ROOT/build/bin}

if [ ! -x "$BIN/tidegate-dataplane" ] || [ ! -x "$BIN/tidegate-controller" ]; then
  scripts/install-deps
  scripts/build --target tidegate-dataplane tidegate-controller
fi
for tool in nginx wrk curl; do
  command -v "$tool" >/dev/null || { echo "bench: $tool missing; run scripts/install-deps" >&2; exit 1; }
done

BACKEND_PORT=19160 NGINX_PORT=19161 TIDEGATE_PORT=19162 ADMIN_PORT=19163
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_setup tidegate-cache-bench

cat "$ROOT"/docs/*.md >"$WORK/text"
{
  echo "<!doctype html><html><head><title>docs</title></head><body><pre>"
  head -c "$PAGE_BYTES" "$WORK/text" | sed 's/</\&lt;/g'
  echo "</pre></body></html>"
} >"$WORK/www/page.html"
PAGE_BYTES=$(stat -c %s "$WORK/www/page.html")

# The backend logs its requests: the measured runs must not reach it.
write_backend_conf 'add_header Cache-Control "public, max-age=600";'
sed -i "s|  access_log off;|  access_log $WORK/backend-access.log;|" "$WORK/backend.conf"

mkdir -p "$WORK/nginx-cache"
cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  proxy_cache_path $WORK/nginx-cache levels=1:2 keys_zone=pages:10m max_size=64m inactive=10m;
  upstream backend { server 127.0.0.1:$BACKEND_PORT; keepalive 128; }
  server {
    listen 127.0.0.1:$NGINX_PORT backlog=4096;
    keepalive_requests 10000000;
    proxy_cache pages;
    proxy_cache_lock on;
    add_header X-Cache \$upstream_cache_status;
$(nginx_proxy_location)
  }
}
CONF

write_bench_manifest "$WORK/manifests/bench.yaml" "$BACKEND_PORT"
sed -i 's|^metadata: {name: bench, namespace: bench}$|metadata: {name: bench, namespace: bench, annotations: {tidegate.io/enable-cache: "true"}}|' \
  "$WORK/manifests/bench.yaml"

"${LOAD_CPU[@]}" nginx -c "$WORK/backend.conf" -p "$WORK" & PIDS+=($!)
"${PROXY_CPU[@]}" nginx -c "$WORK/nginx.conf" -p "$WORK" & PIDS+=($!)
"${PROXY_CPU[@]}" "$BIN/tidegate-dataplane" --control-socket "$WORK/tidegate.sock" \
  --http-listen "127.0.0.1:$TIDEGATE_PORT" --https-listen 127.0.0.1:0 \
  --admin-listen "127.0.0.1:$ADMIN_PORT" --workers 1 --access-log off --log-level warn \
  >"$WORK/tidegate-dataplane.log" 2>&1 & PIDS+=($!)
"$BIN/tidegate-controller" --dataplane-socket "$WORK/tidegate.sock" --manifests "$WORK/manifests" \
  --log-level warn >"$WORK/tidegate-controller.log" 2>&1 & PIDS+=($!)

wait_ok "http://127.0.0.1:$BACKEND_PORT/page.html"
wait_ok "http://127.0.0.1:$NGINX_PORT/page.html"
wait_ok "http://127.0.0.1:$TIDEGATE_PORT/page.html"

# Both warm: the next answer of each is a hit.
for port in "$NGINX_PORT" "$TIDEGATE_PORT"; do
  status=$(curl -sS -D - -o /dev/null "http://127.0.0.1:$port/page.html" | tr -d '\r' |
    awk -F': ' 'tolower($1) == "x-cache" { print $2 }')
  if [ "$status" != HIT ]; then
    echo "bench: port $port answers X-Cache: ${status:-none} after warming" >&2
    exit 1
  fi
done
backend_requests() { wc -l <"$WORK/backend-access.log"; }
BEFORE=$(backend_requests)

proxy_pids() {  # name
  case $1 in
    tidegate) pgrep -f "tidegate-dataplane --control-socket $WORK/tidegate.sock" ;;
    nginx) pgrep -P "$(cat "$WORK/nginx.pid")" | head -1 ;;  # the worker, not the cache manager
  esac
}

# Prints "responses_per_second errors user_us_per_response system_us_per_response".
measure() {  # name port
  wrk_cpu "$(proxy_pids "$1" | tr '\n' ' ')" -t1 -c"$CONNECTIONS" -d"${DURATION}s" \
    "http://127.0.0.1:$2/page.html"
}

PEERS=(tidegate nginx)
declare -A RPS CPU
echo "bench: $ROUNDS rounds of ${DURATION}s, $CONNECTIONS connections, a $PAGE_BYTES-byte page," \
  "every response a cache hit" >&2
for round in $(seq 1 "$ROUNDS"); do
  for name in "${PEERS[@]}"; do
    case $name in tidegate) port=$TIDEGATE_PORT ;; nginx) port=$NGINX_PORT ;; esac
    read -r rps errors user_us sys_us < <(measure "$name" "$port")
    echo "bench: round $round $name: $rps responses/s, errors: $errors," \
      "CPU per response: user ${user_us} us, system ${sys_us} us" >&2
    RPS[$name]+="$rps "
    CPU[$name]+="$(awk -v u="$user_us" -v s="$sys_us" 'BEGIN { print u + s }') "
  done
done
AFTER=$(backend_requests)
if [ "$AFTER" != "$BEFORE" ]; then
  echo "bench: the backend saw $((AFTER - BEFORE)) requests during the runs (misses)" >&2
  exit 1
fi

printf '\n%-10s %12s %16s\n' proxy "hits/s" "CPU/hit us"
for name in "${PEERS[@]}"; do
  printf '%-10s %12.0f %16.1f\n' "$name" "$(echo "${RPS[$name]}" | median)" \
    "$(echo "${CPU[$name]}" | median)"
done
awk -v tr="$(echo "${RPS[tidegate]}" | median)" -v nr="$(echo "${RPS[nginx]}" | median)" \
  -v tc="$(echo "${CPU[tidegate]}" | median)" -v nc="$(echo "${CPU[nginx]}" | median)" 'BEGIN {
  printf "\nratio tidegate/nginx: hits/s %.2f, hits per CPU-second %.2f\n", tr / nr, nc / tc
}'
