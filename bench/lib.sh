# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables set here are used by the sourcing script
# Shared by the bench/*.sh scripts (sourced, not run). Sets up the work folder, the process list
# cleaned up on exit, CPU pinning, and small helpers.
# Needs: PIN (1 pins the proxy under test to CPU 0, load and backend to CPU 1).

# bench_setup NAME: WORK (a temp folder removed on exit), PIDS (killed on exit),
# PROXY_CPU / LOAD_CPU (taskset prefixes, empty without pinning), WORK/www for the backend.
bench_setup() {
  WORK=$(mktemp -d "/tmp/$1.XXXXXX")
  PIDS=()
  trap bench_cleanup EXIT INT TERM
  PROXY_CPU=() LOAD_CPU=()
  if [ "${PIN:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then
    PROXY_CPU=(taskset -c 0) LOAD_CPU=(taskset -c 1)
  fi
  mkdir -p "$WORK/www" "$WORK/manifests"
  chmod 755 "$WORK" "$WORK/www"  # nginx workers drop root privileges
}

# shellcheck disable=SC2317  # invoked through trap
bench_cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}

wait_ok() {  # url: waits up to 10 s for a 2xx (certificates not checked)
  for _ in $(seq 1 100); do
    if curl -kfsS -o /dev/null "$1" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "bench: $1 does not answer" >&2
  tail -n 20 "$WORK"/*.log >&2 || true
  exit 1
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# CPU time of processes, from /proc (clock ticks), to report CPU per request: unlike requests/s,
# it stays meaningful when other work shares the machine.
cpu_ticks() {  # pids...: user and system clock ticks, summed
  local u=0 s=0 pid f
  for pid in "$@"; do
    read -r -a f <"/proc/$pid/stat" || continue
    # Fields 14 and 15 (utime, stime); the command name (field 2) has no spaces here.
    u=$((u + f[13])) s=$((s + f[14]))
  done
  echo "$u $s"
}

# With SYSCALLS=1, counts the system calls of processes over a wrk run (perf stat on the
# syscalls:sys_enter_* tracepoints; needs perf and root); PERF_EVENTS=list counts those perf
# events (for example cycles:u,cycles:k,instructions:u,context-switches); PERF_RECORD=dir records
# a call-graph profile of each measured run to dir/NAME-N.data (read it with `perf report -i`);
# PERF_CALLGRAPH sets perf's call-graph option (default -g, frame pointers; "--call-graph
# dwarf,16384" also sees through libc's functions, which have none).
# perf_counts_start "PID ..." SECONDS [NAME]; then perf_counts_finish TOTAL_REQUESTS prints
# "total/request(name:count,...)" and/or "events/request(...)", or "-" when neither is asked for.
# Both in the same shell (perf_counts_finish waits for perf, its child): not in $(...).
perf_counts_start() {
  local pids
  pids=$(echo "$1" | tr ' ' ',')
  PERF_SYSCALLS_PID="" PERF_EVENTS_PID="" PERF_RECORD_PID=""
  if [ -n "${PERF_RECORD:-}" ]; then
    mkdir -p "$PERF_RECORD"
    local n=1
    while [ -e "$PERF_RECORD/${3:-proxy}-$n.data" ]; do n=$((n + 1)); done
    local callgraph
    read -r -a callgraph <<<"${PERF_CALLGRAPH:--g}"
    perf record -q "${callgraph[@]}" -p "$pids" -o "$PERF_RECORD/${3:-proxy}-$n.data" \
      -- sleep "$(($2 + 1))" >/dev/null 2>&1 &
    PERF_RECORD_PID=$!
  fi
  if [ "${SYSCALLS:-0}" = 1 ]; then
    perf stat -x, -e 'syscalls:sys_enter_*' -p "$pids" -o "$WORK/syscalls.txt" \
      -- sleep "$(($2 + 1))" 2>/dev/null &
    PERF_SYSCALLS_PID=$!
  fi
  if [ -n "${PERF_EVENTS:-}" ]; then
    perf stat -x, -e "$PERF_EVENTS" -p "$pids" -o "$WORK/events.txt" \
      -- sleep "$(($2 + 1))" 2>/dev/null &
    PERF_EVENTS_PID=$!
  fi
  if [ -n "$PERF_SYSCALLS_PID$PERF_EVENTS_PID$PERF_RECORD_PID" ]; then sleep 0.5; fi
}

perf_counts_finish() {  # total requests of the run
  local out=""
  if [ -n "$PERF_RECORD_PID" ]; then wait "$PERF_RECORD_PID" || true; fi
  if [ -n "$PERF_SYSCALLS_PID" ]; then
    wait "$PERF_SYSCALLS_PID" || true
    out=$(awk -F, -v t="$1" '$1 + 0 > 0 {
        sub("syscalls:sys_enter_", "", $3); n[$3] = $1; sum += $1 }
      END { line = sprintf("%.2f/request(", sum / t)
            for (k in n) if (n[k] / t >= 0.05) line = line sprintf("%s:%.2f,", k, n[k] / t)
            print line ")" }' "$WORK/syscalls.txt")
  fi
  if [ -n "$PERF_EVENTS_PID" ]; then
    wait "$PERF_EVENTS_PID" || true
    out+=$(awk -F, -v t="$1" '$1 + 0 > 0 { line = line sprintf("%s:%.1f,", $3, $1 / t) }
      END { print "events/request(" line ")" }' "$WORK/events.txt")
  fi
  echo "${out:--}"
}

# tcp_segments PID...: one line per established TCP socket of those processes, "local peer
# segs_out data_segs_out segs_in data_segs_in" (the kernel's per-socket counters, ss -ti). What
# a socket sent that was not data (segs_out - data_segs_out) is pure ACKs (and SYN/FIN): each a
# packet through loopback that its sender's CPU pays for.
tcp_segments() {
  local pids
  pids=" $* "
  ss -tinpH state established 2>/dev/null | awk -v pids="$pids" '
    /users:\(/ {
      keep = 0
      if (match($0, /pid=[0-9]+/)) keep = index(pids, " " substr($0, RSTART + 4, RLENGTH - 4) " ") > 0
      local = $3; peer = $4; next
    }
    keep {
      so = 0; dso = 0; si = 0; dsi = 0
      for (i = 1; i <= NF; i++) {
        split($i, kv, ":")
        if (kv[1] == "segs_out") so = kv[2]
        else if (kv[1] == "data_segs_out") dso = kv[2]
        else if (kv[1] == "segs_in") si = kv[2]
        else if (kv[1] == "data_segs_in") dsi = kv[2]
      }
      print local, peer, so, dso, si, dsi
      keep = 0
    }'
}

# tcp_segments_per_request BEFORE AFTER LISTEN_PORT: from two tcp_segments listings, the data
# segments sent to clients per request (a request: a data segment received on the listening
# port's side) and, on each side, the pure ACKs sent per data segment sent. The pure ACKs are
# counted against the data of the same sockets, because a socket closed between the two listings
# drops out of both (nginx closes an upstream connection every 1,000 requests by default).
tcp_segments_per_request() {
  awk -v port="$3" '
    FILENAME == ARGV[1] { so[$1 " " $2] = $3; dso[$1 " " $2] = $4; dsi[$1 " " $2] = $6; next }
    {
      k = $1 " " $2
      side = ($1 ~ ":" port "$") ? "c" : "u"
      data[side] += $4 - dso[k]; pure[side] += ($3 - $4) - (so[k] - dso[k])
      if (side == "c") req += $6 - dsi[k]
    }
    END {
      if (req == 0 || data["u"] == 0) { print "-"; exit }
      printf "segments(client: %.2f data per request, %.3f pure ACKs per data; upstream: %.3f" \
        " pure ACKs per data)\n", data["c"] / req, pure["c"] / data["c"], pure["u"] / data["u"]
    }' "$1" "$2"
}

write_backend_conf() {  # [http-lines]: $WORK/backend.conf, nginx serving $WORK/www on $BACKEND_PORT
  cat >"$WORK/backend.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/backend.pid;
error_log $WORK/backend-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  ${1:-}
  server {
    listen 127.0.0.1:$BACKEND_PORT backlog=4096;
    keepalive_requests 10000000;
    location / { root $WORK/www; }
  }
}
CONF
}

write_bench_manifest() {  # file backend_port: one Ingress for every host and path to one backend
  cat >"$1" <<CONF
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: bench, namespace: bench}
spec:
  ingressClassName: tidegate
  rules:
    - http:
        paths:
          - path: /
            pathType: Prefix
            backend: {service: {name: backend, port: {number: 80}}}
---
apiVersion: v1
kind: Service
metadata: {name: backend, namespace: bench}
spec:
  ports: [{name: http, port: 80, targetPort: $2}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: backend-1, namespace: bench, labels: {kubernetes.io/service-name: backend}}
addressType: IPv4
ports: [{name: http, port: $2}]
endpoints: [{addresses: ["127.0.0.1"]}]
CONF
}

# nginx's proxying location for the peers, to upstream "backend", as ingress-nginx's template
# sets it up where it costs work: the request fields tidegate sets too (Host, X-Request-ID,
# X-Real-IP, X-Forwarded-For/-Host/-Proto), keep-alive to the backend.
nginx_proxy_location() {
  cat <<CONF
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$host;
      proxy_set_header X-Request-ID \$request_id;
      proxy_set_header X-Real-IP \$remote_addr;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Host \$host;
      proxy_set_header X-Forwarded-Proto \$scheme;
    }
CONF
}

# wrk_cpu "PID ..." WRK_ARGS...: one wrk run (on the load CPU) with the CPU time the given
# processes spent over it. Prints "responses_per_second errors user_us system_us" (per response;
# errors: none or yes).
wrk_cpu() {
  local pids out u0 s0 u1 s1 hz
  read -r -a pids <<<"$1"
  shift
  hz=$(getconf CLK_TCK)
  read -r u0 s0 < <(cpu_ticks "${pids[@]}")
  out=$("${LOAD_CPU[@]}" wrk "$@")
  read -r u1 s1 < <(cpu_ticks "${pids[@]}")
  echo "$out" | awk -v du=$((u1 - u0)) -v ds=$((s1 - s0)) -v hz="$hz" '
    /Requests\/sec:/ { rps = $2 }
    /requests in/ { total = $1 }
    /Non-2xx|Socket errors/ { errors = errors $0 }
    END { printf "%s %s %.1f %.1f\n", rps, (errors == "" ? "none" : "yes"),
          du * 1e6 / hz / total, ds * 1e6 / hz / total }'
}
