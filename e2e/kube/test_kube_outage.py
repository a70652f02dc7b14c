"""The API server goes away mid-watch and comes back: the data plane keeps serving, the
controller reconnects (backoff with jitter), resyncs, and leaves no stale route."""

from __future__ import annotations

import signal
import time

import harness
import kubecluster
import pytest
from kubeapps import backends, kube_ingress, kube_service, kube_slice, start


@pytest.fixture
def uncached_cluster(kube_bin, tmp_path):
    """An API server without its watch cache: watches go to etcd, so a compacted
    resourceVersion gets etcd's answer (410 Gone) rather than the cache's."""
    c = kubecluster.Cluster(kube_bin, tmp_path / "cluster", apiserver_args=("--watch-cache=false",))
    try:
        c.start()
        yield c
    finally:
        c.shutdown()


@pytest.mark.deadline(180)  # two API server start-ups, a restart, the outage
def test_apiserver_down_20s_then_back(own_cluster, kube_stack_factory):
    c = own_cluster
    ns = "outage"
    c.create_namespace(ns)
    # A second API server on the same etcd: the test writes through it while the controller's
    # API server is down, so that there are changes the controller has to catch up on.
    writer = c.second_apiserver()
    try:
        s = start(kube_stack_factory(c, ["--watch-namespace", ns, "--log-level", "debug"]))
        keep, drop, later = backends(s, "keep", "drop", "later")
        c.apply(kube_service("keep", ns), kube_slice("keep-1", "keep", ns, [keep]),
                kube_ingress("keep", ns, "keep.example", "keep"),
                kube_service("drop", ns), kube_slice("drop-1", "drop", ns, [drop]),
                kube_ingress("drop", ns, "drop.example", "drop"))
        s.wait_backend("/", "keep.example", "keep", timeout=15)
        s.wait_backend("/", "drop.example", "drop", timeout=15)
        # Stop it mid-watch, not between the first list and the first watch.
        s.controller.wait_for_log(r"watch EndpointSlice in outage open", timeout=10)
        time.sleep(0.5)

        c.stop_apiserver()
        down_at = time.monotonic()
        s.controller.wait_for_log(r"watch .* (broke|failed)", timeout=10)
        # While it is down: delete one app, add another, move keep's endpoint.
        writer.delete("ingress", "drop", ns)
        writer.apply(kube_service("later", ns), kube_slice("later-1", "later", ns, [later]),
                     kube_ingress("later", ns, "later.example", "later"))
        failures = 0
        probes = 0
        while time.monotonic() - down_at < 20:
            probes += 1
            r = s.get("/", host="keep.example")
            failures += r.status != 200
            time.sleep(0.1)
        assert failures == 0, f"{failures}/{probes} requests failed while the API server was down"
        assert s.controller.alive()

        t0 = time.monotonic()
        c.start_apiserver()
        s.wait_backend("/", "later.example", "later", timeout=30)
        s.wait_status("/", "drop.example", 404, timeout=10)
        harness.report(f"kube API server back after 20 s: controller caught up "
                       f"{time.monotonic() - t0:.1f} s after it was ready again "
                       f"({probes} requests served meanwhile, 0 failed)")
        assert s.get("/", host="keep.example").status == 200
        # And it watches again.
        c.delete("ingress", "keep", ns)
        s.wait_status("/", "keep.example", 404, timeout=10)
    finally:
        writer.apiserver.stop(signal.SIGTERM, timeout=10)


@pytest.mark.deadline(180)  # an API server of its own
def test_stalled_watch_is_reconnected(own_cluster, kube_stack_factory):
    """SIGSTOP the API server: its connections stay open and silent. With a 3 s idle timeout the
    controller gives up on them, retries with backoff, and after SIGCONT watches again."""
    c = own_cluster
    ns = "stall"
    c.create_namespace(ns)
    s = start(kube_stack_factory(c, ["--watch-namespace", ns, "--watch-idle-timeout", "3"]))
    (b,) = backends(s, "st")
    c.apply(kube_service("st", ns), kube_slice("st-1", "st", ns, [b]),
            kube_ingress("st", ns, "st.example", "st"))
    s.wait_backend("/", "st.example", "st", timeout=15)
    mark = s.controller.log_size()
    c.apiserver.send_signal(signal.SIGSTOP)
    try:
        s.controller.wait_for_log(r"watch .* (broke|failed)", timeout=15, since=mark)
        assert s.get("/", host="st.example").status == 200
    finally:
        c.apiserver.send_signal(signal.SIGCONT)
    c.delete("ingress", "st", ns)
    s.wait_status("/", "st.example", 404, timeout=20)


def test_compacted_resource_version_forces_relist(uncached_cluster, kube_stack_factory):
    """The controller's resourceVersion is compacted away while its API server is down: on
    return, the watch gets 410 Gone, the controller relists and drops what was deleted."""
    c = uncached_cluster
    ns = "compact"
    c.create_namespace(ns)
    writer = c.second_apiserver()
    try:
        s = start(kube_stack_factory(c, ["--watch-namespace", ns, "--log-level", "debug"]))
        (b,) = backends(s, "cp")
        c.apply(kube_service("cp", ns), kube_slice("cp-1", "cp", ns, [b]),
                kube_ingress("old", ns, "old.example", "cp"))
        s.wait_backend("/", "old.example", "cp", timeout=15)
        s.controller.wait_for_log(r"watch Ingress in compact open", timeout=10)
        c.stop_apiserver()
        writer.delete("ingress", "old", ns)
        writer.apply(kube_ingress("new", ns, "new.example", "cp"))
        rev = c.compact_etcd()
        mark = s.controller.log_size()
        c.start_apiserver()
        s.wait_backend("/", "new.example", "cp", timeout=30)
        s.wait_status("/", "old.example", 404, timeout=10)
        s.controller.wait_for_log(r"watch Ingress in compact: resourceVersion \d+ is gone",
                                  timeout=5, since=mark)
        harness.report(f"kube forced 410: etcd compacted at revision {rev}; controller relisted")
    finally:
        writer.apiserver.stop(signal.SIGTERM, timeout=10)
