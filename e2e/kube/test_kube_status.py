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
            "--election-lease-seconds", "6"]  # renewed every 1 s; expires within the 20 s below
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
    # The controller logs the write once the API server has answered it: the test can see the
    # status a moment before the line.
    leader.controller.wait_for_log(r"st status: load balancer", timeout=5)
    assert "status: load balancer" not in follower.controller.log()

    # The leader dies without releasing the Lease: the follower takes over once it expires.
    leader.controller.kill()
    cluster.apply(kube_ingress("second", namespace, "second.example", "st"))
    harness.wait_until(lambda: lb_status(cluster, namespace, "second") == want, 20,
                       "the new leader to write the second Ingress's status")
    follower.controller.wait_for_log(r"second status: load balancer", timeout=5)
    assert "became the leader" in follower.controller.log()


def test_leader_hands_over_on_shutdown(cluster, namespace, kube_stack_factory):
    """SIGTERM releases the Lease, so the other replica leads at once, not after the lease."""
    args = ["--watch-namespace", namespace, "--publish-address", "203.0.113.9",
            "--election-lease-seconds", "30"]
    s1 = start(kube_stack_factory(cluster, args))
    s1.controller.wait_for_log("became the leader", timeout=15)
    s2 = start(kube_stack_factory(cluster, args))
    s2.controller.wait_for_log("initial lists complete", timeout=15)
    s1.controller.stop()
    s2.controller.wait_for_log("became the leader", timeout=15)  # far less than 30 s


def set_service_lb(cluster, namespace: str, name: str, ingress: list) -> None:
    status, body = cluster.api(
        "PATCH", f"/api/v1/namespaces/{namespace}/services/{name}/status",
        {"status": {"loadBalancer": {"ingress": ingress}}},
        content_type="application/merge-patch+json")
    assert status == 200, (status, body)


def test_publish_service_status_follows_the_service(cluster, namespace, kube_stack_factory):
    """--publish-service: our Ingresses carry that Service's load-balancer addresses, and follow
    when they change. No load-balancer controller runs here, so the test writes the Service's
    status itself, as a cloud controller would."""
    lb = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "tidegate-lb",
                                                              "namespace": namespace},
          "spec": {"type": "LoadBalancer", "selector": {"app": "tidegate"},
                   "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}
    cluster.apply(lb)
    set_service_lb(cluster, namespace, "tidegate-lb", [{"ip": "203.0.113.20"}])
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace, "--publish-service",
                                           f"{namespace}/tidegate-lb"]))
    (b,) = backends(s, "ps")
    cluster.apply(kube_service("ps", namespace), kube_slice("ps-1", "ps", namespace, [b]),
                  kube_ingress("ps", namespace, "ps.example", "ps"),
                  kube_ingress("theirs", namespace, "theirs.example", "ps", ingress_class="other"))
    harness.wait_until(lambda: lb_status(cluster, namespace, "ps") == [{"ip": "203.0.113.20"}],
                       15, "the Service's address in the Ingress status")
    set_service_lb(cluster, namespace, "tidegate-lb",
                   [{"hostname": "lb.example.net"}, {"ip": "203.0.113.21"}])
    want = [{"hostname": "lb.example.net"}, {"ip": "203.0.113.21"}]
    harness.wait_until(lambda: lb_status(cluster, namespace, "ps") == want, 15,
                       "the Ingress status to follow the Service's change")
    # The load balancer went away: the status is emptied too.
    set_service_lb(cluster, namespace, "tidegate-lb", [])
    harness.wait_until(lambda: lb_status(cluster, namespace, "ps") == [], 15,
                       "the Ingress status to follow the Service's addresses going away")
    assert lb_status(cluster, namespace, "theirs") == [], "another class's Ingress is not ours"


def test_status_cleared_when_an_ingress_leaves_our_class(cluster, namespace, kube_stack_factory):
    """An Ingress that stops being ours loses the addresses we wrote, unless what it carries is
    no longer what we wrote (its new controller wrote its own): that is left alone."""
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace, "--publish-address",
                                           "203.0.113.30"]))
    (b,) = backends(s, "lc")
    ours = [{"ip": "203.0.113.30"}]
    cluster.apply(kube_service("lc", namespace), kube_slice("lc-1", "lc", namespace, [b]),
                  kube_ingress("moves", namespace, "moves.example", "lc"),
                  kube_ingress("taken", namespace, "taken.example", "lc"),
                  kube_ingress("stays", namespace, "stays.example", "lc"))
    for name in ("moves", "taken", "stays"):
        harness.wait_until(lambda: lb_status(cluster, namespace, name) == ours, 15,
                           f"the status of {name}")

    cluster.apply(kube_ingress("moves", namespace, "moves.example", "lc", ingress_class="other"))
    harness.wait_until(lambda: lb_status(cluster, namespace, "moves") == [], 15,
                       "the status of the Ingress that left our class to be cleared")
    s.controller.wait_for_log(r"Ingress \S+/moves status: cleared")

    # The other controller got there first: its address stays.
    theirs = [{"hostname": "other-lb.example.net"}]
    status, body = cluster.api(
        "PATCH", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses/taken/status",
        {"status": {"loadBalancer": {"ingress": theirs}}},
        content_type="application/merge-patch+json")
    assert status == 200, body
    cluster.apply(kube_ingress("taken", namespace, "taken.example", "lc", ingress_class="other"))
    s.wait_status("/", "taken.example", 404)
    s.controller.wait_for_log(r"Ingress \S+/taken status: left as it is", timeout=10)
    assert lb_status(cluster, namespace, "taken") == theirs
    assert lb_status(cluster, namespace, "stays") == ours


def test_status_kept_on_shutdown_unless_asked(cluster, namespace, kube_stack_factory):
    """By default a stopping leader leaves the status for the next leader (clearing it would make
    DNS automation drop the records during a rolling update); --update-status-on-shutdown clears
    it (the last replica of an uninstall)."""
    args = ["--watch-namespace", namespace, "--publish-address", "203.0.113.40"]
    s1 = start(kube_stack_factory(cluster, args))
    (b,) = backends(s1, "sd")
    cluster.apply(kube_service("sd", namespace), kube_slice("sd-1", "sd", namespace, [b]),
                  kube_ingress("sd", namespace, "sd.example", "sd"))
    want = [{"ip": "203.0.113.40"}]
    harness.wait_until(lambda: lb_status(cluster, namespace, "sd") == want, 15, "the status")
    assert s1.controller.stop() == 0
    assert lb_status(cluster, namespace, "sd") == want, "kept by default"

    s2 = start(kube_stack_factory(cluster, args + ["--update-status-on-shutdown"]))
    s2.controller.wait_for_log("became the leader", timeout=15)
    s2.controller.wait_for_log("status: load balancer", timeout=15)
    assert s2.controller.stop() == 0
    assert lb_status(cluster, namespace, "sd") == [], "cleared on shutdown when asked"
