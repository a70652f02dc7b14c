"""The body of bench/propagation.sh (which documents it)."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "e2e"))
sys.path.insert(0, str(ROOT / "e2e" / "kube"))

import harness  # noqa: E402
import kubecluster  # noqa: E402

N = int(os.environ.get("N", "10000"))
CHANGES = int(os.environ.get("CHANGES", "200"))
RELOADS = int(os.environ.get("RELOADS", "5"))
NS = "bench"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def slice_for(i: int, backend: harness.Backend) -> dict:
    return harness.endpoint_slice(f"app{i}-1", f"app{i}", [backend.host], backend.port,
                                  namespace=NS)


def main() -> int:
    err = kubecluster.enter_test_netns()
    if err:
        print(f"propagation: {err}", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="tg-propagation-"))
    cluster = kubecluster.Cluster(kubecluster.build(), work / "cluster")
    cluster.start()
    a_host, b_host = f"{kubecluster.BACKEND_NET}.1", f"{kubecluster.BACKEND_NET}.2"
    port = harness.free_port(a_host)
    a = harness.Backend("A", a_host, port, record=False)
    b = harness.Backend("B", b_host, port, record=False)
    stack = harness.make_stack(work / "stack")
    try:
        cluster.create_namespace(NS)
        t0 = time.monotonic()

        def create(i: int) -> None:
            for path, obj in (
                    (f"/api/v1/namespaces/{NS}/services", harness.service(f"app{i}", namespace=NS)),
                    (f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices", slice_for(i, a)),
                    (f"/apis/networking.k8s.io/v1/namespaces/{NS}/ingresses",
                     harness.ingress(f"app{i}", [harness.rule(f"h{i}.example",
                                                              harness.path("/", f"app{i}"))],
                                     namespace=NS))):
                status, body = cluster.api("POST", path, obj)
                if status not in (201, 409):
                    raise RuntimeError(f"POST {path}: {status} {body}")

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(N)))
        print(f"created {N} Ingresses, Services and EndpointSlices in "
              f"{time.monotonic() - t0:.0f} s")

        # The controller starts after the objects exist: its first push holds all of them.
        stack.controller = kubecluster.KubeController(
            work / "controller.log", stack.dataplane.socket_path, cluster.kubeconfig,
            ["--watch-namespace", NS])
        stack.start_dataplane()
        t0 = time.monotonic()
        stack.start_controller()
        stack.dataplane.wait_ready(timeout=600)
        stack.wait_backend("/", f"h{N - 1}.example", "A", timeout=60)
        print(f"controller start to data plane serving all {N} hosts: "
              f"{time.monotonic() - t0:.1f} s")

        latencies = []
        for k in range(CHANGES):
            i = (k * 7919) % N  # spread over the hosts
            host = f"h{i}.example"
            target = b  # each changed host moves from A to B (the hosts are distinct)
            path = f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices/app{i}-1"
            t = time.monotonic()
            status, _ = cluster.api("PUT", path, slice_for(i, target))
            assert status == 200, status
            harness.wait_until(lambda: (r := harness.request(stack.port, "GET", "/", host)).status
                               == 200 and r.header("X-Backend") == target.name, 10,
                               f"{host} on {target.name}", interval=0.002)
            latencies.append((time.monotonic() - t) * 1000)
        ctl_mb, dp_mb = rss_mb(stack.controller.pid), rss_mb(stack.dataplane.pid)
        print(f"EndpointSlice write -> data plane serving ({CHANGES} changes, {N} Ingresses): "
              f"p50 {statistics.median(latencies):.0f} ms, p99 {pct(latencies, 99):.0f} ms, "
              f"max {max(latencies):.0f} ms")
        print(f"RSS: controller {ctl_mb:.0f} MB, data plane {dp_mb:.0f} MB, "
              f"together {ctl_mb + dp_mb:.0f} MB")
        stack.shutdown()

        # nginx with the same N hosts: time from `nginx -s reload` to the new config serving.
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
        write_conf(a)
        subprocess.run(["nginx", "-p", str(ndir), "-c", str(ndir / "nginx.conf")], check=True)
        harness.wait_until(lambda: harness.request(nport, "GET", "/", f"h{N - 1}.example")
                           .header("X-Backend") == "A", 30, "nginx up")
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
        subprocess.run(["nginx", "-p", str(ndir), "-c", str(ndir / "nginx.conf"), "-s", "quit"])
        print(f"nginx ({N} server blocks): `nginx -s reload` -> new configuration serving: "
              f"p50 {statistics.median(reloads):.0f} ms, max {max(reloads):.0f} ms "
              f"({RELOADS} reloads)")
    finally:
        stack.shutdown()
        a.stop()
        b.stop()
        cluster.shutdown()
        print(f"logs in {work}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
