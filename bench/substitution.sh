#!/usr/bin/env bash
# Body substitution benchmark (issue #5): a real HTML page from a package's documentation, served
# by nginx, fetched through
#   - tidegate (1 worker) with ten rules (domains, an ID pattern, a case-insensitive word, \b
#     words, attribute patterns),
#   - tidegate (the same worker) on a route without rules,
#   - nginx (1 worker) with sub_filter on the rules that are fixed strings (sub_filter knows no
#     regexes; it always ignores case),
# all in one run. Prints MB/s of page (input bytes) per peer, the proxy's CPU time per page, and
# the ratios. Target: with ten rules, at least half the throughput without rules.
#
# Environment: PAGE (default /usr/share/doc/nodejs/api/all.html, 8.4 MB, from the nodejs
# package), DURATION (seconds per run, default 3), ROUNDS (default 1; runs are interleaved and
# the median round is reported), CONNECTIONS (default 4), PIN=1 (default) pins the proxies to CPU
# 0 and wrk + the backend to CPU 1, TIDEGATE_BIN_DIR (default build/bin).
# Needs: scripts/build done (or it builds), nginx, wrk (scripts/install-deps).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

PAGE=${PAGE:-/usr/share/doc/nodejs/api/all.html}
DURATION=${DURATION:-3}
ROUNDS=${ROUNDS:-1}
CONNECTIONS=${CONNECTIONS:-4}
PIN=${PIN:-1}
BIN=${TIDEGATE_BIN_DIR:-$ROOT/build/bin}

if [ ! -r "$PAGE" ]; then
  echo "bench: $PAGE not found (apt-get install nodejs-doc, or set PAGE to an HTML page >= 1 MB)" >&2
  exit 1
fi
if [ ! -x "$BIN/tidegate-dataplane" ] || [ ! -x "$BIN/tidegate-controller" ]; then
  scripts/install-deps
  scripts/build --target tidegate-dataplane tidegate-controller
fi
for tool in nginx wrk curl; do
  command -v "$tool" >/dev/null || { echo "bench: $tool missing; run scripts/install-deps" >&2; exit 1; }
done

BACKEND_PORT=19200 NGINX_PORT=19201 TIDEGATE_PORT=19203 ADMIN_PORT=19204
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_setup tidegate-bench-substitution
cp "$PAGE" "$WORK/www/page.html"
chmod 644 "$WORK/www/page.html"
PAGE_BYTES=$(stat -c %s "$WORK/www/page.html")

write_backend_conf "types { text/html html; }"

# nginx's sub_filter on the fixed-string rules of the ten (sub_filter matches without case).
cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  upstream backend { server 127.0.0.1:$BACKEND_PORT; keepalive 16; }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    keepalive_requests 10000000;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Accept-Encoding "";
      sub_filter_once off;
      sub_filter 'developer.mozilla.org' 'mdn.clone.example';
      sub_filter 'nodejs.org' 'nodejs.clone.example';
      sub_filter 'github.com' 'git.clone.example';
      sub_filter 'www.freebsd.org' 'bsd.clone.example';
      sub_filter 'javascript' 'JS';
    }
  }
}
CONF

# The same ten rules as tests/dataplane/filters/substitution_bench_test.cc.
cat >"$WORK/manifests/bench.yaml" <<'CONF'
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: rules
  namespace: bench
  annotations:
    tidegate.io/substitutions: |
      - {match: 'developer\.mozilla\.org', replace: mdn.clone.example}
      - {match: 'nodejs\.org', replace: nodejs.clone.example}
      - {match: 'github\.com', replace: git.clone.example}
      - {match: 'www\.freebsd\.org', replace: bsd.clone.example}
      - {match: 'UA-[0-9]{4,10}-[0-9]{1,4}', replace: UA-0000-0}
      - {match: 'javascript', replace: JS, flags: i}
      - {match: '\bcallback\b', replace: cb}
      - {match: 'href="http://([^"]*)"', replace: 'href="https://$1"'}
      - {match: '<meta name="[a-z-]+" content="[^"]*">', replace: ''}
      - {match: '\bdeprecated\b', replace: DEPRECATED, flags: i}
spec:
  ingressClassName: tidegate
  rules:
    - host: rules.bench
      http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: backend, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: plain, namespace: bench}
spec:
  ingressClassName: tidegate
  rules:
    - host: plain.bench
      http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: backend, port: {number: 80}}}}
---
apiVersion: v1
kind: Service
metadata: {name: backend, namespace: bench}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: backend-1, namespace: bench, labels: {kubernetes.io/service-name: backend}}
addressType: IPv4
ports: [{name: http, port: BACKEND_PORT}]
endpoints: [{addresses: ["127.0.0.1"]}]
CONF
sed -i "s/BACKEND_PORT/$BACKEND_PORT/" "$WORK/manifests/bench.yaml"

"${LOAD_CPU[@]}" nginx -c "$WORK/backend.conf" -p "$WORK" & PIDS+=($!)
"${PROXY_CPU[@]}" nginx -c "$WORK/nginx.conf" -p "$WORK" & PIDS+=($!)
"${PROXY_CPU[@]}" "$BIN/tidegate-dataplane" --control-socket "$WORK/control.sock" \
  --http-listen "127.0.0.1:$TIDEGATE_PORT" --https-listen 127.0.0.1:0 \
  --admin-listen "127.0.0.1:$ADMIN_PORT" --workers 1 --log-level warn --access-log off \
  >"$WORK/dataplane.log" 2>&1 &
PIDS+=($!)
"$BIN/tidegate-controller" --dataplane-socket "$WORK/control.sock" --manifests "$WORK/manifests" \
  --log-level warn >"$WORK/controller.log" 2>&1 & PIDS+=($!)

wait_ok "http://127.0.0.1:$BACKEND_PORT/page.html"
wait_ok "http://127.0.0.1:$NGINX_PORT/page.html"
for _ in $(seq 1 100); do
  if curl -fsS -o /dev/null -H "Host: rules.bench" "http://127.0.0.1:$TIDEGATE_PORT/page.html" \
    && curl -fsS -o /dev/null -H "Host: plain.bench" "http://127.0.0.1:$TIDEGATE_PORT/page.html"
  then break; fi
  sleep 0.1
done

# Sanity: the rules apply (and the same page goes out unchanged without them).
with=$(curl -fsS -H "Host: rules.bench" "http://127.0.0.1:$TIDEGATE_PORT/page.html" | wc -c)
without=$(curl -fsS -H "Host: plain.bench" "http://127.0.0.1:$TIDEGATE_PORT/page.html" | wc -c)
subf=$(curl -fsS "http://127.0.0.1:$NGINX_PORT/page.html" | wc -c)
if [ "$without" != "$PAGE_BYTES" ] || [ "$with" = "$PAGE_BYTES" ]; then
  echo "bench: unexpected sizes: page $PAGE_BYTES, with rules $with, without $without" >&2
  exit 1
fi
echo "bench: $PAGE ($PAGE_BYTES bytes): $with bytes with the ten rules, $subf with nginx" \
  "sub_filter (5 fixed strings)" >&2

proxy_pids() {  # name
  case $1 in
    tidegate*) pgrep -f "tidegate-dataplane --control-socket $WORK/" ;;
    nginx*) pgrep -P "$(cat "$WORK/nginx.pid")" ;;
  esac
}

# Prints "MB_per_s proxy_cpu_ms_per_page errors" for one wrk run (MB = 10^6 bytes of the page
# as the backend serves it, so that every peer is measured on the same input).
measure() {  # name port host
  local out pids u0 s0 u1 s1 hz
  hz=$(getconf CLK_TCK)
  mapfile -t pids < <(proxy_pids "$1")
  read -r u0 s0 < <(cpu_ticks "${pids[@]}")
  out=$("${LOAD_CPU[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -H "Host: $3" \
    "http://127.0.0.1:$2/page.html")
  read -r u1 s1 < <(cpu_ticks "${pids[@]}")
  echo "$out" | awk -v cpu=$((u1 - u0 + s1 - s0)) -v hz="$hz" -v bytes="$PAGE_BYTES" '
    /Requests\/sec:/ { rps = $2 }
    /requests in/ { total = $1 }
    /Non-2xx|Socket errors/ { errors = errors $0 }
    END { printf "%.0f %.2f %s\n", rps * bytes / 1e6, cpu * 1000 / hz / total,
          (errors == "" ? "none" : "yes") }'
}

declare -A MBS CPU
NAMES=(tidegate-rules tidegate-plain nginx-sub_filter)
for name in "${NAMES[@]}"; do MBS[$name]="" CPU[$name]=""; done
echo "bench: $ROUNDS round(s) of ${DURATION}s per peer, $CONNECTIONS connections" >&2
for round in $(seq 1 "$ROUNDS"); do
  for name in "${NAMES[@]}"; do
    case $name in
      tidegate-rules) port=$TIDEGATE_PORT host=rules.bench ;;
      tidegate-plain) port=$TIDEGATE_PORT host=plain.bench ;;
      nginx-sub_filter) port=$NGINX_PORT host=localhost ;;
    esac
    read -r mbs cpu errors < <(measure "$name" "$port" "$host")
    echo "bench: round $round $name: $mbs MB/s, proxy CPU $cpu ms per page, errors: $errors" >&2
    MBS[$name]+="$mbs " CPU[$name]+="$cpu "
  done
done

printf '\n%-18s %10s %22s\n' peer "MB/s" "proxy CPU ms per page"
for name in "${NAMES[@]}"; do
  printf '%-18s %10.0f %22.2f\n' "$name" "$(echo "${MBS[$name]}" | median)" \
    "$(echo "${CPU[$name]}" | median)"
done
r=$(echo "${MBS[tidegate-rules]}" | median) p=$(echo "${MBS[tidegate-plain]}" | median)
n=$(echo "${MBS[nginx-sub_filter]}" | median)
rc=$(echo "${CPU[tidegate-rules]}" | median) pc=$(echo "${CPU[tidegate-plain]}" | median)
echo
awk -v r="$r" -v p="$p" -v n="$n" -v rc="$rc" -v pc="$pc" 'BEGIN {
  printf "ratio tidegate ten rules / no rules: MB/s %.2f (target >= 0.5), CPU per page %.2f\n",
    r / p, rc / pc
  printf "ratio tidegate ten rules / nginx sub_filter (5 fixed strings): MB/s %.2f\n", r / n
}'
