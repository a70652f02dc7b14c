"""The body of bench/propagation.sh (which documents it)."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "e2e"))
sys.path.insert(0, str(ROOT / "e2e" / "kube"))

import harness  # noqa: E402
import kubecluster  # noqa: E402

N = int(os.environ.get("N", "10000"))
CHANGES = int(os.environ.get("CHANGES", "200"))
RELOADS = int(os.environ.get("RELOADS", "5"))
GAP_MS = float(os.environ.get("GAP_MS", "50"))
BURST = int(os.environ.get("BURST", "50"))
BURST_WINDOW_MS = float(os.environ.get("BURST_WINDOW_MS", "100"))
BURSTS = int(os.environ.get("BURSTS", "5"))
WRITERS = int(os.environ.get("WRITERS", "8"))
# Other builds' bin folders (separated by ':'): their controllers and data planes are measured
# too, against the same API server and objects, right after the first (a before/after comparison
# under the same load).
COMPARE_BIN_DIR = os.environ.get("COMPARE_BIN_DIR", "")
# Starts of each build (and of nginx) timed; the changes are measured after the last one.
STARTS = int(os.environ.get("STARTS", "1"))
# The N objects are created once and etcd's data is kept here (one folder per N and object
# shape), so that a later run at the same N starts from them: at N=100,000 creating them takes
# longer than the measurements. CACHE=0 creates them afresh and keeps nothing.
CACHE = os.environ.get("CACHE", "1") != "0"
CACHE_DIR = Path(os.environ.get("PROPAGATION_CACHE",
                                Path.home() / ".cache" / "tidegate" / "propagation"))
SHAPE = "v1-headless"  # change when the created objects change
NS = "bench"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def summary(values: list[float]) -> str:
    if not values:
        return "n/a"
    return (f"p50 {statistics.median(values):.1f} ms, p99 {pct(values, 99):.1f} ms, "
            f"max {max(values):.1f} ms")


def slice_for(i: int, backend: harness.Backend) -> dict:
    return harness.endpoint_slice(f"app{i}-1", f"app{i}", [backend.host], backend.port,
                                  namespace=NS)


def nodelay(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Api:
    """One persistent HTTPS connection to the API server (the TLS handshake is paid once, not
    inside the timed writes)."""

    def __init__(self, cluster: kubecluster.Cluster):
        u = urllib.parse.urlsplit(cluster.server)
        self.host, self.port = u.hostname, u.port
        self.ctx = cluster._ssl()
        self.conn: http.client.HTTPSConnection | None = None

    def connect(self) -> None:
        self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx,
                                                timeout=30)
        self.conn.connect()
        nodelay(self.conn.sock)

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict, float,
                                                                               float]:
        """(status, answer, wall time sent, wall time answered)."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {kubecluster.TOKEN}",
                   "Content-Type": "application/json", "Accept": "application/json"}
        for attempt in (0, 1):
            if self.conn is None:
                self.connect()
            try:
                sent = time.time()
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                raw = r.read()
                answered = time.time()
                return r.status, json.loads(raw or b"{}"), sent, answered
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


class Probe:
    """Requests through the data plane on one keep-alive connection, back to back."""

    def __init__(self, port: int):
        self.port = port
        self.conn: http.client.HTTPConnection | None = None
        self.rtts: list[float] = []

    def backend(self, host: str) -> tuple[str | None, float]:
        """The X-Backend of a 200 answer for `host` (None otherwise), and the wall time the
        answer was read (an upper bound of when the data plane served it)."""
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                self.conn.connect()
                nodelay(self.conn.sock)
            try:
                sent = time.time()
                self.conn.request("GET", "/", headers={"Host": host})
                r = self.conn.getresponse()
                r.read()
                answered = time.time()
                self.rtts.append((answered - sent) * 1000)
                if r.will_close:
                    self.conn.close()
                    self.conn = None
                return (r.getheader("X-Backend") if r.status == 200 else None), answered
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def wait(self, host: str, backend: str, timeout: float = 10) -> float:
        """Probes until `host` answers from `backend`; returns the wall time of that answer."""
        deadline = time.monotonic() + timeout
        while True:
            name, at = self.backend(host)
            if name == backend:
                return at
            if time.monotonic() > deadline:
                raise AssertionError(f"{host} not on {backend} after {timeout} s (last: {name})")


# The controller's debug lines (controller/kube/reflector.cc, controller/sync/sync_loop.cc).
EVENT_RE = re.compile(r"watch EndpointSlice in \S+: event \d+ at (\d+) read at t=(\d+) us, "
                      r"handled in (\d+) us")
ACK_RE = re.compile(r"sync: version \d+ acked at t=(\d+) us: batch waited (\d+) us, build (\d+) "
                    r"us, push (\d+) us")


def controller_timings(log: str) -> tuple[dict[str, tuple[float, float]], list[tuple]]:
    """{resourceVersion: (wall s read, handled ms)} and [(wall s acked, waited, build, push ms)]."""
    events = {m.group(1): (int(m.group(2)) / 1e6, int(m.group(3)) / 1000)
              for m in EVENT_RE.finditer(log)}
    acks = [(int(m.group(1)) / 1e6, int(m.group(2)) / 1000, int(m.group(3)) / 1000,
             int(m.group(4)) / 1000) for m in ACK_RE.finditer(log)]
    return events, acks


def vm_kb(pid: int, field: str) -> int:
    """A /proc/PID/status field in kB (0 once the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class RssSampler:
    """Samples the RSS of some processes every 10 ms on a thread: the peak of each and of their
    sum (VmHWM is read at the end too: the kernel's own peak, between samples as well)."""

    def __init__(self, pids: dict[str, int]):
        self.pids = pids
        self.peak = {name: 0 for name in pids}
        self.peak_sum = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            total = 0
            for name, pid in self.pids.items():
                kb = vm_kb(pid, "VmRSS")
                self.peak[name] = max(self.peak[name], kb)
                total += kb
            self.peak_sum = max(self.peak_sum, total)
            time.sleep(0.01)

    def stop(self) -> dict[str, float]:
        self.stopping.set()
        self.thread.join()
        return {name: vm_kb(pid, "VmHWM") / 1024 for name, pid in self.pids.items()}


# The controller's and data plane's log lines about a start (controller/kube/reflector.cc,
# controller/main.cc, controller/push/transport.cc, controller/sync/sync_loop.cc,
# dataplane/control/control_server.cc); the timing lines are debug-level, and a build from before
# they existed prints fewer of them.
STAMP = r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})\S*"
LISTED_RE = re.compile(STAMP + r".*listed (\d+) (\S+)(?: in \S+)? at resourceVersion", re.M)
LIST_TIMING_RE = re.compile(r"list (\S+)(?: in \S+)? timing: (\d+) pages, (\d+) bytes in (\d+) "
                            r"ms: waiting for pages (\d+) ms, decoding (\d+) ms \(CPU (\d+) ms\), "
                            r"storing (\d+) ms(?:; (protobuf|JSON|protobuf and JSON))?")
LISTS_DONE_RE = re.compile(STAMP + r".*initial lists complete in (\d+) ms", re.M)
TRANSLATION_RE = re.compile(r"translation \((full|endpoints only), (\d+) upstreams updated\) in "
                            r"(\d+) us(?: \((\d+) minor page faults\))?")
AHEAD_RE = re.compile(STAMP + r".*translation ahead of the EndpointSlices' list in (\d+) us"
                      r"(?: \((\d+) minor page faults\))?", re.M)
ENCODE_RE = re.compile(r"snapshot of (\d+) bytes: encoded in (\d+) ms, sent and answered in "
                       r"(\d+) ms")
FIRST_ACK_RE = re.compile(STAMP + r".*version \d+ acked at t=\d+ us: batch waited \d+ us, build "
                          r"(\d+) us, push (\d+) us", re.M)
DP_SNAPSHOT_RE = re.compile(r"snapshot version \d+ \((\d+) bytes, (\d+) hosts\): decoded in (\d+) "
                            r"ms, built and published in (\d+) ms"
                            r"(?: \((\d+) \+ (\d+) minor page faults\))?")


def stamp_s(text: str) -> float:
    """A log line's timestamp (UTC) as seconds since the epoch."""
    import datetime
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def start_phases(ctl_log: str, dp_log: str, started_wall: float) -> list[str]:
    """The phases of one start, as lines to print (times from the controller's start)."""
    out = []
    for m in LISTED_RE.finditer(ctl_log):
        if int(m.group(2)) > 0:
            out.append(f"listed {m.group(2)} {m.group(3)} at "
                       f"+{(stamp_s(m.group(1)) - started_wall) * 1000:.0f} ms")
    for m in LIST_TIMING_RE.finditer(ctl_log):
        if int(m.group(3)) > 1000:
            out.append(f"  {m.group(1)}: {m.group(2)} pages, {int(m.group(3)) / 1e6:.1f} MB in "
                       f"{m.group(4)} ms: waiting for pages {m.group(5)} ms, decoding "
                       f"{m.group(6)} ms (CPU {m.group(7)} ms), storing {m.group(8)} ms"
                       + (f"; {m.group(9)}" if m.group(9) else ""))
    if m := LISTS_DONE_RE.search(ctl_log):
        out.append(f"initial lists complete at +{(stamp_s(m.group(1)) - started_wall) * 1000:.0f}"
                   f" ms ({m.group(2)} ms after the reflectors started)")
    if m := AHEAD_RE.search(ctl_log):
        # Made while the EndpointSlices were still listed (controller/main.cc); the first build
        # then only adds their upstreams.
        faults = f" ({m.group(3)} page faults)" if m.group(3) else ""
        out.append(f"translation ahead of the EndpointSlices' list, done at "
                   f"+{(stamp_s(m.group(1)) - started_wall) * 1000:.0f} ms: "
                   f"{int(m.group(2)) / 1000:.0f} ms{faults}")
    if m := TRANSLATION_RE.search(ctl_log):
        what = ("first translation" if m.group(1) == "full"
                else f"first build: the slices' {m.group(2)} upstreams")
        faults = f" ({m.group(4)} page faults)" if m.group(4) else ""
        out.append(f"{what} {int(m.group(3)) / 1000:.0f} ms{faults}")
    if m := ENCODE_RE.search(ctl_log):
        out.append(f"first snapshot: {int(m.group(1)) / 1e6:.1f} MB encoded in {m.group(2)} ms, "
                   f"sent and answered in {m.group(3)} ms")
    if m := DP_SNAPSHOT_RE.search(dp_log):
        faults = f" ({m.group(5)} + {m.group(6)} page faults)" if m.group(5) else ""
        out.append(f"  data plane: decoded in {m.group(3)} ms, built and published in "
                   f"{m.group(4)} ms{faults}")
    if m := FIRST_ACK_RE.search(ctl_log):
        out.append(f"first push acknowledged at +{(stamp_s(m.group(1)) - started_wall) * 1000:.0f}"
                   f" ms (build {int(m.group(2)) / 1000:.0f} ms, push to ACK "
                   f"{int(m.group(3)) / 1000:.0f} ms)")
    return out


def cpu_s(pid: int) -> float:
    """CPU time (user + system) a process has used so far, in seconds (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serving(port: int, host: str, backend: str) -> bool:
    """One request on a new connection: `host` answers 200 from `backend`."""
    try:
        r = harness.request(port, "GET", "/", host, timeout=5.0)
    except OSError:
        return False
    return r.status == 200 and r.header("X-Backend") == backend


def wait_serving(port: int, host: str, backend: str, timeout: float) -> float:
    """Polls every 10 ms until `host` is served from `backend`; the monotonic time it was. (Each
    probe is a new connection: a few % of a core, taken from what it measures.)"""
    deadline = time.monotonic() + timeout
    while not serving(port, host, backend):
        if time.monotonic() > deadline:
            raise AssertionError(f"{host} not served from {backend} after {timeout} s")
        time.sleep(0.01)
    return time.monotonic()


def start_stack(cluster: kubecluster.Cluster, stack: harness.Stack, log_path: Path, bin_dir: Path,
                on: dict[int, str], label: str) -> tuple[float, float, float]:
    """Starts the data plane and a controller from `bin_dir` together (as a new replica's pod
    would), and times them until the last host is served: (seconds, peak RSS of the two
    together, RSS 2 s after) in MB; prints the phases."""
    # The controller starts after the objects exist: its first push holds all of them. Its
    # debug log times the start's phases and each watch event and push (read below).
    stack.controller = kubecluster.KubeController(
        log_path, stack.dataplane.socket_path, cluster.kubeconfig,
        ["--watch-namespace", NS, "--log-level", "debug"])
    stack.controller.argv[0] = str(bin_dir / "tidegate-controller")
    load = os.getloadavg()[0]
    api_cpu = cpu_s(cluster.apiserver.pid) + cpu_s(cluster.etcd.pid)
    own_cpu = time.process_time()
    t0 = time.monotonic()
    t0_wall = time.time()
    stack.dataplane.start()
    stack.controller.start()
    rss = RssSampler({"controller": stack.controller.pid, "data plane": stack.dataplane.pid})
    served = wait_serving(stack.port, f"h{N - 1}.example", on[N - 1], 600)
    seconds = served - t0
    # Who used the two cores meanwhile (the rest: other processes of the machine).
    cpu = (f"controller {cpu_s(stack.controller.pid):.2f} s, data plane "
           f"{cpu_s(stack.dataplane.pid):.2f} s, API server + etcd "
           f"{cpu_s(cluster.apiserver.pid) + cpu_s(cluster.etcd.pid) - api_cpu:.2f} s, this "
           f"script's probes {time.process_time() - own_cpu:.2f} s")
    # Every host, not only the last one (a sample: one request each would take long).
    for i in range(0, N, max(1, N // 50)):
        assert serving(stack.port, f"h{i}.example", on[i]), f"h{i}.example not served"
    time.sleep(2)  # after the start: what it settles to
    hwm = rss.stop()
    after = {"controller": rss_mb(stack.controller.pid), "data plane": rss_mb(stack.dataplane.pid)}
    print(f"\n{label}: data plane and controller started -> serving all {N} hosts: "
          f"{seconds:.2f} s (load average {load:.1f} before, {os.getloadavg()[0]:.1f} after)")
    print(f"  CPU used until then: {cpu}")
    for line in start_phases(stack.controller.log(), stack.dataplane.log(), t0_wall):
        print(f"  {line}")
    peak = rss.peak_sum / 1024
    print(f"  RSS during the start: peak {peak:.0f} MB together (controller "
          f"{hwm['controller']:.0f} MB, data plane {hwm['data plane']:.0f} MB at their own peaks); "
          f"2 s after: controller {after['controller']:.0f} MB, data plane "
          f"{after['data plane']:.0f} MB")
    return seconds, peak, sum(after.values())


def measure(cluster: kubecluster.Cluster, stack: harness.Stack, on: dict[int, str],
            backends: dict[str, harness.Backend], run_label: str) -> None:
    """With the stack serving, times isolated changes, back-to-back changes and bursts."""
    a = backends["A"]
    writer = Api(cluster)
    probe = Probe(stack.port)

    def move(i: int, w: Api) -> tuple[str, str, float, float]:
        """PUTs host i's slice to the other backend: (target, resourceVersion, sent,
        answered)."""
        target = "B" if on[i] == "A" else "A"
        on[i] = target
        status, body, sent, answered = w.call(
            "PUT", f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices/app{i}-1",
            slice_for(i, backends[target]))
        assert status == 200, (status, body)
        return target, body["metadata"]["resourceVersion"], sent, answered

    def serial(label: str, gap_ms: float, first: int) -> None:
        """CHANGES changes one at a time, each `gap_ms` after the previous one was served."""
        log_from = stack.controller.log_path.stat().st_size
        loads, rows = [], []
        for k in range(CHANGES):
            i = ((first + k) * 7919) % N  # spread over the hosts
            if gap_ms:
                time.sleep(gap_ms / 1000)
            target, rv, sent, answered = move(i, writer)
            served = probe.wait(f"h{i}.example", target)
            rows.append((rv, sent, answered, served))
            if k % 20 == 0:
                loads.append(os.getloadavg()[0])
        time.sleep(0.2)  # the last lines reach the log
        events, acks = controller_timings(stack.controller.log(log_from))
        total = [(s - t) * 1000 for _, t, _, s in rows]
        put = [(r - t) * 1000 for _, t, r, _ in rows]
        after = [(s - r) * 1000 for _, _, r, s in rows]
        delivery, handled, waited, build, push, ack_to_probe = [], [], [], [], [], []
        for rv, _, answered, served in rows:
            if rv not in events:
                continue
            read, handle_ms = events[rv]
            delivery.append((read - answered) * 1000)
            handled.append(handle_ms)
            ack = next((x for x in acks if x[0] >= read), None)
            if ack is None:
                continue
            waited.append(ack[1])
            build.append(ack[2])
            push.append(ack[3])
            ack_to_probe.append((served - ack[0]) * 1000)
        print(f"\n{label}{run_label} ({CHANGES} changes, {N} Ingresses, load average "
              f"{min(loads):.1f}-{max(loads):.1f}):")
        print(f"  EndpointSlice PUT sent -> data plane serving: {summary(total)}")
        print(f"  the PUT's own round trip (API server + etcd): {summary(put)}")
        print(f"  PUT answered -> data plane serving:           {summary(after)}")
        print(f"  PUT answered -> watch event read by the controller: {summary(delivery)} "
              f"({len(delivery)} matched)")
        print(f"  controller: event decoded and stored {summary(handled)}")
        print(f"  controller: batch wait {summary(waited)}; build {summary(build)}; "
              f"push to ACK {summary(push)}")
        print(f"  ACK -> probe answer: {summary(ack_to_probe)} (probe round trip "
              f"{summary(probe.rtts[-200:])})")

    serial(f"isolated changes, {GAP_MS:.0f} ms apart", GAP_MS, 0)
    serial("back-to-back changes (each written as soon as the previous one is served)", 0,
           CHANGES)

    # Bursts: BURST slices written within BURST_WINDOW_MS by WRITERS connections; the time
    # until all of them are served. The controller handles the watch's events in
    # resourceVersion order, so the slice written last (highest resourceVersion) is served
    # last: probe it, then check the others.
    writers = [Api(cluster) for _ in range(WRITERS)]
    for w in writers:
        w.connect()
    totals, after_last, spans, burst_pushes, loads = [], [], [], [], []
    for n in range(BURSTS):
        time.sleep(0.5)
        log_from = stack.controller.log_path.stat().st_size
        hosts = [((2 * CHANGES + n * BURST + j) * 7919) % N for j in range(BURST)]
        start = time.time() + 0.01
        results: list = [None] * BURST
        lock = threading.Lock()
        free = list(writers)

        def write(j: int) -> None:
            time.sleep(max(0.0, start + j * BURST_WINDOW_MS / 1000 / BURST - time.time()))
            with lock:
                w = free.pop()
            try:
                results[j] = move(hosts[j], w)
            finally:
                with lock:
                    free.append(w)

        with concurrent.futures.ThreadPoolExecutor(WRITERS) as pool:
            list(pool.map(write, range(BURST)))
        first_sent = min(r[2] for r in results)
        last_answered = max(r[3] for r in results)
        last = max(range(BURST), key=lambda j: int(results[j][1]))
        served = probe.wait(f"h{hosts[last]}.example", results[last][0])
        for j in range(BURST):
            # Served already: no later than the last one (the order of the events); else
            # (not expected) its own time counts.
            name, _ = probe.backend(f"h{hosts[j]}.example")
            if name != results[j][0]:
                served = max(served, probe.wait(f"h{hosts[j]}.example", results[j][0]))
        time.sleep(0.2)
        _, acks = controller_timings(stack.controller.log(log_from))
        burst_pushes.append(len(acks))
        totals.append((served - first_sent) * 1000)
        after_last.append((served - last_answered) * 1000)
        spans.append((last_answered - first_sent) * 1000)
        loads.append(os.getloadavg()[0])
    print(f"\nbursts{run_label} of {BURST} EndpointSlice changes written within {BURST_WINDOW_MS:.0f} ms "
          f"by {WRITERS} connections ({BURSTS} bursts, load average "
          f"{min(loads):.1f}-{max(loads):.1f}):")
    print(f"  writes (first sent -> last answered): {summary(spans)}")
    print(f"  first write sent -> all {BURST} served: {summary(totals)}")
    print(f"  last write answered -> all served:   {summary(after_last)}")
    print(f"  pushes per burst: {burst_pushes}")

    ctl_mb, dp_mb = rss_mb(stack.controller.pid), rss_mb(stack.dataplane.pid)
    print(f"\nRSS: controller {ctl_mb:.0f} MB, data plane {dp_mb:.0f} MB, "
          f"together {ctl_mb + dp_mb:.0f} MB")


def keep(cluster: kubecluster.Cluster, cached: Path, port: int) -> None:
    """Copies etcd's data (compacted and defragmented, etcd stopped) to `cached`, then starts
    the cluster again."""
    t = time.monotonic()
    cluster.compact_etcd()
    cluster.defragment_etcd()
    cluster.shutdown()
    partial = cached.with_name(cached.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(cluster.root / "etcd", partial / "etcd")
    (partial / "port").write_text(f"{port}\n")
    shutil.rmtree(cached, ignore_errors=True)
    partial.rename(cached)
    cluster.start()
    print(f"etcd's data kept in {cached} for the next run at N={N} "
          f"({time.monotonic() - t:.0f} s)")


def main() -> int:
    err = kubecluster.enter_test_netns()
    if err:
        print(f"propagation: {err}", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="tg-propagation-"))
    cluster = kubecluster.Cluster(kubecluster.build(), work / "cluster")
    cached = CACHE_DIR / f"n{N}-{SHAPE}"
    a_host, b_host = f"{kubecluster.BACKEND_NET}.1", f"{kubecluster.BACKEND_NET}.2"
    from_cache = CACHE and (cached / "port").exists()
    if from_cache:
        # etcd's data from an earlier run at this N (the slices point at the port it used).
        shutil.copytree(cached / "etcd", cluster.root / "etcd")
        port = int((cached / "port").read_text())
    else:
        port = harness.free_port(a_host)
    cluster.start()
    a = harness.Backend("A", a_host, port, record=False)
    b = harness.Backend("B", b_host, port, record=False)
    backends = {"A": a, "B": b}
    stack = None
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    try:
        t0 = time.monotonic()
        local = threading.local()

        def api() -> Api:
            if not hasattr(local, "api"):
                local.api = Api(cluster)
            return local.api

        def headless(svc: dict) -> dict:
            # No ClusterIP: the data plane sends to the slices' endpoints either way, and the
            # API server's address allocation (an IPAddress object per Service) is not what is
            # measured here (with it, an earlier creation of 100,000 slowed from 67 hosts per
            # second to 9 as they accumulated).
            svc["spec"]["clusterIP"] = "None"
            return svc

        def create(i: int) -> None:
            for path, obj in (
                    (f"/api/v1/namespaces/{NS}/services",
                     headless(harness.service(f"app{i}", namespace=NS))),
                    (f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices", slice_for(i, a)),
                    (f"/apis/networking.k8s.io/v1/namespaces/{NS}/ingresses",
                     harness.ingress(f"app{i}", [harness.rule(f"h{i}.example",
                                                              harness.path("/", f"app{i}"))],
                                     namespace=NS))):
                status, body, _, _ = api().call("POST", path, obj)
                if status not in (201, 409):
                    raise RuntimeError(f"POST {path}: {status} {body}")

        if from_cache:
            print(f"{N} Ingresses, Services and EndpointSlices from {cached}, "
                  f"API server ready in {time.monotonic() - t0:.0f} s")
        else:
            cluster.create_namespace(NS)
            step = max(1, N // 10)
            with concurrent.futures.ThreadPoolExecutor(WRITERS) as pool:
                for done in range(0, N, step):
                    list(pool.map(create, range(done, min(N, done + step))))
                    print(f"  {min(N, done + step)} created after "
                          f"{time.monotonic() - t0:.0f} s", flush=True)
            print(f"created {N} Ingresses, Services and EndpointSlices in "
                  f"{time.monotonic() - t0:.0f} s")
            if CACHE:
                keep(cluster, cached, port)

        on = {i: "A" for i in range(N)}  # where each host's slice points
        runs = [("", harness.binary("tidegate-controller").parent)]
        for other in filter(None, COMPARE_BIN_DIR.split(":")):
            runs.append((f" [{other}]", Path(other)))

        # nginx with the same N hosts, cold starts and then `nginx -s reload` to a new
        # configuration (a new connection per probe: a keep-alive connection would stay with an
        # old worker).
        ndir = work / "nginx"
        ndir.mkdir()
        nport = harness.free_port()

        def write_conf(last_to: harness.Backend) -> None:
            servers = "".join(
                f"server {{ listen 127.0.0.1:{nport}; server_name h{i}.example; "
                f"location / {{ proxy_pass http://{(last_to if i == N - 1 else a).host}:{port}; }} }}\n"
                for i in range(N))
            (ndir / "nginx.conf").write_text(
                f"worker_processes 1; pid {ndir}/nginx.pid; error_log {ndir}/error.log;\n"
                f"events {{}}\nhttp {{ access_log off; server_names_hash_max_size 65536;\n"
                f"server_names_hash_bucket_size 128;\n{servers}}}\n")

        def nginx_start() -> float:
            """Cold start: the master reads the configuration (N server blocks), daemonizes and
            forks its worker, which serves. Seconds until the last host is served."""
            t = time.monotonic()
            subprocess.run(["nginx", "-p", str(ndir), "-c", str(ndir / "nginx.conf")],
                           check=True)
            return wait_serving(nport, f"h{N - 1}.example", a.name, 60) - t

        def nginx_quit() -> None:
            pid = int((ndir / "nginx.pid").read_text())
            subprocess.run(["nginx", "-p", str(ndir), "-c", str(ndir / "nginx.conf"), "-s",
                            "quit"])
            harness.wait_until(lambda: not Path(f"/proc/{pid}").exists(), 30, "nginx quit")

        write_conf(a)
        starts: dict[str, list[tuple[float, float, float]]] = {}
        nginx_starts = []
        # The builds' starts and nginx's alternate (each one's k-th start under much the same
        # load).
        for k in range(STARTS):
            for n_run, (label, bin_dir) in enumerate(runs):
                stack = harness.make_stack(work / f"stack{n_run}-{k}")
                stack.dataplane.argv[0] = str(bin_dir / "tidegate-dataplane")
                starts.setdefault(str(bin_dir), []).append(start_stack(
                    cluster, stack, work / f"stack{n_run}-{k}" / "kube-controller.log", bin_dir,
                    on, f"{bin_dir} (start {k + 1} of {STARTS})"))
                if k == STARTS - 1 and CHANGES > 0:
                    measure(cluster, stack, on, backends, label)
                stack.shutdown()
                stack = None
            load = os.getloadavg()[0]
            nginx_starts.append(nginx_start())
            print(f"\nnginx ({N} server blocks) started -> serving all hosts: "
                  f"{nginx_starts[-1]:.2f} s (load average {load:.1f} before)")
            if k < STARTS - 1 or RELOADS == 0:
                nginx_quit()

        print(f"\nstart at N={N}, medians of {STARTS} (same run):")
        for bin_dir, values in starts.items():
            print(f"  {bin_dir}: started -> serving all hosts "
                  f"{statistics.median(v[0] for v in values):.2f} s "
                  f"({', '.join(f'{v[0]:.2f}' for v in values)}); peak RSS of both "
                  f"{statistics.median(v[1] for v in values):.0f} MB, after "
                  f"{statistics.median(v[2] for v in values):.0f} MB")
        print(f"  nginx: started -> serving all hosts {statistics.median(nginx_starts):.2f} s "
              f"({', '.join(f'{v:.2f}' for v in nginx_starts)})")
        reloads = []
        for k in range(RELOADS):
            target = b if k % 2 == 0 else a
            write_conf(target)
            t = time.monotonic()
            subprocess.run(["nginx", "-p", str(ndir), "-c", str(ndir / "nginx.conf"), "-s",
                            "reload"], check=True)
            harness.wait_until(lambda: harness.request(nport, "GET", "/", f"h{N - 1}.example")
                               .header("X-Backend") == target.name, 60, "nginx reload",
                               interval=0.002)
            reloads.append((time.monotonic() - t) * 1000)
        if RELOADS > 0:
            nginx_quit()
        if reloads:
            print(f"nginx ({N} server blocks): `nginx -s reload` -> new configuration serving: "
                  f"p50 {statistics.median(reloads):.0f} ms, max {max(reloads):.0f} ms "
                  f"({RELOADS} reloads)")
    finally:
        if stack is not None:
            stack.shutdown()
        a.stop()
        b.stop()
        cluster.shutdown()
        print(f"logs in {work}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
