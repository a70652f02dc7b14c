"""Routes from a real kube-apiserver: apply, EndpointSlice changes, deletes, class and namespace
filtering, client-certificate kubeconfigs."""

from __future__ import annotations

import re
import statistics
import time

import pytest

import harness
from kubeapps import backends, kube_ingress, kube_service, kube_slice, start


def app(namespace: str, name: str, host: str, bs: list[harness.Backend], **kw) -> list[dict]:
    return [kube_service(name, namespace), kube_slice(f"{name}-1", name, namespace, bs),
            kube_ingress(name, namespace, host, name, **kw)]


def test_routes_appear_after_apply(cluster, namespace, kube_stack_factory):
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace]))
    s.controller.wait_for_log(r"initial lists complete", timeout=15)
    s.dataplane.wait_ready()
    assert s.get("/", host="web.example").status == 404
    (b,) = backends(s, "web")
    cluster.apply(*app(namespace, "web", "web.example", [b]))
    s.wait_backend("/", "web.example", "web")
    s.wait_backend("/any/path", "web.example", "web")


def test_routes_present_before_start_are_pushed_complete(cluster, namespace, kube_stack_factory):
    """Objects that exist before the controller starts arrive in its first push, not piecemeal:
    nothing is pushed before every kind's initial list."""
    s = kube_stack_factory(cluster, ["--watch-namespace", namespace])
    (b,) = backends(s, "early")
    cluster.apply(*app(namespace, "early", "early.example", [b]))
    start(s)
    s.dataplane.wait_ready(timeout=15)
    r = s.get("/", host="early.example")
    assert r.status == 200 and r.header("X-Backend") == "early", (r.status, r.headers)
    log = s.controller.log()
    assert log.index("initial lists complete") < log.index("acknowledged version")


def test_endpoint_slice_change_reaches_data_plane_fast(cluster, namespace, kube_stack_factory):
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace, "--log-level", "debug"]))
    b1, b2 = backends(s, "one", "two")
    cluster.apply(*app(namespace, "fast", "fast.example", [b1]))
    s.wait_backend("/", "fast.example", "one", timeout=15)
    path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices/fast-1"
    latencies = []
    # The first change is not measured: it may come before the controller's watches are open
    # (they start after the initial lists, and the first push does not wait for them).
    for i in range(11):
        target = b2 if i % 2 == 0 else b1
        body = kube_slice("fast-1", "fast", namespace, [target])
        t0 = time.monotonic()
        status, _ = cluster.api("PUT", path, body)
        assert status == 200, status
        # Poll the proxy until it answers from the new endpoint.
        harness.wait_until(
            lambda: (r := s.get("/", host="fast.example")).status == 200
            and r.header("X-Backend") == target.name, 2.0, f"switch to {target.name}",
            interval=0.002)
        if i > 0:
            latencies.append((time.monotonic() - t0) * 1000)
    latencies.sort()
    harness.report(f"kube EndpointSlice write -> data plane serving: p50 "
                   f"{statistics.median(latencies):.0f} ms, max {latencies[-1]:.0f} ms "
                   f"(10 changes)")
    # Typical: p50 ~35 ms, max ~50-120 ms on an idle machine. The median carries the claim; one
    # slow change (an API server GC pause, a busy CI machine) only has to stay under a second.
    assert statistics.median(latencies) < 200 and latencies[-1] < 1000, latencies
    # Each change took the endpoint fast path (docs/translation.md), not a full translation.
    fast = re.findall(r"translation \(endpoints only, 1 upstreams updated\)", s.controller.log())
    assert len(fast) >= 11, s.controller.log()[-3000:]


def test_deletes_remove_routes(cluster, namespace, kube_stack_factory):
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace]))
    (b,) = backends(s, "gone")
    cluster.apply(*app(namespace, "gone", "gone.example", [b]))
    s.wait_backend("/", "gone.example", "gone", timeout=15)
    cluster.delete("endpointslice", "gone-1", namespace)
    s.wait_status("/", "gone.example", 503)  # the route stays, with no endpoint left
    cluster.delete("ingress", "gone", namespace)
    s.wait_status("/", "gone.example", 404)


def test_class_filtering(cluster, namespace, kube_stack_factory):
    ours = "tg-" + namespace  # IngressClasses are cluster-wide: one per test
    other = "other-" + namespace
    cluster.apply(
        {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
         "metadata": {"name": ours}, "spec": {"controller": "tidegate.io/ingress-controller"}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
         "metadata": {"name": other}, "spec": {"controller": "example.com/other"}})
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace, "--ingress-class",
                                           ours]))
    (b,) = backends(s, "cls")
    cluster.apply(
        kube_service("cls", namespace), kube_slice("cls-1", "cls", namespace, [b]),
        kube_ingress("by-field", namespace, "field.example", "cls", ingress_class=ours),
        kube_ingress("by-annotation", namespace, "annotation.example", "cls",
                     ingress_class=None, annotations={"kubernetes.io/ingress.class": ours}),
        # Created while no class is the default: it stays without a class (the API server's
        # DefaultIngressClass admission would otherwise write the default's name into it).
        kube_ingress("classless", namespace, "classless.example", "cls", ingress_class=None),
        kube_ingress("other", namespace, "other.example", "cls", ingress_class=other))
    for host in ("field.example", "annotation.example"):
        s.wait_backend("/", host, "cls", timeout=15)
    assert s.get("/", host="other.example").status == 404
    assert s.get("/", host="classless.example").status == 404
    # Our class becomes the default: the class-less Ingress is ours; and no longer when it stops.
    annotation = "ingressclass.kubernetes.io/is-default-class"
    cluster.kubectl("annotate", "ingressclass", ours, f"{annotation}=true")
    try:
        s.wait_backend("/", "classless.example", "cls")
    finally:
        cluster.kubectl("annotate", "ingressclass", ours, f"{annotation}-")
    s.wait_status("/", "classless.example", 404)
    assert s.get("/", host="field.example").status == 200
    cluster.kubectl("delete", "ingressclass", ours, other)


def test_namespace_filtering(cluster, namespace, kube_stack_factory):
    other = namespace + "-x"
    cluster.create_namespace(other)
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace]))
    b1, b2 = backends(s, "mine", "theirs")
    cluster.apply(*app(namespace, "mine", "mine.example", [b1]),
                  *app(other, "theirs", "theirs.example", [b2]))
    s.wait_backend("/", "mine.example", "mine", timeout=15)
    # A controller for all namespaces sees both: the object really is there.
    s2 = start(kube_stack_factory(cluster))
    s2.wait_backend("/", "theirs.example", "theirs", timeout=15)
    assert s.get("/", host="theirs.example").status == 404


def test_client_certificate_kubeconfig(cluster, namespace, kube_stack_factory, tmp_path):
    kubeconfig = cluster.write_kubeconfig(tmp_path / "cert.kubeconfig", client_cert=True)
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace],
                                 kubeconfig=kubeconfig))
    (b,) = backends(s, "cert")
    cluster.apply(*app(namespace, "cert", "cert.example", [b]))
    s.wait_backend("/", "cert.example", "cert", timeout=15)
    assert "client certificate" in s.controller.log()


def test_bad_credentials_never_push(cluster, namespace, kube_stack_factory, tmp_path):
    """A controller the API server refuses keeps retrying and pushes nothing (not an empty
    configuration that would take routes away)."""
    bad = tmp_path / "bad.kubeconfig"
    bad.write_text(cluster.kubeconfig.read_text().replace(
        "tidegate-e2e-admin-token", "wrong-token"))
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace], kubeconfig=bad))
    s.controller.wait_for_log(r"list \w+.* failed: 401", timeout=10)
    time.sleep(1.0)
    assert not s.dataplane.ready()
    assert "acknowledged" not in s.controller.log()


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_initial_lists_route_alike_in_protobuf_and_json(cluster, namespace, kube_stack_factory,
                                                        encoding):
    """Objects that exist before the start come from the initial lists, which are protobuf by
    default for Ingresses, Services and EndpointSlices (--json-lists: JSON). Both route the same:
    a backend port named in the Ingress and resolved through the Service to the slice's port,
    an endpoint that is not ready left out, an Exact path beside a Prefix one, a second Service
    on a number port, a rule without a host, and the class from spec.ingressClassName."""
    args = ["--watch-namespace", namespace, "--log-level", "debug"]
    s = kube_stack_factory(cluster, args + (["--json-lists"] if encoding == "json" else []))
    ready, unready = backends(s, "ready", "unready")
    (other,) = backends(s, "other")
    web = harness.ingress("web", [
        harness.rule("web.example",
                     harness.path("/exact", "other", path_type="Exact", port=8080),
                     harness.path("/", "web", port="http")),
        harness.rule(None, harness.path("/anyhost", "other", port=8080))],
        namespace=namespace, ingress_class=harness.INGRESS_CLASS)
    cluster.apply(
        harness.service("web", namespace=namespace, target_port="http"),
        kube_slice("web-1", "web", namespace, [ready, unready], not_ready=[unready]),
        harness.service("other", port=8080, namespace=namespace),
        kube_slice("other-1", "other", namespace, [other]), web)
    start(s)
    s.dataplane.wait_ready(timeout=15)
    for p, want in (("/", "ready"), ("/deep/path", "ready"), ("/exact", "other"),
                    ("/exact/not", "ready")):
        r = s.get(p, host="web.example")
        assert r.status == 200 and r.header("X-Backend") == want, (p, r.status, r.headers)
    assert {s.get("/", host="web.example").header("X-Backend") for _ in range(20)} == {"ready"}
    r = s.get("/anyhost/x", host="unknown.example")
    assert r.status == 200 and r.header("X-Backend") == "other", (r.status, r.headers)
    assert s.get("/elsewhere", host="unknown.example").status == 404
    # The lists came in the encoding asked for (the list timing lines, at debug level).
    log = s.controller.log()
    for kind in ("Ingress", "Service", "EndpointSlice"):
        m = re.search(rf"list {kind} in {namespace} timing: .*; (protobuf|JSON)\n", log)
        assert m, log[-3000:]
        assert m.group(1) == ("protobuf" if encoding == "protobuf" else "JSON"), m.group(0)
