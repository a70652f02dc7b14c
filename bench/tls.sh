#!/usr/bin/env bash
# TLS benchmark: tidegate (1 worker) against nginx (1 worker), both terminating TLS 1.3 with the
# same certificate in front of the same backend (nginx serving a 1 KiB file over plain HTTP),
# measured in one run:
#   - new TLS 1.3 handshakes per second, ECDSA P-256 and RSA-2048 certificates: wrk with
#     "Connection: close", so every request is a new connection and a full handshake (wrk does
#     not resume sessions);
#   - keep-alive HTTPS requests per second (wrk, ECDSA certificate).
# Prints each figure and tidegate/nginx ratios.
#
# Both without access logs (nginx: access_log off; tidegate: --access-log off), as in
# bench/proxy.sh: the JSON access log costs tidegate CPU that nginx's configuration here does not
# pay, and it is measured on its own (docs/benchmarks.md, "TLS").
#
# Environment: DURATION (seconds per run, default 5), ROUNDS (default 3; each peer is measured
# once per round, interleaved, and the median round is reported), CONNECTIONS (50),
# PIN=1 (default) pins the proxies under test to CPU 0 and wrk + the backend to CPU 1,
# SYSCALLS=1 also counts each server's system calls per request (perf stat on the
# syscalls:sys_enter_* tracepoints; needs perf and root), PERF_EVENTS=list counts those perf
# events per request (for example cycles:u,cycles:k,instructions:u,context-switches), ACCESS_LOG=json turns tidegate's
# access log on (to see what it costs), BASELINE_BIN_DIR=dir adds a third peer, "baseline":
# tidegate from another build, measured in the same rounds (before/after comparisons).
# Besides the median requests/s, it prints the median CPU time per request of each peer and the
# median over rounds of the per-round CPU ratio against nginx, which holds up best on a shared
# machine.
# Needs: scripts/build done (or it builds), nginx, wrk, openssl, curl (scripts/install-deps).
# Caveat: with two CPUs the client's half of each handshake runs on one core too; for ECDSA the
# client's work (verify) costs about as much as the server's (sign), so the handshake figures are
# a lower bound for both proxies alike.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-50}
PIN=${PIN:-1}
BIN=${TIDEGATE_BIN_DIR:-$ROOT/build/bin}

if [ ! -x "$BIN/tidegate-dataplane" ] || [ ! -x "$BIN/tidegate-controller" ]; then
  scripts/install-deps
  scripts/build --target tidegate-dataplane tidegate-controller
fi
for tool in nginx wrk openssl curl; do
  command -v "$tool" >/dev/null || { echo "bench: $tool missing; run scripts/install-deps" >&2; exit 1; }
done

BACKEND_PORT=19200
NGINX_EC_PORT=19201 NGINX_RSA_PORT=19202
TG_EC_PORT=19203 TG_RSA_PORT=19204
TG_EC_ADMIN=19205 TG_RSA_ADMIN=19206 TG_EC_HTTP=19207 TG_RSA_HTTP=19208
BASE_EC_PORT=19209 BASE_RSA_PORT=19210
BASE_EC_ADMIN=19211 BASE_RSA_ADMIN=19212 BASE_EC_HTTP=19213 BASE_RSA_HTTP=19214
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_setup tidegate-bench-tls
head -c 1024 /dev/zero | tr '\0' 'x' >"$WORK/www/1k.html"

# The certificates: self-signed, one ECDSA P-256, one RSA-2048, the same files for both proxies.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=bench.example.com -addext subjectAltName=DNS:bench.example.com \
  -keyout "$WORK/ec.key" -out "$WORK/ec.crt" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -days 2 \
  -subj /CN=bench.example.com -addext subjectAltName=DNS:bench.example.com \
  -keyout "$WORK/rsa.key" -out "$WORK/rsa.crt" 2>/dev/null
chmod 644 "$WORK"/*.key

write_backend_conf ""

# One nginx, one worker, two TLS servers (one per certificate), TLS 1.3 only.
nginx_server() {  # port cert key
  cat <<CONF
  server {
    listen 127.0.0.1:$1 ssl backlog=4096;
    ssl_certificate $2;
    ssl_certificate_key $3;
    ssl_protocols TLSv1.3;
    keepalive_requests 10000000;
$(nginx_proxy_location)
  }
CONF
}
{
  cat <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  ssl_session_tickets on;
  upstream backend { server 127.0.0.1:$BACKEND_PORT; keepalive 128; }
CONF
  nginx_server "$NGINX_EC_PORT" "$WORK/ec.crt" "$WORK/ec.key"
  nginx_server "$NGINX_RSA_PORT" "$WORK/rsa.crt" "$WORK/rsa.key"
  echo "}"
} >"$WORK/nginx.conf"

write_bench_manifest "$WORK/manifests/bench.yaml" "$BACKEND_PORT"

"${LOAD_CPU[@]}" nginx -c "$WORK/backend.conf" -p "$WORK" & PIDS+=($!)
"${PROXY_CPU[@]}" nginx -c "$WORK/nginx.conf" -p "$WORK" & PIDS+=($!)
# Two data planes (one worker each), one per certificate, served as the default certificate
# (wrk sends the IP address as SNI, which no Ingress names).
start_tidegate() {  # name https_port http_port admin_port cert key [bin_dir]
  local bin=${7:-$BIN}
  "${PROXY_CPU[@]}" "$bin/tidegate-dataplane" --control-socket "$WORK/$1.sock" \
    --http-listen "127.0.0.1:$3" --https-listen "127.0.0.1:$2" \
    --admin-listen "127.0.0.1:$4" --workers 1 --log-level warn --access-log "${ACCESS_LOG:-off}" \
    --default-ssl-certificate "$5" --default-ssl-key "$6" >"$WORK/$1-dataplane.log" 2>&1 &
  PIDS+=($!)
  "$bin/tidegate-controller" --dataplane-socket "$WORK/$1.sock" --manifests "$WORK/manifests" \
    --log-level warn >"$WORK/$1-controller.log" 2>&1 & PIDS+=($!)
}
start_tidegate tg-ec "$TG_EC_PORT" "$TG_EC_HTTP" "$TG_EC_ADMIN" "$WORK/ec.crt" "$WORK/ec.key"
start_tidegate tg-rsa "$TG_RSA_PORT" "$TG_RSA_HTTP" "$TG_RSA_ADMIN" "$WORK/rsa.crt" "$WORK/rsa.key"
PEERS=(tidegate nginx)
HTTPS_PORTS=("$NGINX_EC_PORT" "$NGINX_RSA_PORT" "$TG_EC_PORT" "$TG_RSA_PORT")
if [ -n "${BASELINE_BIN_DIR:-}" ]; then
  start_tidegate base-ec "$BASE_EC_PORT" "$BASE_EC_HTTP" "$BASE_EC_ADMIN" "$WORK/ec.crt" \
    "$WORK/ec.key" "$BASELINE_BIN_DIR"
  start_tidegate base-rsa "$BASE_RSA_PORT" "$BASE_RSA_HTTP" "$BASE_RSA_ADMIN" "$WORK/rsa.crt" \
    "$WORK/rsa.key" "$BASELINE_BIN_DIR"
  PEERS=(tidegate baseline nginx)
  HTTPS_PORTS+=("$BASE_EC_PORT" "$BASE_RSA_PORT")
fi

wait_ok "http://127.0.0.1:$BACKEND_PORT/1k.html"
for port in "${HTTPS_PORTS[@]}"; do
  wait_ok "https://127.0.0.1:$port/1k.html"
done

# What each server negotiates (protocol, cipher, key type): the same for both peers.
for port in $TG_EC_PORT $NGINX_EC_PORT $TG_RSA_PORT $NGINX_RSA_PORT; do
  info=$(openssl s_client -connect "127.0.0.1:$port" -servername bench.example.com </dev/null 2>/dev/null |
    awk '/^New, / { print $2, $5 } /Server public key is/ { print $5 "-bit" }' | paste -sd' ')
  echo "bench: port $port: $info" >&2
done

# The processes doing a server's work (nginx: its worker, not the master).
server_pids() {  # tidegate-instance-name | nginx
  case $1 in
    nginx) pgrep -P "$(cat "$WORK/nginx.pid")" ;;
    *) pgrep -f "tidegate-dataplane --control-socket $WORK/$1.sock" ;;
  esac
}

# Prints "requests_per_second errors user_us_per_request system_us_per_request syscalls" for one
# wrk run; syscalls is "-" unless SYSCALLS=1, else "total/request(name:count,...)".
measure() {  # server url [wrk args...]
  local pids url=$2 out u0 s0 u1 s1 hz total syscalls
  hz=$(getconf CLK_TCK)
  mapfile -t pids < <(server_pids "$1")
  shift 2
  perf_counts_start "${pids[*]}" "$DURATION"
  read -r u0 s0 < <(cpu_ticks "${pids[@]}")
  out=$("${LOAD_CPU[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "$@" "$url")
  read -r u1 s1 < <(cpu_ticks "${pids[@]}")
  total=$(echo "$out" | awk '/requests in/ { print $1 }')
  # Not in a $(...) subshell: perf_counts_finish waits for perf, a child of this shell.
  perf_counts_finish "$total" >"$WORK/counts.txt"
  syscalls=$(cat "$WORK/counts.txt")
  echo "$out" | awk -v du=$((u1 - u0)) -v ds=$((s1 - s0)) -v hz="$hz" -v sc="$syscalls" '
    /Requests\/sec:/ { rps = $2 }
    /requests in/ { total = $1 }
    /Non-2xx|Socket errors/ { errors = errors $0 }
    END { printf "%s %s %.1f %.1f %s\n", rps, (errors == "" ? "none" : "yes"),
          du * 1e6 / hz / total, ds * 1e6 / hz / total, sc }'
}

TESTS=(handshake-ecdsa handshake-rsa keepalive)
declare -A RESULTS CPU
echo "bench: $ROUNDS rounds of ${DURATION}s, $CONNECTIONS connections, 1 KiB responses" >&2
for round in $(seq 1 "$ROUNDS"); do
  for test in "${TESTS[@]}"; do
    for name in "${PEERS[@]}"; do
      case $test/$name in
        handshake-ecdsa/tidegate | keepalive/tidegate) port=$TG_EC_PORT server=tg-ec ;;
        handshake-ecdsa/baseline | keepalive/baseline) port=$BASE_EC_PORT server=base-ec ;;
        handshake-ecdsa/nginx | keepalive/nginx) port=$NGINX_EC_PORT server=nginx ;;
        handshake-rsa/tidegate) port=$TG_RSA_PORT server=tg-rsa ;;
        handshake-rsa/baseline) port=$BASE_RSA_PORT server=base-rsa ;;
        handshake-rsa/nginx) port=$NGINX_RSA_PORT server=nginx ;;
      esac
      args=()
      [ "$test" != keepalive ] && args=(-H "Connection: close")
      read -r rps errors user_us sys_us syscalls < <(measure "$server" \
        "https://127.0.0.1:$port/1k.html" "${args[@]}")
      echo "bench: round $round $test $name: $rps/s, errors: $errors," \
        "CPU per request: user ${user_us} us, system ${sys_us} us" \
        "$([ "$syscalls" != - ] && echo ", syscalls/events $syscalls")" >&2
      RESULTS[$test/$name]+="$rps "
      CPU[$test/$name]+="$(awk -v u="$user_us" -v s="$sys_us" 'BEGIN { print u + s }') "
    done
  done
done

printf '\n%-34s %12s %12s %8s\n' test tidegate nginx ratio
for test in "${TESTS[@]}"; do
  t=$(echo "${RESULTS[$test/tidegate]}" | median)
  n=$(echo "${RESULTS[$test/nginx]}" | median)
  case $test in
    handshake-ecdsa) label="new TLS 1.3 handshakes/s, ECDSA" ;;
    handshake-rsa) label="new TLS 1.3 handshakes/s, RSA" ;;
    keepalive) label="keep-alive HTTPS requests/s" ;;
  esac
  awk -v l="$label" -v t="$t" -v n="$n" 'BEGIN { printf "%-34s %12.0f %12.0f %8.2f\n", l, t, n, t / n }'
done

# CPU per request: each peer's median, and the median of the per-round ratios to nginx.
printf '\nCPU us per request (user + system), median of %s rounds; ratio: median of per-round ratios\n' \
  "$ROUNDS"
for test in "${TESTS[@]}"; do
  for name in "${PEERS[@]}"; do
    [ "$name" = nginx ] && continue
    read -r -a mine <<<"${CPU[$test/$name]}"
    read -r -a theirs <<<"${CPU[$test/nginx]}"
    ratios=""
    for i in "${!mine[@]}"; do
      ratios+="$(awk -v a="${mine[$i]}" -v b="${theirs[$i]}" 'BEGIN { printf "%.3f", a / b }') "
    done
    awk -v l="$test $name/nginx" -v t="$(echo "${CPU[$test/$name]}" | median)" \
      -v n="$(echo "${CPU[$test/nginx]}" | median)" -v r="$(echo "$ratios" | median)" \
      'BEGIN { printf "%-34s %12.1f %12.1f %8.2f\n", l, t, n, r }'
  done
done
