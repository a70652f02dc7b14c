#!/usr/bin/env bash
# Body substitution benchmark (issues #5 and #18): two HTML pages served by nginx,
#   - sparse: a real page from a package's documentation (a match every ~500 bytes),
#   - dense: bench/dense_page.py's generated book chapter (2 MB, a match every ~85 bytes: class
#     attributes, <code>, words, links),
# each fetched through
#   - tidegate (1 worker) with the page's ten rules (domains, an ID pattern, a case-insensitive
#     word, \b words, attribute patterns; the dense set also a [Cc]argo class, <code> and every
#     class attribute),
#   - tidegate (the same worker) on a route without rules,
#   - nginx (1 worker) with sub_filter on the rules that are fixed strings (sub_filter knows no
#     regexes; it always ignores case),
# all in one run. Prints MB/s of page (input bytes) per peer, the proxy's CPU time per page, the
# replacements per page and the ratios. Target: with ten rules, at least half the throughput
# without rules, on both pages. For calibration it also prints, per page, the engine alone and
# RE2 alone running the ten rules as one leftmost-longest alternation over the page in memory
# (tests/dataplane/filters/substitution_bench_test.cc; one core, CPU time).
#
# Environment: DENSE_FIRST_RULE (the dense set's first rule, default doc\.rust-lang\.org; for
# example (?:www\.)?doc\.rust-lang\.org, the same matches without one literal prefix),
# PAGE (default /usr/share/doc/nodejs/api/all.html, 8.4 MB, from the nodejs
# package), DENSE_BYTES (the dense page's size, default 2000000), DURATION (seconds per run, default 3), ROUNDS (default 1; runs are interleaved and
# the median round is reported), CONNECTIONS (default 4), PIN=1 (default) pins the proxies to CPU
# 0 and wrk + the backend to CPU 1, TIDEGATE_BIN_DIR (default build/bin), CALIBRATE=0 skips the
# in-memory calibration (which needs tidegate-unit-tests), PAGES (default "page.html dense.html":
# the sparse and the dense page) to measure only one of them, PERF_RECORD=dir records a profile
# of each measured run there, SYSCALLS=1 / PERF_EVENTS=list count system calls / events per
# page (bench/lib.sh).
# Needs: scripts/build done (or it builds), nginx, wrk, python3 (scripts/install-deps).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

PAGE=${PAGE:-/usr/share/doc/nodejs/api/all.html}
DURATION=${DURATION:-3}
ROUNDS=${ROUNDS:-1}
CONNECTIONS=${CONNECTIONS:-4}
PIN=${PIN:-1}
BIN=${TIDEGATE_BIN_DIR:-$ROOT/build/bin}
DENSE_BYTES=${DENSE_BYTES:-2000000}
CALIBRATE=${CALIBRATE:-1}
PAGES=${PAGES:-page.html dense.html}

if [ ! -r "$PAGE" ]; then
  echo "bench: $PAGE not found (apt-get install nodejs-doc, or set PAGE to an HTML page >= 1 MB)" >&2
  exit 1
fi
if [ ! -x "$BIN/tidegate-dataplane" ] || [ ! -x "$BIN/tidegate-controller" ]; then
  scripts/install-deps
  scripts/build --target tidegate-dataplane tidegate-controller
fi
if [ "$CALIBRATE" = 1 ] && [ ! -x "$BIN/tidegate-unit-tests" ]; then
  scripts/build --target tidegate-unit-tests
fi
for tool in nginx wrk curl python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool missing; run scripts/install-deps" >&2; exit 1; }
done

BACKEND_PORT=19200 NGINX_PORT=19201 NGINX_DENSE_PORT=19202 TIDEGATE_PORT=19203 ADMIN_PORT=19204
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_setup tidegate-bench-substitution
cp "$PAGE" "$WORK/www/page.html"
python3 "$ROOT/bench/dense_page.py" "$DENSE_BYTES" >"$WORK/www/dense.html"
chmod 644 "$WORK/www/page.html" "$WORK/www/dense.html"
declare -A BYTES
BYTES[page.html]=$(stat -c %s "$WORK/www/page.html")
BYTES[dense.html]=$(stat -c %s "$WORK/www/dense.html")

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
  # The dense page's rules that are fixed strings (case ignored, as sub_filter always does).
  server {
    listen 127.0.0.1:$NGINX_DENSE_PORT;
    keepalive_requests 10000000;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Accept-Encoding "";
      sub_filter_once off;
      sub_filter 'doc.rust-lang.org' 'docs.clone.example';
      sub_filter 'cargo' 'Freight';
      sub_filter 'registry' 'index';
      sub_filter '<code>' '<code class="x">';
    }
  }
}
CONF

# The same ten rules as tests/dataplane/filters/substitution_bench_test.cc (sparse_rules() for
# rules.bench, dense_rules() for dense.bench).
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
metadata:
  name: dense
  namespace: bench
  annotations:
    tidegate.io/substitutions: |
      - {match: 'doc\.rust-lang\.org', replace: docs.clone.example}
      - {match: 'https://github\.com/([a-z0-9-]+)', replace: 'https://git.clone.example/$1'}
      - {match: '[Cc]argo', replace: Freight}
      - {match: '\bcrate\b', replace: package}
      - {match: '\bdependency\b', replace: requirement}
      - {match: 'registry', replace: index, flags: i}
      - {match: '<code>', replace: '<code class="x">'}
      - {match: 'UA-[0-9]+-[0-9]+', replace: UA-000000-1}
      - {match: 'class="[a-z-]+"', replace: 'class="c"'}
      - {match: 'href="http://([^"]*)"', replace: 'href="https://$1"'}
spec:
  ingressClassName: tidegate
  rules:
    - host: dense.bench
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
if [ -n "${DENSE_FIRST_RULE:-}" ]; then
  # The dense set's first rule written another way (docs/benchmarks.md: an alternation).
  python3 - "$WORK/manifests/bench.yaml" "$DENSE_FIRST_RULE" <<'PY'
import sys
path, rule = sys.argv[1], sys.argv[2]
text = open(path).read()
old = "- {match: 'doc\\.rust-lang\\.org',"
assert old in text, old
open(path, "w").write(text.replace(old, "- {match: '" + rule.replace("'", "''") + "',", 1))
PY
fi
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
    && curl -fsS -o /dev/null -H "Host: dense.bench" "http://127.0.0.1:$TIDEGATE_PORT/dense.html" \
    && curl -fsS -o /dev/null -H "Host: plain.bench" "http://127.0.0.1:$TIDEGATE_PORT/page.html"
  then break; fi
  sleep 0.1
done

# Sanity: the rules apply (and the same page goes out unchanged without them).
for page in page.html dense.html; do
  host=rules.bench port=$NGINX_PORT
  [ "$page" = dense.html ] && host=dense.bench port=$NGINX_DENSE_PORT
  with=$(curl -fsS -H "Host: $host" "http://127.0.0.1:$TIDEGATE_PORT/$page" | wc -c)
  without=$(curl -fsS -H "Host: plain.bench" "http://127.0.0.1:$TIDEGATE_PORT/$page" | wc -c)
  subf=$(curl -fsS "http://127.0.0.1:$port/$page" | wc -c)
  if [ "$without" != "${BYTES[$page]}" ] || [ "$with" = "${BYTES[$page]}" ]; then
    echo "bench: unexpected sizes for $page: ${BYTES[$page]}, with rules $with, without $without" >&2
    exit 1
  fi
  echo "bench: $page (${BYTES[$page]} bytes): $with bytes with the ten rules, $subf with nginx" \
    "sub_filter (its fixed strings)" >&2
done

proxy_pids() {  # name
  case ${1#dense:} in
    tidegate*) pgrep -f "tidegate-dataplane --control-socket $WORK/" ;;
    nginx*) pgrep -P "$(cat "$WORK/nginx.pid")" ;;
  esac
}

# Prints "MB_per_s proxy_cpu_ms_per_page errors" for one wrk run (MB = 10^6 bytes of the page
# as the backend serves it, so that every peer is measured on the same input).
measure() {  # name port host page
  local out pids u0 s0 u1 s1 hz
  hz=$(getconf CLK_TCK)
  mapfile -t pids < <(proxy_pids "$1")
  perf_counts_start "${pids[*]}" "$DURATION" "${1/:/-}"
  read -r u0 s0 < <(cpu_ticks "${pids[@]}")
  out=$("${LOAD_CPU[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -H "Host: $3" \
    "http://127.0.0.1:$2/$4")
  read -r u1 s1 < <(cpu_ticks "${pids[@]}")
  echo "$out" | awk -v cpu=$((u1 - u0 + s1 - s0)) -v hz="$hz" -v bytes="${BYTES[$4]}" '
    /Requests\/sec:/ { rps = $2 }
    /requests in/ { total = $1 }
    /Non-2xx|Socket errors/ { errors = errors $0 }
    END { printf "%.0f %.2f %s ", rps * bytes / 1e6, cpu * 1000 / hz / total,
          (errors == "" ? "none" : "yes") }'
  # System calls (SYSCALLS=1) or perf events (PERF_EVENTS) per page, or "-".
  perf_counts_finish "$(echo "$out" | awk '/requests in/ { print $1 }')"
}

declare -A MBS CPU
NAMES=()
for page in $PAGES; do
  prefix=""
  [ "$page" = dense.html ] && prefix="dense:"
  NAMES+=("${prefix}tidegate-rules" "${prefix}tidegate-plain" "${prefix}nginx-sub_filter")
done
for name in "${NAMES[@]}"; do MBS[$name]="" CPU[$name]=""; done
echo "bench: $ROUNDS round(s) of ${DURATION}s per peer, $CONNECTIONS connections" >&2
for round in $(seq 1 "$ROUNDS"); do
  for name in "${NAMES[@]}"; do
    case $name in
      tidegate-rules) port=$TIDEGATE_PORT host=rules.bench page=page.html ;;
      tidegate-plain) port=$TIDEGATE_PORT host=plain.bench page=page.html ;;
      nginx-sub_filter) port=$NGINX_PORT host=localhost page=page.html ;;
      dense:tidegate-rules) port=$TIDEGATE_PORT host=dense.bench page=dense.html ;;
      dense:tidegate-plain) port=$TIDEGATE_PORT host=plain.bench page=dense.html ;;
      dense:nginx-sub_filter) port=$NGINX_DENSE_PORT host=localhost page=dense.html ;;
    esac
    read -r mbs cpu errors counts < <(measure "$name" "$port" "$host" "$page")
    echo "bench: round $round $name: $mbs MB/s, proxy CPU $cpu ms per page, errors: $errors" \
      "$([ "$counts" != - ] && echo ", per page: $counts")" >&2
    MBS[$name]+="$mbs " CPU[$name]+="$cpu "
  done
done

# Calibration, in memory on the proxies' CPU: a plain copy, RE2 alone (the ten rules as one
# alternation, a search per match), the engine alone; and the replacements per page.
declare -A CAL
if [ "$CALIBRATE" = 1 ]; then
  for page in $PAGES; do
    rules=sparse
    [ "$page" = dense.html ] && rules=dense
    CAL[$page]=$(TIDEGATE_SUBST_BENCH_FILE="$WORK/www/$page" TIDEGATE_SUBST_BENCH_RULES=$rules \
      "${PROXY_CPU[@]}" "$BIN/tidegate-unit-tests" --gtest_also_run_disabled_tests \
      --gtest_filter='SubstitutionBench.DISABLED_TenRulesOnAnHtmlPage' |
      awk '/replacements/ { r = $6 } /RE2 alone/ { re2 = $3 } /streamed/ { e = $4 }
           END { print r, re2, e }')
  done
fi

for page in $PAGES; do
  prefix=""
  [ "$page" = dense.html ] && prefix="dense:"
  echo
  echo "$page (${BYTES[$page]} bytes)"
  printf '%-18s %10s %22s\n' peer "MB/s" "proxy CPU ms per page"
  for peer in tidegate-rules tidegate-plain nginx-sub_filter; do
    name=$prefix$peer
    printf '%-18s %10.0f %22.2f\n' "$peer" "$(echo "${MBS[$name]}" | median)" \
      "$(echo "${CPU[$name]}" | median)"
  done
  r=$(echo "${MBS[${prefix}tidegate-rules]}" | median)
  p=$(echo "${MBS[${prefix}tidegate-plain]}" | median)
  n=$(echo "${MBS[${prefix}nginx-sub_filter]}" | median)
  rc=$(echo "${CPU[${prefix}tidegate-rules]}" | median)
  pc=$(echo "${CPU[${prefix}tidegate-plain]}" | median)
  awk -v r="$r" -v p="$p" -v n="$n" -v rc="$rc" -v pc="$pc" 'BEGIN {
    printf "ratio tidegate ten rules / no rules: MB/s %.2f (target >= 0.5), CPU per page %.2f\n",
      r / p, rc / pc
    printf "ratio tidegate ten rules / nginx sub_filter (its fixed strings): MB/s %.2f\n", r / n
  }'
  if [ -n "${CAL[$page]:-}" ]; then
    read -r reps re2 engine <<<"${CAL[$page]}"
    echo "replacements per page: $reps; in memory, one core: engine alone $engine MB/s," \
      "RE2 alone (one alternation, a search per match) $re2 MB/s"
  fi
done
