"""The headline experiment (docs/benchmarks.md, "Scaling 2↔4 under load"): a constant 1,000
requests/s over TLS 1.3 (50 keep-alive connections, 60 s) while the backend Deployment is
scaled 2→4→2 every 10 s, through Tidegate installed by its chart, and the same scaling through
a reload-based nginx (nginx_reload.py) — both carrying the same many hosts in their
configuration — with a graceful backend (serves 5 s after SIGTERM) and an abrupt one (exits at
once). In the same runs 50 WebSockets stay open through the ingress and echo every 10 s. A
baseline without scaling, and the noise floor of the machine (the same scaling while the load
goes straight to a pod that is never scaled, over the same TLS 1.3) complete the table.

nginx and its EndpointSlice watcher run only around nginx's own runs: started (all hosts
configured, the slices listed, nginx serving) after Tidegate's runs and the floor, stopped
after nginx's runs, so that its reloads never load the machine while anything else is measured.

Run by test_scale.py (1,000 hosts, in scripts/test) and by bench/scale.sh (10,000 hosts):
  python3 e2e/cluster/scale.py --hosts 10000 --out DIR
Each run's summary (JSON), latencies and the report (report.md, report.json, latency.svg) go
to the output folder.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cluster  # noqa: E402
import release  # noqa: E402
from kube import ECHO_TLS_PORT, Kube, echo_deployment, wait_for  # noqa: E402
from nginx_reload import Host, NginxReload  # noqa: E402

RATE = 1000
CONNECTIONS = 50
WEBSOCKETS = 50
SCALE_EVERY = 10.0
NGINX_PORT = 18443
# The answers are about 1 KiB and name their pod, as in the published tests.
BODY_SIZE = 1024
# Graceful: /readyz fails at SIGTERM, the pod keeps serving 5 s, then drains (as apps with a
# preStop sleep do). Abrupt: exits at once on SIGTERM, no preStop.
BACKENDS = {"graceful": 5, "abrupt": 0}
PERCENTILES = ["50", "90", "99", "99.9", "99.99", "99.999"]
# Quiet time after nginx has started and before its first run (its start and the first
# handshakes' CPU behind it), as Tidegate's runs start long after its own start.
NGINX_SETTLE_SECONDS = 3.0
FLOOR = "noise floor (no proxy, scaling)"


def log(msg: str) -> None:
    print(f"scale: {msg}", file=sys.stderr, flush=True)


@dataclass
class Run:
    name: str         # e.g. "tidegate scaling (abrupt)"
    proxy: str        # tidegate | nginx | none
    backend: str      # graceful | abrupt
    scaling: bool
    summary: dict = field(default_factory=dict)
    scale_events: list[tuple[float, int]] = field(default_factory=list)
    reloads: int = 0
    reload_test_seconds: float = 0.0    # the longest `nginx -t` of the run
    reload_signal_seconds: float = 0.0  # the longest `nginx -s reload` of the run


class Experiment:
    def __init__(self, kube: Kube, namespace: str, helm, out: Path, hosts: int = 1000,
                 seconds: int = 60):
        self.kube, self.ns, self.helm, self.out = kube, namespace, helm, out
        self.hosts, self.seconds = hosts, seconds
        self.out.mkdir(parents=True, exist_ok=True)
        self.load = cluster.build_go_program(HERE / "load")
        self.runs: list[Run] = []
        self.ca: Path | None = None
        self.https_port = 0
        self.nginx: NginxReload | None = None
        self.nginx_hosts: list[Host] = []
        self.nginx_stopped = False
        self.installed = False

    # -- set-up -----------------------------------------------------------------------------

    def host_names(self) -> list[str]:
        return [f"h{i:05d}.example" for i in range(self.hosts)]

    def setup(self) -> None:
        t = time.monotonic()
        kube, ns = self.kube, self.ns
        # One wildcard certificate for every host (*.example), in one Secret: Tidegate loads
        # it once, and so does nginx (its default server holds it: nginx_reload.py).
        self.ca = release.make_tls_secret(kube, ns, self.out, "scale-tls", "*.example")
        objects = []
        for backend, grace in BACKENDS.items():
            objects += echo_deployment(f"echo-{backend}", 2, grace_seconds=grace,
                                       termination_grace=30, body_size=BODY_SIZE)
        # The pod behind the WebSockets and the many other hosts; never scaled, it is also the
        # target of the noise-floor run, over TLS 1.3 with the same certificate.
        objects += echo_deployment("steady", 1, grace_seconds=5, body_size=BODY_SIZE,
                                   tls_secret="scale-tls")
        kube.apply(*objects, namespace=ns)
        release.install(self.helm, ns)
        self.installed = True
        for name, n in (("echo-graceful", 2), ("echo-abrupt", 2), ("steady", 1)):
            kube.wait_deployment_ready(ns, name, n, timeout=120)
        kube.wait_deployment_ready(ns, release.RELEASE, 1, timeout=120)
        self.https_port = release.node_ports(kube, ns)["https"]
        # The other apps, as platforms have them: each host its own Ingress, Service and
        # EndpointSlice. Their Services have no selector and their slices are written here,
        # naming the steady pod, so that a thousand apps cost no pods.
        steady = sorted(ip for ip, c in kube.endpoints(ns, "steady").items() if c.get("ready"))
        apps = []
        for h in self.host_names():
            apps += app_service(other_service(h), steady)
        t_apps = time.monotonic()
        for i in range(0, len(apps), 500):
            kube.kubectl("-n", ns, "create", "-f", "-", timeout=300, input=json.dumps(
                {"apiVersion": "v1", "kind": "List", "items": apps[i:i + 500]}))
        if apps:
            log(f"{len(apps) // 2} Services and EndpointSlices created in "
                f"{time.monotonic() - t_apps:.1f} s")
        # The Ingresses: one per host.
        ingresses = [ingress("graceful", "graceful.example", "echo-graceful"),
                     ingress("abrupt", "abrupt.example", "echo-abrupt"),
                     ingress("ws", "ws.example", "steady")]
        ingresses += [ingress(h.split(".")[0], h, other_service(h)) for h in self.host_names()]
        t_ing = time.monotonic()
        for i in range(0, len(ingresses), 500):
            kube.kubectl("-n", ns, "create", "-f", "-", timeout=300, input=json.dumps(
                {"apiVersion": "v1", "kind": "List", "items": ingresses[i:i + 500]}))
        log(f"{len(ingresses)} Ingresses created in {time.monotonic() - t_ing:.1f} s")
        last = self.host_names()[-1] if self.hosts else "ws.example"
        for host in ("graceful.example", "abrupt.example", last):
            wait_for(lambda h=host: self.probe(h, self.https_port), 180,
                     f"Tidegate to serve {host}", interval=0.5)
        log(f"Tidegate serves all {len(ingresses)} hosts, "
            f"{time.monotonic() - t_ing:.1f} s after the first Ingress")
        # nginx gets the same hosts, on the node address, reading the same EndpointSlices; it
        # starts only before its own runs (start_nginx).
        self.nginx_hosts = [Host("graceful.example", "echo-graceful"),
                            Host("abrupt.example", "echo-abrupt"), Host("ws.example", "steady")]
        self.nginx_hosts += [Host(h, other_service(h)) for h in self.host_names()]
        log(f"set-up took {time.monotonic() - t:.0f} s")

    def start_nginx(self) -> None:
        """nginx with every host, its watcher following the slices from their list, serving
        every tested host, then a few quiet seconds: settled before its first measured run."""
        t = time.monotonic()
        kube = self.kube
        self.nginx = NginxReload(self.out / "nginx", f"{cluster.NODE_IP}:{NGINX_PORT}",
                                 self.ca, self.ca.with_suffix(".key"), self.nginx_hosts,
                                 [str(kube.kubectl_path), "--kubeconfig", str(kube.kubeconfig)],
                                 self.ns)
        self.nginx.start()
        last = self.nginx_hosts[-1].name
        for host in ("graceful.example", "abrupt.example", "ws.example", last):
            wait_for(lambda h=host: self.probe(h, NGINX_PORT), 30, f"nginx to serve {host}",
                     interval=0.5)
        time.sleep(NGINX_SETTLE_SECONDS)
        log(f"nginx started with {len(self.nginx_hosts)} server blocks (slices listed in "
            f"{self.nginx.list_seconds:.2f} s, nginx -t {self.nginx.config_seconds:.2f} s), "
            f"serving after {time.monotonic() - t:.1f} s")

    def stop_nginx(self) -> None:
        if self.nginx and not self.nginx_stopped:
            self.nginx_stopped = True
            self.nginx.stop()
            if self.nginx.errors:
                log(f"nginx watcher errors: {self.nginx.errors}")

    def probe(self, host: str, port: int) -> bool:
        r = subprocess.run([str(self.load), "-url", f"https://{host}/probe", "-connect",
                            f"{cluster.NODE_IP}:{port}", "-ca", str(self.ca), "-rate", "10",
                            "-connections", "1", "-duration", "200ms", "-timeout", "2s"],
                           capture_output=True, text=True)
        return r.returncode == 0 and json.loads(r.stdout)["ok"] == 2

    def teardown(self) -> None:
        self.stop_nginx()
        if self.installed:
            # The release's cluster-scoped objects (ClusterRole, IngressClass) outlive the
            # namespace: uninstall, so that the next install in another namespace can own them.
            release.uninstall(self.helm, self.ns)

    # -- runs -------------------------------------------------------------------------------

    def settle(self, deployment: str, replicas: int = 2) -> None:
        """Back to `replicas` pods, none terminating, before a run starts."""
        self.kube.kubectl("-n", self.ns, "scale", "deployment", deployment,
                          f"--replicas={replicas}")
        self.kube.wait_deployment_ready(self.ns, deployment, replicas, timeout=120)

        def no_terminating():
            pods = self.kube.pods(self.ns, f"app={deployment}")
            return len(pods) == replicas
        wait_for(no_terminating, 120, f"{deployment}'s old pods to go", interval=0.5)

    def run(self, name: str, proxy: str, backend: str, scaling: bool) -> Run:
        deployment = f"echo-{backend}"
        self.settle(deployment)
        run = Run(name, proxy, backend, scaling)
        slug = name.replace(" ", "-").replace("(", "").replace(")", "")
        if proxy == "none":
            # Straight to the steady pod, over TLS 1.3 as to the proxies (its HTTPS port, the
            # same wildcard certificate).
            pod_ip = self.kube.ready_pods(self.ns, "app=steady")[0]["status"]["podIP"]
            args = ["-url", "https://steady.example/floor", "-connect",
                    f"{pod_ip}:{ECHO_TLS_PORT}", "-ca", str(self.ca)]
        else:
            port = self.https_port if proxy == "tidegate" else NGINX_PORT
            args = ["-url", f"https://{backend}.example/{slug}", "-connect",
                    f"{cluster.NODE_IP}:{port}", "-ca", str(self.ca), "-ws", str(WEBSOCKETS),
                    "-ws-url", "wss://ws.example/ws"]
        reloads_before = len(self.nginx.reloads) if self.nginx else 0
        log(f"run: {name} ({self.seconds} s)")
        proc = subprocess.Popen(
            [str(self.load), *args, "-rate", str(RATE), "-connections", str(CONNECTIONS),
             "-duration", f"{self.seconds}s", "-out", str(self.out / f"{slug}.json"),
             "-latencies", str(self.out / f"{slug}.latencies")],
            stderr=subprocess.PIPE, text=True)
        stop = threading.Event()
        scaler = None
        if scaling:
            scaler = threading.Thread(target=self._scale_loop, args=(deployment, run, stop),
                                      daemon=True)
            scaler.start()
        try:
            _, err = proc.communicate(timeout=self.seconds + 120)
        finally:
            stop.set()
            if scaler:
                scaler.join(30)
        if proc.returncode != 0:
            raise RuntimeError(f"load generator failed ({proc.returncode}): {err}")
        run.summary = json.loads((self.out / f"{slug}.json").read_text())
        if self.nginx and proxy == "nginx":
            reloads = self.nginx.reloads[reloads_before:]
            run.reloads = len(reloads)
            run.reload_test_seconds = max((r.test_seconds for r in reloads), default=0.0)
            run.reload_signal_seconds = max((r.signal_seconds for r in reloads), default=0.0)
        self.runs.append(run)
        log(f"  {one_line(run)}")
        return run

    def _scale_loop(self, deployment: str, run: Run, stop: threading.Event) -> None:
        t0 = time.monotonic() + 0.2  # the load's own start delay
        k = 0
        while True:
            at = t0 + SCALE_EVERY * k
            if at > t0 + self.seconds - 1 or stop.wait(max(0.0, at - time.monotonic())):
                return
            replicas = 4 if k % 2 == 0 else 2
            self.kube.kubectl("-n", self.ns, "scale", "deployment", deployment,
                              f"--replicas={replicas}")
            run.scale_events.append((time.monotonic() - t0, replicas))
            k += 1

    def run_all(self) -> list[Run]:
        self.run("tidegate baseline", "tidegate", "graceful", scaling=False)
        for backend in BACKENDS:
            self.run(f"tidegate scaling ({backend})", "tidegate", backend, scaling=True)
        self.run(FLOOR, "none", "graceful", scaling=True)
        # nginx runs last, alone: its watcher reloads at every scale event, which would load
        # the machine under the other runs.
        self.start_nginx()
        try:
            for backend in BACKENDS:
                self.run(f"nginx-reload scaling ({backend})", "nginx", backend, scaling=True)
        finally:
            self.stop_nginx()
        # The table in the order it is read: Tidegate, nginx, then the floor.
        order = {"tidegate": 0, "nginx": 1, "none": 2}
        self.runs.sort(key=lambda r: order[r.proxy])
        return self.runs

    # -- report -----------------------------------------------------------------------------

    def report(self) -> str:
        lines = [f"Constant {RATE} requests/s, {CONNECTIONS} keep-alive connections, "
                 f"{self.seconds} s per run; backend scaled 2→4→2 every {SCALE_EVERY:.0f} s; "
                 f"{self.hosts + 3} hosts in each proxy's configuration; TLS 1.3 to the proxy "
                 f"(the noise floor: TLS 1.3 straight to a pod). Latencies in ms, measured "
                 f"from when each request was due.", "",
                 "| run | " + " | ".join(f"p{p}" for p in PERCENTILES)
                 + " | max | errors | timeouts | WebSockets alive | reloads |",
                 "|---" * (len(PERCENTILES) + 6) + "|"]
        for r in self.runs:
            s = r.summary
            ws = s.get("websockets")
            ws_text = f"{ws['alive_at_end']}/{WEBSOCKETS}" if ws else "-"
            reloads = (f"{r.reloads} (`nginx -t` {r.reload_test_seconds:.2f} s, `-s reload` "
                       f"{r.reload_signal_seconds:.2f} s)" if r.proxy == "nginx" else "-")
            lines.append(f"| {r.name} | " + " | ".join(f"{s['percentiles_ms'][p]:.1f}"
                                                      for p in PERCENTILES)
                         + f" | {s['max_ms']:.1f} | {s['errors']} | {s['timeouts']} | {ws_text}"
                         f" | {reloads} |")
        errors = {r.name: r.summary["error_kinds"] for r in self.runs if r.summary["error_kinds"]}
        if errors:
            lines += ["", "Errors by kind: " + "; ".join(
                f"{n}: " + ", ".join(f"{k} ×{v}" for k, v in e.items())
                for n, e in errors.items())]
        lines += ["", self.tail_verdict()]
        text = "\n".join(lines) + "\n"
        (self.out / "report.md").write_text(text)
        (self.out / "report.json").write_text(json.dumps(
            [{"name": r.name, "proxy": r.proxy, "backend": r.backend, "scaling": r.scaling,
              "summary": r.summary, "scale_events": r.scale_events, "reloads": r.reloads,
              "reload_test_seconds": r.reload_test_seconds,
              "reload_signal_seconds": r.reload_signal_seconds} for r in self.runs], indent=2))
        write_plot(self.out / "latency.svg", self.out, self.runs)
        return text

    def by_name(self, name: str) -> Run:
        return next(r for r in self.runs if r.name == name)

    def tail_verdict(self) -> str:
        base = self.by_name("tidegate baseline").summary["percentiles_ms"]["99.999"]
        floor = self.by_name(FLOOR).summary["percentiles_ms"]
        parts = []
        for backend in BACKENDS:
            got = self.by_name(f"tidegate scaling ({backend})").summary["percentiles_ms"][
                "99.999"]
            verdict = "met" if got <= 2 * base else "missed"
            parts.append(f"{backend}: p99.999 {got:.1f} ms against 2 × baseline "
                         f"{2 * base:.1f} ms, {verdict}")
        return ("Tail target (Tidegate's p99.999 while scaling at most 2× its baseline's): "
                + "; ".join(parts) + f". Noise floor of the machine while pods start and stop: "
                f"p99.99 {floor['99.99']:.1f} ms, p99.999 {floor['99.999']:.1f} ms.")


def one_line(r: Run) -> str:
    s = r.summary
    ws = s.get("websockets")
    return (f"{s['ok']}/{s['requests']} ok, {s['errors']} errors, {s['timeouts']} timeouts, "
            f"p99 {s['percentiles_ms']['99']:.1f} ms, p99.999 "
            f"{s['percentiles_ms']['99.999']:.1f} ms, max {s['max_ms']:.1f} ms, "
            f"{len(s['pods'])} pods answered"
            + (f", WebSockets {ws['alive_at_end']}/{WEBSOCKETS} alive" if ws else "")
            + (f", {r.reloads} reloads" if r.proxy == "nginx" else ""))


def other_service(host: str) -> str:
    """The Service of one of the other hosts: h00042.example -> app-h00042."""
    return "app-" + host.split(".")[0]


def app_service(name: str, addresses: list[str]) -> list[dict]:
    """A headless Service without a selector and its one EndpointSlice, naming `addresses`
    (port 8080). Headless: the cluster's Service range (a /24) has no thousand ClusterIPs, and
    an ingress reads the EndpointSlices, not the ClusterIP."""
    return [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
             "spec": {"clusterIP": "None",
                      "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": f"{name}-1", "labels": {"kubernetes.io/service-name": name}},
             "addressType": "IPv4",
             "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses],
             "ports": [{"port": 8080, "protocol": "TCP"}]}]


def ingress(name: str, host: str, service: str) -> dict:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": name},
            "spec": {"ingressClassName": "tidegate",
                     "tls": [{"hosts": [host], "secretName": "scale-tls"}],
                     "rules": [{"host": host, "http": {"paths": [{
                         "path": "/", "pathType": "Prefix",
                         "backend": {"service": {"name": service, "port": {"number": 80}}}}]}}]}}


# -- the plot: latency by percentile, the percentile axis in "nines" (log of 1/(1-p)) ---------

def _curve(latencies: list[int]) -> list[tuple[float, float]]:
    """(nines, ms) points: nines = log10(1 / (1 - p)), p the fraction at or below."""
    s = sorted(latencies)
    n = len(s)
    pts = []
    k = 0
    while k < n:
        p = k / n
        pts.append((math.log10(1 / (1 - p)), s[k] / 1000))
        # Dense where the tail is: step by a fraction of what is left.
        k += max(1, (n - k) // 200)
    pts.append((math.log10(n), s[-1] / 1000))  # the maximum, at the last sample's rank
    return pts


def write_plot(path: Path, out: Path, runs: list[Run]) -> None:
    width, height, left, right, top, bottom = 900, 520, 70, 250, 30, 60
    curves = []
    for r in runs:
        slug = r.name.replace(" ", "-").replace("(", "").replace(")", "")
        lat = [int(x) for x in (out / f"{slug}.latencies").read_text().split()]
        curves.append((r.name, _curve(lat)))
    max_x = max(max(x for x, _ in c) for _, c in curves)
    max_x = max(5.0, math.ceil(max_x))
    ys = [y for _, c in curves for _, y in c if y > 0]
    lo, hi = math.floor(math.log10(max(min(ys), 0.01))), math.ceil(math.log10(max(ys)))
    hi = max(hi, lo + 1)

    def px(x):
        return left + (width - left - right) * x / max_x

    def py(y):
        y = max(y, 10 ** lo)
        return top + (height - top - bottom) * (1 - (math.log10(y) - lo) / (hi - lo))

    colors = ["#1f77b4", "#2ca02c", "#17becf", "#d62728", "#ff7f0e", "#7f7f7f", "#9467bd"]
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14">Latency by percentile while scaling 2↔4 '
           f'(log scales)</text>']
    for k in range(int(max_x) + 1):
        label = "0%" if k == 0 else f"{100 - 10 ** (2 - k):.{max(0, k - 2)}f}%"
        svg.append(f'<line x1="{px(k):.1f}" y1="{top}" x2="{px(k):.1f}" '
                   f'y2="{height - bottom}" stroke="#ddd"/>')
        svg.append(f'<text x="{px(k):.1f}" y="{height - bottom + 16}" '
                   f'text-anchor="middle">{label}</text>')
    for e in range(lo, hi + 1):
        svg.append(f'<line x1="{left}" y1="{py(10 ** e):.1f}" x2="{width - right}" '
                   f'y2="{py(10 ** e):.1f}" stroke="#ddd"/>')
        svg.append(f'<text x="{left - 6}" y="{py(10 ** e) + 4:.1f}" text-anchor="end">'
                   f'{10 ** e:g} ms</text>')
    svg.append(f'<text x="{(left + width - right) / 2}" y="{height - 20}" '
               f'text-anchor="middle">percentile</text>')
    for i, (name, pts) in enumerate(curves):
        c = colors[i % len(colors)]
        d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        svg.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{d}"/>')
        ly = top + 16 * i + 10
        svg.append(f'<line x1="{width - right + 10}" y1="{ly}" x2="{width - right + 30}" '
                   f'y2="{ly}" stroke="{c}" stroke-width="2"/>')
        svg.append(f'<text x="{width - right + 35}" y="{ly + 4}">{name}</text>')
    svg.append("</svg>")
    path.write_text("\n".join(svg) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description="The 2↔4 scaling experiment on the one-node "
                                 "cluster (brought up if it is not).")
    ap.add_argument("--hosts", type=int, default=1000, help="extra hosts in both configurations")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--out", type=Path, default=Path(f"/tmp/tidegate-scale-{int(time.time())}"))
    a = ap.parse_args()
    cluster.up()
    kube = Kube(cluster.kubeconfig_path(), cluster.bin_dir() / "kubectl")
    ns = f"scale-{int(time.time())}"
    kube.create_namespace(ns)
    exp = Experiment(kube, ns, release.make_helm(a.out / "helm-home"), a.out, a.hosts,
                     a.seconds)
    try:
        exp.setup()
        exp.run_all()
        print(exp.report())
        print(f"output: {a.out}")
    finally:
        exp.teardown()
        kube.kubectl("delete", "namespace", ns, "--wait=false", check=False)


if __name__ == "__main__":
    main()
