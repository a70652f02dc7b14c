"""Ingress status and leader election against a real API server: of two controllers, only the
one holding the Lease writes .status.loadBalancer; when it dies, the other takes over."""

from __future__ import annotations

import harness
from kubeapps import backends, kube_ingress, kube_service, kube_slice, start


def lb_status(cluster, namespace: str, name: str) -> list:
    status, body = cluster.api(
        "GET", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses/{name}")
    assert status == 200, (status, body)
    return body.get("status", {}).get("loadBalancer", {}).get("ingress", [])


def test_status_written_by_the_leader_only(cluster, namespace, kube_stack_factory):
    args = ["--watch-namespace", namespace, "--publish-address", "203.0.113.7,lb.example.net",
            "--election-lease-seconds", "3"]
    s1 = start(kube_stack_factory(cluster, args))
    s2 = start(kube_stack_factory(cluster, args))
    (b,) = backends(s1, "st")
    cluster.apply(kube_service("st", namespace), kube_slice("st-1", "st", namespace, [b]),
                  kube_ingress("st", namespace, "st.example", "st"))
    want = [{"ip": "203.0.113.7"}, {"hostname": "lb.example.net"}]
    harness.wait_until(lambda: lb_status(cluster, namespace, "st") == want, 15,
                       "Ingress status to be written")
    # Both replicas serve traffic.
    s1.wait_backend("/", "st.example", "st")
    s2.wait_backend("/", "st.example", "st")
    leaders = [s for s in (s1, s2) if "became the leader" in s.controller.log()]
    assert len(leaders) == 1, [s.controller.log() for s in (s1, s2)]
    leader = leaders[0]
    follower = s2 if leader is s1 else s1
    assert "status: load balancer" in leader.controller.log()
    assert "status: load balancer" not in follower.controller.log()

    # The leader dies without releasing the Lease: the follower takes over once it expires.
    leader.controller.kill()
    cluster.apply(kube_ingress("second", namespace, "second.example", "st"))
    harness.wait_until(lambda: lb_status(cluster, namespace, "second") == want, 20,
                       "the new leader to write the second Ingress's status")
    log = follower.controller.log()
    assert "became the leader" in log and "status: load balancer" in log


def test_leader_hands_over_on_shutdown(cluster, namespace, kube_stack_factory):
    """SIGTERM releases the Lease, so the other replica leads at once, not after the lease."""
    args = ["--watch-namespace", namespace, "--publish-address", "203.0.113.9",
            "--election-lease-seconds", "30"]
    s1 = start(kube_stack_factory(cluster, args))
    s1.controller.wait_for_log("became the leader", timeout=15)
    s2 = start(kube_stack_factory(cluster, args))
    s2.controller.wait_for_log("initial lists complete", timeout=15)
    s1.controller.stop()
    s2.controller.wait_for_log("became the leader", timeout=10)  # far less than 30 s
