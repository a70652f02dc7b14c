#!/usr/bin/env bash
# Proxy benchmark: the same backend (nginx serving a 1 KiB file), the same load (wrk, keep-alive,
# 50 connections), through tidegate (1 worker), nginx (1 worker) and HAProxy (1 thread), measured
# in one run, plus tidegate with --metrics off (what per-request metrics cost). Prints
# requests/s, p99 and CPU time per request of each, and tidegate's ratios, above all in requests
# per CPU-second of each proxy process (wrk saturates first on two cores, so requests/s hide the
# difference).
#
# Equal work: every proxy sets the request fields ingress-nginx's template sets (X-Request-ID,
# X-Real-IP, X-Forwarded-For/-Host/-Proto): nginx through bench/lib.sh's location, HAProxy with
# `option forwardfor`, a uuid unique-id header and set-header rules, tidegate by default.
#
# Environment: DURATION (seconds per run, default 10), ROUNDS (default 3; each peer is measured
# once per round, interleaved, and the median round is reported), CONNECTIONS (50),
# PIN=1 (default) pins the proxy under test to CPU 0 and wrk + the backend to CPU 1,
# ACCESS_LOG=1 turns the access logs on: tidegate's JSON lines and nginx's ingress-nginx
# `upstreaminfo` lines, each to a file (HAProxy, which logs through syslog, is then left out),
# SYSCALLS=1 / PERF_EVENTS=list count each proxy's system calls / perf events per request
# (bench/lib.sh, perf_counts_start), PERF_RECORD=dir records a profile of each run there,
# SEGMENTS=1 counts the TCP data segments each proxy sends to clients per request and the pure
# ACKs it sends per data segment on each side (bench/lib.sh, tcp_segments; DURATION at least 3).
# Needs: scripts/build done (or it builds), nginx, haproxy, wrk (scripts/install-deps).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-50}
PIN=${PIN:-1}
ACCESS_LOG=${ACCESS_LOG:-0}
SEGMENTS=${SEGMENTS:-0}
if [ "$SEGMENTS" = 1 ] && [ "$DURATION" -lt 3 ]; then
  echo "bench: SEGMENTS=1 samples from 1 s into a run to 1 s before its end: DURATION >= 3" >&2
  exit 1
fi
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

if [ "$ACCESS_LOG" = 1 ]; then
  # ingress-nginx's default log-format-upstream ("upstreaminfo"), its variables as it sets them.
  NGINX_LOG=$(cat <<'CONF'
  map $host $proxy_upstream_name { default bench-backend-80; }
  map $host $proxy_alternative_upstream_name { default ""; }
  log_format upstreaminfo '$remote_addr - $remote_user [$time_local] "$request" $status '
    '$body_bytes_sent "$http_referer" "$http_user_agent" $request_length $request_time '
    '[$proxy_upstream_name] [$proxy_alternative_upstream_name] $upstream_addr '
    '$upstream_response_length $upstream_response_time $upstream_status $request_id';
CONF
  )
  NGINX_LOG+=$'\n'"  access_log $WORK/nginx-access.log upstreaminfo;"
  TIDEGATE_LOG=json
else
  NGINX_LOG="  access_log off;"
  TIDEGATE_LOG=off
fi

cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 4096; }
http {
$NGINX_LOG
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
  unique-id-format %[uuid()]
  unique-id-header X-Request-ID
  http-request set-header X-Real-IP %[src]
  http-request set-header X-Forwarded-Host %[req.hdr(host)]
  http-request set-header X-Forwarded-Proto http
  default_backend be
backend be
  server b1 127.0.0.1:$BACKEND_PORT
CONF

write_bench_manifest "$WORK/manifests/bench.yaml" "$BACKEND_PORT"

"${LOAD_CPU[@]}" nginx -c "$WORK/backend.conf" -p "$WORK" & PIDS+=($!)
"${PROXY_CPU[@]}" nginx -c "$WORK/nginx.conf" -p "$WORK" & PIDS+=($!)
"${PROXY_CPU[@]}" haproxy -f "$WORK/haproxy.cfg" -db >"$WORK/haproxy.log" 2>&1 & PIDS+=($!)
# Access logs as nginx's (off, or JSON lines to a file with ACCESS_LOG=1). "tidegate" records
# per-request metrics (the default); "tidegate-bare" runs with --metrics off, to show what
# metrics cost (issue: within 5%).
start_tidegate() {  # name http_port admin_port metrics
  "${PROXY_CPU[@]}" "$BIN/tidegate-dataplane" --control-socket "$WORK/$1.sock" \
    --http-listen "127.0.0.1:$2" --https-listen 127.0.0.1:0 --admin-listen "127.0.0.1:$3" \
    --workers 1 --access-log "$TIDEGATE_LOG" --metrics "$4" --log-level warn \
    >"$WORK/$1-dataplane.log" 2>&1 &
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
  local out pids u0 s0 u1 s1 hz total
  hz=$(getconf CLK_TCK)
  mapfile -t pids < <(proxy_pids "$1")
  perf_counts_start "${pids[*]}" "$DURATION" "$1"
  read -r u0 s0 < <(cpu_ticks "${pids[@]}")
  local sampler=""
  if [ "$SEGMENTS" = 1 ]; then
    # Sampled while wrk's connections are open: from 1 s in to 1 s before the end, with ss on
    # wrk's CPU, not the proxy's.
    sample() { "${LOAD_CPU[@]}" bash -c "$(declare -f tcp_segments); tcp_segments ${pids[*]}"; }
    (sleep 1 && sample >"$WORK/segs0.txt" && sleep $((DURATION - 2)) &&
      sample >"$WORK/segs1.txt") &
    sampler=$!
  fi
  out=$("${LOAD_CPU[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency \
    "http://127.0.0.1:$2/1k.html")
  read -r u1 s1 < <(cpu_ticks "${pids[@]}")
  total=$(echo "$out" | awk '/requests in/ { print $1 }')
  perf_counts_finish "$total" >"$WORK/counts.txt"
  echo "$out" | awk -v du=$((u1 - u0)) -v ds=$((s1 - s0)) -v hz="$hz" '
    /Requests\/sec:/ { rps = $2 }
    /requests in/ { total = $1 }
    /^ +99%/ { v = $2; unit = v; gsub(/[0-9.]/, "", unit); gsub(/[a-z]/, "", v);
               p99 = (unit == "us") ? v / 1000 : (unit == "s") ? v * 1000 : v }
    /Non-2xx|Socket errors/ { errors = errors $0 }
    END { printf "%s %s %s %.2f %.2f ", rps, p99, (errors == "" ? "none" : "yes"),
          du * 1e6 / hz / total, ds * 1e6 / hz / total }'
  if [ -n "$sampler" ]; then
    # A failed sample (ss missing, say) leaves the counts out, not the run.
    if wait "$sampler" && [ -s "$WORK/segs0.txt" ] && [ -s "$WORK/segs1.txt" ]; then
      tcp_segments_per_request "$WORK/segs0.txt" "$WORK/segs1.txt" "$2" >>"$WORK/counts.txt"
    fi
    rm -f "$WORK/segs0.txt" "$WORK/segs1.txt"
  fi
  grep -vx -- - "$WORK/counts.txt" | paste -sd, | grep . || echo -
}

# peer_over_tidegate PEER: the peer's CPU per request over tidegate's in this round, which is
# tidegate's requests per CPU-second over the peer's.
peer_over_tidegate() {
  awk -v a="${CPU[$1]}" -v b="${CPU[tidegate]}" 'BEGIN { printf "%.3f", a / b }'
}

declare -A RPS P99 CPU RATIO
PEERS=(tidegate tidegate-bare nginx haproxy)
[ "$ACCESS_LOG" = 1 ] && PEERS=(tidegate tidegate-bare nginx)
for name in "${PEERS[@]}"; do RPS[$name]="" P99[$name]="" RATIO[$name]=""; done
echo "bench: $ROUNDS rounds of ${DURATION}s, $CONNECTIONS connections, 1 KiB responses," \
  "access logs $([ "$ACCESS_LOG" = 1 ] && echo on || echo off)" >&2
for round in $(seq 1 "$ROUNDS"); do
  for name in "${PEERS[@]}"; do
    case $name in
      tidegate) port=$TIDEGATE_PORT ;;
      tidegate-bare) port=$BARE_PORT ;;
      nginx) port=$NGINX_PORT ;;
      haproxy) port=$HAPROXY_PORT ;;
    esac
    read -r rps p99 errors user_us sys_us counts < <(measure "$name" "$port")
    echo "bench: round $round $name: $rps req/s, p99 ${p99} ms, errors: $errors," \
      "CPU per request: user ${user_us} us, system ${sys_us} us" \
      "$([ "$counts" != - ] && echo ", counts $counts")" >&2
    RPS[$name]+="$rps "
    P99[$name]+="$p99 "
    CPU[$name]=$(awk -v u="$user_us" -v s="$sys_us" 'BEGIN { print u + s }')
  done
  line="bench: round $round: tidegate's requests per CPU-second over"
  for name in "${PEERS[@]}"; do
    [ "$name" = tidegate ] && continue
    RATIO[$name]+="$(peer_over_tidegate "$name") "
    line+=" $name's $(peer_over_tidegate "$name")"
  done
  echo "$line" >&2
done

printf '\n%-14s %12s %10s %26s\n' proxy "requests/s" "p99 (ms)" "requests per CPU-second"
for name in "${PEERS[@]}"; do
  printf '%-14s %12.0f %10.2f %26s\n' "$name" "$(echo "${RPS[$name]}" | median)" \
    "$(echo "${P99[$name]}" | median)" \
    "$([ "$name" = tidegate ] && echo "1 (reference)" || echo "tidegate x$(echo "${RATIO[$name]}" | median)")"
done
echo
t_rps=$(echo "${RPS[tidegate]}" | median) t_p99=$(echo "${P99[tidegate]}" | median)
for name in "${PEERS[@]}"; do
  [ "$name" = tidegate ] && continue
  awk -v peer="$name" -v c="$(echo "${RATIO[$name]}" | median)" -v t="$t_rps" \
    -v p="$(echo "${RPS[$name]}" | median)" -v tp="$t_p99" -v pp="$(echo "${P99[$name]}" | median)" \
    'BEGIN { printf "ratio tidegate/%-14s requests per CPU-second %.2f (median of rounds), requests/s %.2f, p99 %.2f\n", peer ":", c, t / p, tp / pp }'
done
echo "(tidegate-bare: --metrics off; its ratio is what metrics cost. Targets, issue 18: nginx" \
  ">= 1.25, haproxy >= 1.10 in requests per CPU-second.)"
