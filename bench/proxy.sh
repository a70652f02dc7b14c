#!/usr/bin/env bash
# Proxy benchmark: the same backend (nginx serving a 1 KiB file), the same load (wrk, keep-alive,
# 50 connections), through tidegate (1 worker), nginx (1 worker) and HAProxy (1 thread), measured
# in one run, plus tidegate with --metrics off (what per-request metrics cost). Prints
# requests/s, p99 and CPU time per request of each, and tidegate's ratios.
#
# Environment: DURATION (seconds per run, default 10), ROUNDS (default 3; each peer is measured
# once per round, interleaved, and the median round is reported), CONNECTIONS (50),
# PIN=1 (default) pins the proxy under test to CPU 0 and wrk + the backend to CPU 1.
# Needs: scripts/build done (or it builds), nginx, haproxy, wrk (scripts/install-deps).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-50}
PIN=${PIN:-1}
BIN=${TIDEGATE_BIN_DIR:-$ROOT/build/bin}

if [ ! -x "$BIN/tidegate-dataplane" ] || [ ! -x "$BIN/tidegate-controller" ]; then
  scripts/install-deps
  scripts/build --target tidegate-dataplane tidegate-controller
fi
for tool in nginx haproxy wrk; do
  command -v "$tool" >/dev/null || { echo "bench: $tool missing; run scripts/install-deps" >&2; exit 1; }
done

BACKEND_PORT=19100 NGINX_PORT=19101 HAPROXY_PORT=19102 TIDEGATE_PORT=19103 ADMIN_PORT=19104
BARE_PORT=19105 BARE_ADMIN_PORT=19106
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_setup tidegate-bench
head -c 1024 /dev/zero | tr '\0' 'x' >"$WORK/www/1k.html"

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
    listen 127.0.0.1:$NGINX_PORT backlog=4096;
    keepalive_requests 10000000;
$(nginx_proxy_location)
  }
}
CONF

cat >"$WORK/haproxy.cfg" <<CONF
global
  nbthread 1
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  option forwardfor
  http-reuse always
frontend fe
  bind 127.0.0.1:$HAPROXY_PORT
  default_backend be
backend be
  server b1 127.0.0.1:$BACKEND_PORT
CONF

write_bench_manifest "$WORK/manifests/bench.yaml" "$BACKEND_PORT"

"${LOAD_CPU[@]}" nginx -c "$WORK/backend.conf" -p "$WORK" & PIDS+=($!)
"${PROXY_CPU[@]}" nginx -c "$WORK/nginx.conf" -p "$WORK" & PIDS+=($!)
"${PROXY_CPU[@]}" haproxy -f "$WORK/haproxy.cfg" -db >"$WORK/haproxy.log" 2>&1 & PIDS+=($!)
# Access logs off, as for the peers. "tidegate" records per-request metrics (the default);
# "tidegate-bare" runs with --metrics off, to show what metrics cost (issue: within 5%).
start_tidegate() {  # name http_port admin_port metrics
  "${PROXY_CPU[@]}" "$BIN/tidegate-dataplane" --control-socket "$WORK/$1.sock" \
    --http-listen "127.0.0.1:$2" --https-listen 127.0.0.1:0 --admin-listen "127.0.0.1:$3" \
    --workers 1 --access-log off --metrics "$4" --log-level warn >"$WORK/$1-dataplane.log" 2>&1 &
  PIDS+=($!)
  "$BIN/tidegate-controller" --dataplane-socket "$WORK/$1.sock" --manifests "$WORK/manifests" \
    --log-level warn >"$WORK/$1-controller.log" 2>&1 & PIDS+=($!)
}
start_tidegate tidegate "$TIDEGATE_PORT" "$ADMIN_PORT" on
start_tidegate tidegate-bare "$BARE_PORT" "$BARE_ADMIN_PORT" off

wait_ok "http://127.0.0.1:$BACKEND_PORT/1k.html"
wait_ok "http://127.0.0.1:$NGINX_PORT/1k.html"
wait_ok "http://127.0.0.1:$HAPROXY_PORT/1k.html"
wait_ok "http://127.0.0.1:$TIDEGATE_PORT/1k.html"
wait_ok "http://127.0.0.1:$BARE_PORT/1k.html"

# The processes doing a proxy's work (nginx: its workers, not the master).
proxy_pids() {  # name
  case $1 in
    tidegate | tidegate-bare) pgrep -f "tidegate-dataplane --control-socket $WORK/$1.sock" ;;
    nginx) pgrep -P "$(cat "$WORK/nginx.pid")" ;;
    haproxy) pgrep -f "haproxy -f $WORK/" ;;
  esac
}

# Prints "requests_per_second p99_ms errors user_us_per_request system_us_per_request" for one
# wrk run. CPU time per request comes from /proc (clock ticks), so it stays meaningful when other
# work shares the machine, unlike requests/s.
measure() {  # name port
  local out pids u0 s0 u1 s1 hz
  hz=$(getconf CLK_TCK)
  mapfile -t pids < <(proxy_pids "$1")
  read -r u0 s0 < <(cpu_ticks "${pids[@]}")
  out=$("${LOAD_CPU[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency \
    "http://127.0.0.1:$2/1k.html")
  read -r u1 s1 < <(cpu_ticks "${pids[@]}")
  echo "$out" | awk -v du=$((u1 - u0)) -v ds=$((s1 - s0)) -v hz="$hz" '
    /Requests\/sec:/ { rps = $2 }
    /requests in/ { total = $1 }
    /^ +99%/ { v = $2; unit = v; gsub(/[0-9.]/, "", unit); gsub(/[a-z]/, "", v);
               p99 = (unit == "us") ? v / 1000 : (unit == "s") ? v * 1000 : v }
    /Non-2xx|Socket errors/ { errors = errors $0 }
    END { printf "%s %s %s %.1f %.1f\n", rps, p99, (errors == "" ? "none" : "yes"),
          du * 1e6 / hz / total, ds * 1e6 / hz / total }'
}

declare -A RPS P99
PEERS=(tidegate tidegate-bare nginx haproxy)
for name in "${PEERS[@]}"; do RPS[$name]="" P99[$name]=""; done
echo "bench: $ROUNDS rounds of ${DURATION}s, $CONNECTIONS connections, 1 KiB responses" >&2
for round in $(seq 1 "$ROUNDS"); do
  for name in "${PEERS[@]}"; do
    case $name in
      tidegate) port=$TIDEGATE_PORT ;;
      tidegate-bare) port=$BARE_PORT ;;
      nginx) port=$NGINX_PORT ;;
      haproxy) port=$HAPROXY_PORT ;;
    esac
    read -r rps p99 errors user_us sys_us < <(measure "$name" "$port")
    echo "bench: round $round $name: $rps req/s, p99 ${p99} ms, errors: $errors," \
      "CPU per request: user ${user_us} us, system ${sys_us} us" >&2
    RPS[$name]+="$rps "
    P99[$name]+="$p99 "
  done
done

printf '\n%-14s %12s %10s\n' proxy "requests/s" "p99 (ms)"
for name in "${PEERS[@]}"; do
  printf '%-14s %12.0f %10.2f\n' "$name" "$(echo "${RPS[$name]}" | median)" \
    "$(echo "${P99[$name]}" | median)"
done
t_rps=$(echo "${RPS[tidegate]}" | median) n_rps=$(echo "${RPS[nginx]}" | median)
h_rps=$(echo "${RPS[haproxy]}" | median) b_rps=$(echo "${RPS[tidegate-bare]}" | median)
t_p99=$(echo "${P99[tidegate]}" | median) n_p99=$(echo "${P99[nginx]}" | median)
h_p99=$(echo "${P99[haproxy]}" | median)
echo
awk -v t="$t_rps" -v n="$n_rps" -v h="$h_rps" -v b="$b_rps" -v tp="$t_p99" -v np="$n_p99" \
  -v hp="$h_p99" 'BEGIN {
  printf "ratio tidegate/nginx:   requests/s %.2f, p99 %.2f\n", t / n, tp / np
  printf "ratio tidegate/haproxy: requests/s %.2f, p99 %.2f\n", t / h, tp / hp
  printf "metrics on/off:         requests/s %.2f\n", t / b
}'
