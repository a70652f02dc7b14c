#!/usr/bin/env bash
# Compression benchmark: the same backend (nginx serving a 64 KiB HTML page uncompressed), the
# same load (wrk, keep-alive, 50 connections, Accept-Encoding: gzip), through tidegate (1 worker,
# tidegate.io/enable-compression: "true") and nginx (1 worker, gzip on at the same level 1, the
# same minimum length and types, as ingress-nginx's use-gzip sets it up), measured in one run.
# Prints responses/s, uncompressed MB/s, CPU time per response of each proxy, the size of the
# compressed body each sends, and tidegate's ratios.
#
# Environment: DURATION (seconds per run, default 10), ROUNDS (default 3, interleaved, the median
# round is reported), CONNECTIONS (50), PIN=1 (default: the proxy on CPU 0, wrk and the backend
# on CPU 1), ENCODING (gzip; br measures tidegate's brotli alone, nginx has no brotli in Debian).
# Needs: scripts/build done (or it builds), nginx, wrk, curl (scripts/install-deps).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-50}
PIN=${PIN:-1}
ENCODING=${ENCODING:-gzip}
BIN=${TIDEGATE_BIN_DIR:-$ROOT/build/bin}

if [ ! -x "$BIN/tidegate-dataplane" ] || [ ! -x "$BIN/tidegate-controller" ]; then
  scripts/install-deps
  scripts/build --target tidegate-dataplane tidegate-controller
fi
for tool in nginx wrk curl; do
  command -v "$tool" >/dev/null || { echo "bench: $tool missing; run scripts/install-deps" >&2; exit 1; }
done

BACKEND_PORT=19150 NGINX_PORT=19151 TIDEGATE_PORT=19152 ADMIN_PORT=19153
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_setup tidegate-compression-bench

# A page as pages are: the project's own documentation as HTML text, about 64 KiB of it.
cat "$ROOT"/docs/*.md "$ROOT"/docs/*.md >"$WORK/text"
{
  echo "<!doctype html><html><head><title>docs</title></head><body><pre>"
  head -c 65000 "$WORK/text" | sed 's/</\&lt;/g'
  echo "</pre></body></html>"
} >"$WORK/www/page.html"
PAGE_BYTES=$(stat -c %s "$WORK/www/page.html")

write_backend_conf ""

# ingress-nginx's use-gzip: gzip on, gzip_comp_level 1 (its gzip-level), gzip_min_length 256,
# gzip_types (text/html is always compressed by nginx), gzip_vary on, gzip_proxied any.
cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  gzip on;
  gzip_comp_level 1;
  gzip_http_version 1.1;
  gzip_min_length 256;
  gzip_types application/atom+xml application/javascript application/json text/css text/plain;
  gzip_proxied any;
  gzip_vary on;
  upstream backend { server 127.0.0.1:$BACKEND_PORT; keepalive 128; }
  server {
    listen 127.0.0.1:$NGINX_PORT backlog=4096;
    keepalive_requests 10000000;
$(nginx_proxy_location)
  }
}
CONF

write_bench_manifest "$WORK/manifests/bench.yaml" "$BACKEND_PORT"
sed -i 's|^metadata: {name: bench, namespace: bench}$|metadata: {name: bench, namespace: bench, annotations: {tidegate.io/enable-compression: "true"}}|' \
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

# The compressed body each proxy sends (and that it decodes back to the page).
compressed_size() {  # port
  local size
  size=$(curl -sS -H "Accept-Encoding: $ENCODING" -o "$WORK/body" -w '%{size_download}' \
    "http://127.0.0.1:$1/page.html")
  if [ "$ENCODING" = gzip ] && ! gzip -dc "$WORK/body" | cmp -s - "$WORK/www/page.html"; then
    echo "bench: the body from port $1 does not decode to the page" >&2
    exit 1
  fi
  echo "$size"
}

proxy_pids() {  # name
  case $1 in
    tidegate) pgrep -f "tidegate-dataplane --control-socket $WORK/tidegate.sock" ;;
    nginx) pgrep -P "$(cat "$WORK/nginx.pid")" ;;
  esac
}

# Prints "responses_per_second errors user_us_per_response system_us_per_response".
measure() {  # name port
  wrk_cpu "$(proxy_pids "$1" | tr '\n' ' ')" -t1 -c"$CONNECTIONS" -d"${DURATION}s" \
    -H "Accept-Encoding: $ENCODING" "http://127.0.0.1:$2/page.html"
}

PEERS=(tidegate nginx)
[ "$ENCODING" = gzip ] || PEERS=(tidegate)
declare -A RPS CPU SIZE
for name in "${PEERS[@]}"; do
  RPS[$name]="" CPU[$name]=""
  case $name in tidegate) port=$TIDEGATE_PORT ;; nginx) port=$NGINX_PORT ;; esac
  SIZE[$name]=$(compressed_size "$port")
done
echo "bench: $ROUNDS rounds of ${DURATION}s, $CONNECTIONS connections, a $PAGE_BYTES-byte page," \
  "Accept-Encoding: $ENCODING" >&2
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

printf '\n%-10s %12s %14s %16s %12s\n' proxy "responses/s" "page MB/s" "CPU/response us" \
  "body bytes"
for name in "${PEERS[@]}"; do
  r=$(echo "${RPS[$name]}" | median) c=$(echo "${CPU[$name]}" | median)
  printf '%-10s %12.0f %14.1f %16.1f %12s\n' "$name" "$r" \
    "$(awk -v r="$r" -v b="$PAGE_BYTES" 'BEGIN { print r * b / 1e6 }')" "$c" "${SIZE[$name]}"
done
if [ "$ENCODING" = gzip ]; then
  awk -v tr="$(echo "${RPS[tidegate]}" | median)" -v nr="$(echo "${RPS[nginx]}" | median)" \
    -v tc="$(echo "${CPU[tidegate]}" | median)" -v nc="$(echo "${CPU[nginx]}" | median)" \
    -v ts="${SIZE[tidegate]}" -v ns="${SIZE[nginx]}" 'BEGIN {
    printf "\nratio tidegate/nginx: responses/s %.2f, responses per CPU-second %.2f, body size %.2f\n",
      tr / nr, nc / tc, ts / ns
  }'
fi
