#!/usr/bin/env bash
# User-space instructions per request, tidegate (1 worker) against nginx (1 worker, no master),
# both under callgrind, same certificate (ECDSA P-256), same backend (nginx serving 1 KiB):
#   - per keep-alive HTTPS request (TLS 1.3),
#   - per keep-alive plain HTTP request (the proxying alone; the difference is the TLS layer),
#   - per new connection with a full TLS 1.3 handshake and one request.
# A fixed number of requests from a small Python client (one at a time), counters zeroed after a
# warm-up. Instruction counts do not move with the load of a shared machine, unlike requests/s
# or CPU time; they leave out the kernel (system time) and cache misses, so read them beside
# bench/tls.sh. Prints each figure and the tidegate/nginx ratios.
#
# Environment: REQUESTS (keep-alive requests per connection, 2000), HANDSHAKES (300),
# KEEP_PROFILES=dir keeps each measured callgrind profile there (<mode>-<port>.callgrind, for
# callgrind_annotate).
# Needs: scripts/build done (or it builds), nginx, openssl, curl, python3, valgrind
# (apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

REQUESTS=${REQUESTS:-2000}
HANDSHAKES=${HANDSHAKES:-300}
BIN=${TIDEGATE_BIN_DIR:-$ROOT/build/bin}

if [ ! -x "$BIN/tidegate-dataplane" ] || [ ! -x "$BIN/tidegate-controller" ]; then
  scripts/install-deps
  scripts/build --target tidegate-dataplane tidegate-controller
fi
for tool in nginx openssl curl python3 valgrind callgrind_control; do
  command -v "$tool" >/dev/null || { echo "bench: $tool missing" >&2; exit 1; }
done

BACKEND_PORT=19230
NGINX_TLS_PORT=19231 NGINX_HTTP_PORT=19232
TG_TLS_PORT=19233 TG_HTTP_PORT=19234 TG_ADMIN_PORT=19235
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
PIN=0 bench_setup tidegate-bench-tls-instructions
head -c 1024 /dev/zero | tr '\0' 'x' >"$WORK/www/1k.html"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=bench.example.com -addext subjectAltName=DNS:bench.example.com \
  -keyout "$WORK/ec.key" -out "$WORK/ec.crt" 2>/dev/null
chmod 644 "$WORK/ec.key"

write_backend_conf ""
# The same proxy configuration as bench/tls.sh, plus a plain listener; one process.
cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
master_process off;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  ssl_session_tickets on;
  upstream backend { server 127.0.0.1:$BACKEND_PORT; keepalive 128; }
  server {
    listen 127.0.0.1:$NGINX_TLS_PORT ssl;
    listen 127.0.0.1:$NGINX_HTTP_PORT;
    ssl_certificate $WORK/ec.crt;
    ssl_certificate_key $WORK/ec.key;
    ssl_protocols TLSv1.3;
    keepalive_requests 10000000;
$(nginx_proxy_location)
  }
}
CONF
write_bench_manifest "$WORK/manifests/bench.yaml" "$BACKEND_PORT"
# The client: N requests on one connection (keep-alive), or N connections of one request each.
cat >"$WORK/client.py" <<'PY'
import socket, ssl, sys
port, n, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
close = b"Connection: close\r\n" if mode == "handshake" else b""
req = b"GET /1k.html HTTP/1.1\r\nHost: bench.example.com\r\n" + close + b"\r\n"
def exchange(s):
    s.sendall(req)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            raise SystemExit("connection closed early")
        data += chunk
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep and len(body) >= 1024:
            if not head.startswith(b"HTTP/1.1 200"):
                raise SystemExit(head[:100])
            return
def connect():
    s = socket.create_connection(("127.0.0.1", port))
    return s if mode == "http" else ctx.wrap_socket(s)
if mode == "handshake":
    for _ in range(n):
        with connect() as s:
            exchange(s)
else:
    with connect() as s:
        for _ in range(n):
            exchange(s)
PY

nginx -c "$WORK/backend.conf" -p "$WORK" & PIDS+=($!)
# Uncompressed names: a dump after --zero refers to names the earlier dump defined, which
# callgrind_annotate could not resolve in a kept profile.
VG_OPTS=(--tool=callgrind --compress-strings=no --compress-pos=no)
valgrind "${VG_OPTS[@]}" --callgrind-out-file="$WORK/nginx.cg.%p" \
  nginx -c "$WORK/nginx.conf" -p "$WORK" >"$WORK/nginx-valgrind.log" 2>&1 &
NGINX_VG=$!
PIDS+=("$NGINX_VG")
valgrind "${VG_OPTS[@]}" --callgrind-out-file="$WORK/tidegate.cg.%p" \
  "$BIN/tidegate-dataplane" --control-socket "$WORK/tg.sock" \
  --http-listen "127.0.0.1:$TG_HTTP_PORT" --https-listen "127.0.0.1:$TG_TLS_PORT" \
  --admin-listen "127.0.0.1:$TG_ADMIN_PORT" --workers 1 --log-level warn --access-log off \
  --default-ssl-certificate "$WORK/ec.crt" --default-ssl-key "$WORK/ec.key" \
  >"$WORK/tidegate-valgrind.log" 2>&1 &
TG_VG=$!
PIDS+=("$TG_VG")
for _ in $(seq 1 100); do [ -S "$WORK/tg.sock" ] && break; sleep 0.2; done
"$BIN/tidegate-controller" --dataplane-socket "$WORK/tg.sock" --manifests "$WORK/manifests" \
  --log-level warn >"$WORK/controller.log" 2>&1 & PIDS+=($!)

wait_ok "http://127.0.0.1:$BACKEND_PORT/1k.html"
# Under valgrind both start slowly: up to 60 s each.
for url in "https://127.0.0.1:$NGINX_TLS_PORT" "http://127.0.0.1:$NGINX_HTTP_PORT" \
  "https://127.0.0.1:$TG_TLS_PORT" "http://127.0.0.1:$TG_HTTP_PORT"; do
  for _ in $(seq 1 300); do
    curl -kfsS -o /dev/null "$url/1k.html" 2>/dev/null && break
    sleep 0.2
  done
  wait_ok "$url/1k.html"
done

# Prints the instructions per request of one run: counters zeroed, the client run, dumped.
instructions() {  # valgrind_pid port count mode
  python3 "$WORK/client.py" "$2" 50 "$4"  # warm-up (caches, pools, first-use allocations)
  callgrind_control --zero "$1" >/dev/null 2>&1
  python3 "$WORK/client.py" "$2" "$3" "$4"
  rm -f "$WORK"/*.cg.*.[0-9]*
  callgrind_control --dump "$1" >/dev/null 2>&1
  local dump=""
  for _ in $(seq 1 50); do
    for dump in "$WORK"/*.cg."$1".[0-9]*; do break; done
    [ -f "$dump" ] && grep -q '^totals:\|^summary:' "$dump" && break
    sleep 0.2
  done
  awk -v n="$3" '/^(totals|summary):/ { printf "%.0f\n", $2 / n; exit }' "$dump"
  if [ -n "${KEEP_PROFILES:-}" ]; then
    mkdir -p "$KEEP_PROFILES"
    cp "$dump" "$KEEP_PROFILES/$4-$2.callgrind"
  fi
}

declare -A IR
for mode in keepalive http handshake; do
  count=$REQUESTS
  [ "$mode" = handshake ] && count=$HANDSHAKES
  cmode=$mode
  [ "$mode" = keepalive ] && cmode=tls
  tg_port=$TG_TLS_PORT nginx_port=$NGINX_TLS_PORT
  [ "$mode" = http ] && tg_port=$TG_HTTP_PORT nginx_port=$NGINX_HTTP_PORT
  IR[$mode/tidegate]=$(instructions "$TG_VG" "$tg_port" "$count" "$cmode")
  IR[$mode/nginx]=$(instructions "$NGINX_VG" "$nginx_port" "$count" "$cmode")
  echo "bench: $mode: tidegate ${IR[$mode/tidegate]}, nginx ${IR[$mode/nginx]} instructions" \
    "per request" >&2
done

printf '\n%-46s %12s %12s %8s\n' "instructions per request (user space)" tidegate nginx ratio
for mode in keepalive http handshake; do
  case $mode in
    keepalive) label="keep-alive HTTPS request (TLS 1.3)" ;;
    http) label="keep-alive plain HTTP request" ;;
    handshake) label="new connection: full handshake + request" ;;
  esac
  awk -v l="$label" -v t="${IR[$mode/tidegate]}" -v n="${IR[$mode/nginx]}" \
    'BEGIN { printf "%-46s %12d %12d %8.2f\n", l, t, n, t / n }'
done
awk -v tk="${IR[keepalive/tidegate]}" -v th="${IR[http/tidegate]}" \
  -v nk="${IR[keepalive/nginx]}" -v nh="${IR[http/nginx]}" \
  'BEGIN { printf "%-46s %12d %12d %8.2f\n", "TLS layer per keep-alive request (difference)", tk - th, nk - nh, (tk - th) / (nk - nh) }'
