"""The Gateway API from a real kube-apiserver (docs/gateway-api.md): the standard-channel CRDs
installed, a GatewayClass, a Gateway and HTTPRoutes applied with kubectl; the controller routes
them and writes their status (GatewayClass and Gateway conditions, the Gateway's addresses and
attached routes, the routes' parents[]) as the conformance suite reads it. And a controller
started before the CRDs exist, which serves Ingresses and picks the Gateway API up (routes and
status, a GRPCRoute's too) once they are installed, without a restart."""

from __future__ import annotations

import re
import time

import harness
import pytest
from kubeapps import (GATEWAY_CRDS, assert_nothing_refused, backend_address, backends,
                      install_gateway_crds, kube_ingress, kube_service, kube_slice, start)

CONTROLLER = "tidegate.io/gateway-controller"
PUBLISHED = "203.0.113.30"


def get(cluster, path: str) -> dict:
    status, body = cluster.api("GET", path)
    assert status == 200, (status, body)
    return body


def conditions(obj: dict) -> dict:
    return {c["type"]: c for c in obj.get("conditions", [])}


def gateway_objects(namespace: str, class_name: str) -> list[dict]:
    return [
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
         "metadata": {"name": class_name}, "spec": {"controllerName": CONTROLLER}},
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
         "metadata": {"name": "gw", "namespace": namespace},
         "spec": {"gatewayClassName": class_name,
                  "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}},
    ]


def http_route(namespace: str, name: str, host: str, rules: list[dict]) -> dict:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [host], "rules": rules}}


def test_gateway_routes_and_status(cluster, namespace, kube_stack_factory):
    install_gateway_crds(cluster)
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace, "--publish-address",
                                           PUBLISHED, "--election-lease-seconds", "3"]))
    a, b = backends(s, "gw-a", "gw-b")
    class_name = "tg-" + namespace
    cluster.apply(kube_service("svc-a", namespace), kube_slice("svc-a-1", "svc-a", namespace, [a]),
                  kube_service("svc-b", namespace), kube_slice("svc-b-1", "svc-b", namespace, [b]),
                  *gateway_objects(namespace, class_name),
                  http_route(namespace, "web", "gw.example", [
                      {"backendRefs": [{"name": "svc-a", "port": 80}]},
                      {"matches": [{"headers": [{"name": "x-version", "value": "2"}]}],
                       "backendRefs": [{"name": "svc-b", "port": 80}]}]),
                  http_route(namespace, "broken", "broken.example", [
                      {"backendRefs": [{"name": "no-such-service", "port": 80}]}]))
    s.wait_backend("/", "gw.example", "gw-a", timeout=20)
    r = s.get("/", "gw.example", headers={"X-Version": "2"})
    assert r.status == 200 and r.header("X-Backend") == "gw-b"
    s.wait_status("/", "broken.example", 500)

    base = "/apis/gateway.networking.k8s.io/v1"

    def written() -> bool:
        gc = get(cluster, f"{base}/gatewayclasses/{class_name}")
        gw = get(cluster, f"{base}/namespaces/{namespace}/gateways/gw")
        route = get(cluster, f"{base}/namespaces/{namespace}/httproutes/web")
        listeners = gw.get("status", {}).get("listeners", [])
        # Both routes counted: the two arrive as separate watch events, so the first status
        # written may count one.
        return (conditions(gc.get("status", {})).get("Accepted", {}).get("status") == "True"
                and conditions(gw.get("status", {})).get("Programmed", {}).get("status") == "True"
                and bool(route.get("status", {}).get("parents"))
                and [li.get("attachedRoutes") for li in listeners] == [2])
    harness.wait_until(written, 20, "the Gateway API status to be written")

    gc = get(cluster, f"{base}/gatewayclasses/{class_name}")
    assert conditions(gc["status"])["Accepted"]["observedGeneration"] == gc["metadata"]["generation"]

    gw = get(cluster, f"{base}/namespaces/{namespace}/gateways/gw")
    status = gw["status"]
    assert status["addresses"] == [{"type": "IPAddress", "value": PUBLISHED}]
    assert conditions(status)["Accepted"]["status"] == "True"
    assert conditions(status)["Programmed"]["observedGeneration"] == gw["metadata"]["generation"]
    (listener,) = status["listeners"]
    assert listener["name"] == "http" and listener["attachedRoutes"] == 2
    assert {c["type"]: c["status"] for c in listener["conditions"]}["Accepted"] == "True"
    assert {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"} in listener["supportedKinds"]

    route = get(cluster, f"{base}/namespaces/{namespace}/httproutes/web")
    (parent,) = route["status"]["parents"]
    assert parent["controllerName"] == CONTROLLER
    assert parent["parentRef"]["name"] == "gw"
    cs = conditions(parent)
    assert cs["Accepted"]["status"] == "True" and cs["ResolvedRefs"]["status"] == "True"
    assert cs["Accepted"]["observedGeneration"] == route["metadata"]["generation"]
    assert cs["Accepted"]["lastTransitionTime"]

    harness.wait_until(lambda: get(cluster, f"{base}/namespaces/{namespace}/httproutes/broken")
                       .get("status", {}).get("parents"), 20, "the broken route's status")
    broken = get(cluster, f"{base}/namespaces/{namespace}/httproutes/broken")
    cs = conditions(broken["status"]["parents"][0])
    assert cs["ResolvedRefs"]["status"] == "False"
    assert cs["ResolvedRefs"]["reason"] == "BackendNotFound"

    # Another controller's entry in parents[] stays through our writes, and a restarted
    # controller (which remembers nothing) keeps the lastTransitionTime the objects hold while
    # a condition's status stays: read back, not "now".
    foreign = {"parentRef": {"group": "example.com", "kind": "Thing", "name": "x"},
               "controllerName": "example.com/other-controller",
               "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                               "message": "theirs", "observedGeneration": 1,
                               "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    st, body = cluster.api("PATCH", f"{base}/namespaces/{namespace}/httproutes/web/status",
                           {"status": {"parents": [parent, foreign]}},
                           "application/merge-patch+json")
    assert st == 200, body
    accepted_since = conditions(parent)["Accepted"]["lastTransitionTime"]
    gw_since = conditions(status)["Accepted"]["lastTransitionTime"]
    time.sleep(1.2)  # the times have whole seconds: a new one would differ
    s.controller.stop()
    s.controller.start()
    route = get(cluster, f"{base}/namespaces/{namespace}/httproutes/web")

    # A change of the route bumps its generation; the status follows with the new one.
    route["spec"]["rules"][0]["backendRefs"] = [{"name": "svc-b", "port": 80}]
    route.pop("status", None)
    for k in ("managedFields", "resourceVersion"):
        route["metadata"].pop(k, None)
    cluster.apply(route)
    s.wait_backend("/", "gw.example", "gw-b", timeout=20)

    def observed_new_generation() -> bool:
        r = get(cluster, f"{base}/namespaces/{namespace}/httproutes/web")
        (ours,) = [p for p in r["status"]["parents"] if p["controllerName"] == CONTROLLER]
        cs = conditions(ours)
        return cs["Accepted"]["observedGeneration"] == r["metadata"]["generation"] > 1
    harness.wait_until(observed_new_generation, 20, "observedGeneration to follow the change")
    parents = get(cluster, f"{base}/namespaces/{namespace}/httproutes/web")["status"]["parents"]
    assert foreign in parents, parents
    (ours,) = [p for p in parents if p["controllerName"] == CONTROLLER]
    assert conditions(ours)["Accepted"]["lastTransitionTime"] == accepted_since
    gw = get(cluster, f"{base}/namespaces/{namespace}/gateways/gw")
    assert conditions(gw["status"])["Accepted"]["lastTransitionTime"] == gw_since

    # A route that stops naming our Gateway loses our parents[] entry (others' would stay).
    moved = http_route(namespace, "broken", "broken.example", [
        {"backendRefs": [{"name": "no-such-service", "port": 80}]}])
    moved["spec"]["parentRefs"] = [{"name": "someone-elses-gateway"}]
    cluster.apply(moved)
    harness.wait_until(
        lambda: not get(cluster, f"{base}/namespaces/{namespace}/httproutes/broken")
        .get("status", {}).get("parents"), 20, "our entry to leave the moved route's status")
    log = s.controller.log()
    assert_nothing_refused(log)


def test_https_listener_certificate_secret_fetched(cluster, namespace, kube_stack_factory,
                                                   tmp_path):
    """The Secret an HTTPS listener names is fetched whichever comes first, the Secret or the
    Gateway (the conformance suite creates its certificate Secret after the Gateways), and the
    listener is programmed once it is there."""
    install_gateway_crds(cluster)
    ca = harness.CertAuthority(tmp_path / "ca")
    server = ca.issue("gw", ["secure.example", "a.wild.example", "x.y.wild.example"])
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace, "--publish-address",
                                           PUBLISHED, "--gateway-https-port", "443"]))
    (a,) = backends(s, "tls-a")
    class_name = "tgs-" + namespace
    gateway_class, gateway = gateway_objects(namespace, class_name)
    gateway["spec"]["listeners"] = [
        {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "secure.example",
         "tls": {"mode": "Terminate", "certificateRefs": [{"name": "gw-cert"}]}},
        {"name": "wild", "port": 443, "protocol": "HTTPS", "hostname": "*.wild.example",
         "tls": {"mode": "Terminate", "certificateRefs": [{"name": "gw-cert"}]}}]
    route = http_route(namespace, "secure", "secure.example",
                       [{"backendRefs": [{"name": "svc-a", "port": 80}]}])
    wild = http_route(namespace, "wild", "x.wild.example",
                      [{"backendRefs": [{"name": "svc-a", "port": 80}]}])
    wild["spec"].pop("hostnames")  # the listener's wildcard: any depth under wild.example
    cluster.apply(kube_service("svc-a", namespace), kube_slice("svc-a-1", "svc-a", namespace, [a]),
                  gateway_class, gateway, route, wild)
    base = "/apis/gateway.networking.k8s.io/v1"

    def listener_resolved() -> bool:
        gw = get(cluster, f"{base}/namespaces/{namespace}/gateways/gw")
        listeners = gw.get("status", {}).get("listeners", [])
        return bool(listeners) and all(
            conditions(li)["ResolvedRefs"]["status"] == "True" for li in listeners)
    # First without the Secret: the listener waits for it.
    harness.wait_until(lambda: get(cluster, f"{base}/namespaces/{namespace}/gateways/gw")
                       .get("status", {}).get("listeners"), 20, "the Gateway's status")
    assert not listener_resolved()
    cluster.apply(harness.tls_secret("gw-cert", server.cert_pem, server.key_pem,
                                     namespace=namespace))
    harness.wait_until(listener_resolved, 20, "the listeners to resolve their certificate")
    port = harness.https_port(s.dataplane)

    def served(name: str) -> bool:
        try:
            r, _ = harness.tls_request(port, name)
        except OSError:
            return False
        return r.status == 200 and r.header("X-Backend") == "tls-a"
    harness.wait_until(lambda: served("secure.example"), 20, "HTTPS through the listener")
    # A Gateway API wildcard takes any depth of labels.
    harness.wait_until(lambda: served("x.y.wild.example"), 20, "the wildcard listener, two labels")
    assert served("a.wild.example")


def test_one_service_per_gateway(cluster, namespace, kube_stack_factory):
    """--gateway-listener-ports with --publish-service: the leader keeps a Service per Gateway
    beside the published one (its selector and type, the Gateway's ports leading to the data
    plane listeners of that Gateway), writes its ClusterIP as the Gateway's address, updates it
    when the Gateway's ports change and deletes it when the Gateway goes."""
    install_gateway_crds(cluster)
    first, last = harness.free_port_range(4)
    published = {"apiVersion": "v1", "kind": "Service",
                 "metadata": {"name": "tidegate", "namespace": namespace},
                 "spec": {"type": "ClusterIP", "selector": {"app": "tidegate-test"},
                          "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}
    cluster.apply(published)
    s = start(kube_stack_factory(cluster, [
        "--watch-namespace", namespace, "--publish-service", f"{namespace}/tidegate",
        "--gateway-listener-ports", f"{first}-{last}", "--election-lease-seconds", "3"]))
    a, b = backends(s, "own-a", "own-b")
    class_name = "tgo-" + namespace
    gateway_class, gw_a = gateway_objects(namespace, class_name)
    gw_a["metadata"]["name"] = "gw-a"
    gw_b = {**gw_a, "metadata": {"name": "gw-b", "namespace": namespace},
            "spec": {"gatewayClassName": class_name, "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP"},
                {"name": "alt", "port": 8080, "protocol": "HTTP"}]}}
    route_a = http_route(namespace, "ra", "a.example", [{"backendRefs": [{"name": "svc-a", "port": 80}]}])
    route_a["spec"]["parentRefs"] = [{"name": "gw-a"}]
    route_b = http_route(namespace, "rb", "a.example", [{"backendRefs": [{"name": "svc-b", "port": 80}]}])
    route_b["spec"]["parentRefs"] = [{"name": "gw-b"}]
    cluster.apply(kube_service("svc-a", namespace), kube_slice("svc-a-1", "svc-a", namespace, [a]),
                  kube_service("svc-b", namespace), kube_slice("svc-b-1", "svc-b", namespace, [b]),
                  gateway_class, gw_a, gw_b, route_a, route_b)
    base = "/apis/gateway.networking.k8s.io/v1"

    def ours() -> dict:
        items = get(cluster, f"/api/v1/namespaces/{namespace}/services?labelSelector="
                             "app.kubernetes.io%2Fmanaged-by%3Dtidegate")["items"]
        return {i["metadata"]["annotations"]["tidegate.io/gateway"]: i for i in items}

    harness.wait_until(lambda: len(ours()) == 2, 20, "a Service for each Gateway")
    svcs = ours()
    sa, sb = svcs[f"{namespace}/gw-a"], svcs[f"{namespace}/gw-b"]
    # Owned by the published Service: deleting it (uninstalling the chart) deletes them.
    published_uid = get(cluster, f"/api/v1/namespaces/{namespace}/services/tidegate")[
        "metadata"]["uid"]
    for svc in (sa, sb):
        assert svc["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Service", "name": "tidegate", "uid": published_uid}]
    for svc in (sa, sb):
        assert svc["spec"]["selector"] == {"app": "tidegate-test"}
        assert svc["spec"]["type"] == "ClusterIP"
        assert svc["metadata"]["name"].startswith("tg-gw-")
    assert [(p["name"], p["port"]) for p in sa["spec"]["ports"]] == [("http-80", 80)]
    assert [(p["name"], p["port"]) for p in sb["spec"]["ports"]] == [("http-80", 80),
                                                                     ("http-8080", 8080)]
    targets = [p["targetPort"] for svc in (sa, sb) for p in svc["spec"]["ports"]]
    assert len(set(targets)) == 3 and all(first <= t <= last for t in targets)

    # The data plane listens on each target port with that Gateway's routes only.
    def backend_on(port: int) -> str | int:
        try:
            r = harness.request(port, "GET", "/", "a.example", timeout=3.0)
        except OSError:
            return "refused"
        return r.header("X-Backend") if r.status == 200 else r.status
    harness.wait_until(lambda: backend_on(sa["spec"]["ports"][0]["targetPort"]) == "own-a", 20,
                       "gw-a's listener")
    for p in sb["spec"]["ports"]:
        harness.wait_until(lambda: backend_on(p["targetPort"]) == "own-b", 20, "gw-b's listeners")

    # Each Gateway's address is its own Service's ClusterIP.
    def address_of(name: str) -> list:
        gw = get(cluster, f"{base}/namespaces/{namespace}/gateways/{name}")
        st = gw.get("status", {})
        if conditions(st).get("Programmed", {}).get("status") != "True":
            return []
        return st.get("addresses", [])
    harness.wait_until(lambda: address_of("gw-a") and address_of("gw-b"), 20,
                       "both Gateways programmed with an address")
    assert address_of("gw-a") == [{"type": "IPAddress", "value": sa["spec"]["clusterIP"]}]
    assert address_of("gw-b") == [{"type": "IPAddress", "value": sb["spec"]["clusterIP"]}]
    assert sa["spec"]["clusterIP"] != sb["spec"]["clusterIP"]

    # gw-b loses its second port: its Service follows; then gw-b goes: so does its Service.
    gw_b["spec"]["listeners"] = gw_b["spec"]["listeners"][:1]
    cluster.apply(gw_b)
    harness.wait_until(lambda: [p["port"] for p in ours()[f"{namespace}/gw-b"]["spec"]["ports"]]
                       == [80], 20, "gw-b's Service to lose port 8080")
    assert ours()[f"{namespace}/gw-b"]["spec"]["clusterIP"] == sb["spec"]["clusterIP"]
    cluster.kubectl("delete", "gateway", "gw-b", "-n", namespace)
    harness.wait_until(lambda: set(ours()) == {f"{namespace}/gw-a"}, 20,
                       "gw-b's Service to be deleted")
    # The published Service is never touched.
    assert get(cluster, f"/api/v1/namespaces/{namespace}/services/tidegate")["spec"]["ports"][0][
        "targetPort"] == 8080
def test_backend_tls_policy_config_map_and_ancestor_status(cluster, namespace, kube_stack_factory,
                                                          tmp_path):
    """A BackendTLSPolicy from the API server: the ConfigMap it names is fetched when it appears
    after the policy (until then the upstream fails closed, 503), a change of its CA is followed
    (502 with another CA), and the policy's ancestors[] entry is written for our Gateway."""
    install_gateway_crds(cluster)
    ca = harness.CertAuthority(tmp_path / "ca")
    other = harness.CertAuthority(tmp_path / "other")
    ca.issue("backend", ["backend.internal"], "ec")
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace, "--publish-address",
                                           PUBLISHED]))
    host = backend_address()
    b = harness.TlsBackend("tls", ca.folder / "backend.crt", ca.folder / "backend.key", host,
                           harness.free_port(host))
    s.backends.append(b)
    class_name = "tgb-" + namespace

    def config_map(pem: bytes) -> dict:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "backend-ca", "namespace": namespace},
                "data": {"ca.crt": pem.decode()}}
    cluster.apply(
        kube_service("svc", namespace),
        harness.endpoint_slice("svc-1", "svc", [b.host], b.port, namespace=namespace),
        *gateway_objects(namespace, class_name),
        http_route(namespace, "tls", "tls.example", [{"backendRefs": [{"name": "svc", "port": 80}]}]),
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
         "metadata": {"name": "tls", "namespace": namespace},
         "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "svc"}],
                  "validation": {"caCertificateRefs": [
                      {"group": "", "kind": "ConfigMap", "name": "backend-ca"}],
                      "hostname": "backend.internal"}}})
    s.wait_status("/", "tls.example", 503)
    assert b.handshakes == 0
    base = "/apis/gateway.networking.k8s.io/v1"
    policy_path = f"{base}/namespaces/{namespace}/backendtlspolicies/tls"

    def ancestor(reason: str):
        def check():
            ancestors = get(cluster, policy_path).get("status", {}).get("ancestors", [])
            return (len(ancestors) == 1 and ancestors[0]["ancestorRef"]["name"] == "gw"
                    and conditions(ancestors[0])["Accepted"]["reason"] == reason)
        return check
    harness.wait_until(ancestor("NoValidCACertificate"), 20, "the policy's status, no CA yet")

    cluster.apply(config_map(ca.ca_pem))
    s.wait_backend("/", "tls.example", "tls", timeout=20)
    assert set(b.server_names) == {"backend.internal"}
    harness.wait_until(ancestor("Accepted"), 20, "the policy to be accepted")
    (entry,) = get(cluster, policy_path)["status"]["ancestors"]
    assert entry["controllerName"] == CONTROLLER
    assert conditions(entry)["ResolvedRefs"]["status"] == "True"

    cluster.apply(config_map(other.ca_pem))
    s.wait_status("/", "tls.example", 502)

    # A ConfigMap no policy names is dropped on arrival; when the policy starts naming it, the
    # controller fetches it by name.
    late = config_map(ca.ca_pem)
    late["metadata"]["name"] = "late-ca"
    cluster.apply(late)
    time.sleep(1)  # its watch event arrives and it is dropped (no policy names it yet)
    policy = get(cluster, policy_path)
    policy["spec"]["validation"]["caCertificateRefs"][0]["name"] = "late-ca"
    policy.pop("status", None)
    for k in ("managedFields", "resourceVersion"):
        policy["metadata"].pop(k, None)
    cluster.apply(policy)
    s.wait_backend("/", "tls.example", "tls", timeout=20)
    log = s.controller.log()
    assert_nothing_refused(log)


def test_without_the_crds_serves_ingresses_and_picks_the_gateway_api_up_once_installed(
        own_cluster, kube_stack_factory):
    """The Gateway API CRDs are optional, as the SubstitutionRuleSet CRD is: a controller started
    without them serves Ingresses, rechecks every --crd-recheck-interval, and once they are
    installed routes a Gateway's HTTPRoute and GRPCRoute through the data plane and writes the
    status of the class, the Gateway and both routes, without a restart."""
    from grpc_backend import GrpcBackend, channel
    c = own_cluster
    ns = "nogw"
    c.create_namespace(ns)
    s = kube_stack_factory(c, ["--watch-namespace", ns, "--crd-recheck-interval", "1",
                               "--publish-address", PUBLISHED, "--election-lease-seconds", "3"])
    web, gw_backend = backends(s, "ing", "gw")
    gh = backend_address()
    g = GrpcBackend("grpc", host=gh)
    try:
        c.apply(kube_service("web", ns), kube_slice("web-1", "web", ns, [web]),
                kube_ingress("web", ns, "ing.example", "web"))
        start(s)
        s.wait_backend("/", "ing.example", "ing", timeout=20)
        for plural in ("gateways", "httproutes", "grpcroutes"):
            s.controller.wait_for_log(
                rf"{plural}\.gateway\.networking\.k8s\.io is not served \(404", timeout=10)
        assert not s.crashed()

        installed = time.monotonic()
        install_gateway_crds(c)
        class_name = "tg-nogw"
        grpc_svc = kube_service("grpc", ns)
        grpc_route = {
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
            "metadata": {"name": "echo", "namespace": ns},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["grpc.example"],
                     "rules": [{"matches": [{"method": {"service": "test.Echo"}}],
                                "backendRefs": [{"name": "grpc", "port": 80}]}]}}
        broken_grpc = {
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
            "metadata": {"name": "broken", "namespace": ns},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["broken-grpc.example"],
                     "rules": [{"backendRefs": [{"name": "no-such-service", "port": 80}]}]}}
        c.apply(kube_service("gw-svc", ns), kube_slice("gw-svc-1", "gw-svc", ns, [gw_backend]),
                grpc_svc, harness.endpoint_slice("grpc-1", "grpc", [g.host], g.port,
                                                 namespace=ns),
                *gateway_objects(ns, class_name),
                http_route(ns, "web", "gw.example",
                           [{"backendRefs": [{"name": "gw-svc", "port": 80}]}]),
                grpc_route, broken_grpc)
        s.wait_backend("/", "gw.example", "gw", timeout=30)
        harness.report(f"kube: Gateway API CRDs installed -> HTTPRoute served in "
                       f"{time.monotonic() - installed:.1f} s (--crd-recheck-interval 1)")
        for plural in GATEWAY_CRDS:
            s.controller.wait_for_log(
                rf"{re.escape(plural)}\.gateway\.networking\.k8s\.io is served now", timeout=10)

        def unary():
            import grpc
            try:
                with channel(s.port, "grpc.example") as ch:
                    return ch.unary_unary("/test.Echo/Unary").with_call(b"hi", timeout=3)[0]
            except grpc.RpcError:
                return None
        assert harness.wait_until(unary, 20, "the GRPCRoute to route") == b"grpc:hi"

        base = "/apis/gateway.networking.k8s.io/v1"

        def ours(path: str) -> dict:
            """Our parents[] entry's conditions (empty until written), and the generation."""
            obj = get(c, f"{base}/namespaces/{ns}/{path}")
            entries = [p for p in obj.get("status", {}).get("parents", [])
                       if p["controllerName"] == CONTROLLER]
            return {"generation": obj["metadata"]["generation"],
                    "conditions": conditions(entries[0]) if entries else {}}

        def written() -> bool:
            gc = get(c, f"{base}/gatewayclasses/{class_name}")
            gw = get(c, f"{base}/namespaces/{ns}/gateways/gw")
            listeners = gw.get("status", {}).get("listeners", [])
            return (conditions(gc.get("status", {})).get("Accepted", {}).get("status") == "True"
                    and conditions(gw.get("status", {})).get("Programmed", {}).get("status")
                    == "True"
                    and [li.get("attachedRoutes") for li in listeners] == [3]
                    and all(ours(r)["conditions"] for r in
                            ("httproutes/web", "grpcroutes/echo", "grpcroutes/broken")))
        harness.wait_until(written, 20, "the Gateway API status to be written")

        gw = get(c, f"{base}/namespaces/{ns}/gateways/gw")
        assert gw["status"]["addresses"] == [{"type": "IPAddress", "value": PUBLISHED}]
        for cond in conditions(gw["status"]).values():
            assert cond["observedGeneration"] == gw["metadata"]["generation"], cond
        (listener,) = gw["status"]["listeners"]
        assert {"group": "gateway.networking.k8s.io", "kind": "GRPCRoute"} in \
            listener["supportedKinds"]
        for path in ("httproutes/web", "grpcroutes/echo"):
            st = ours(path)
            cs = st["conditions"]
            assert cs["Accepted"]["status"] == "True", (path, cs)
            assert cs["ResolvedRefs"]["status"] == "True", (path, cs)
            for cond in cs.values():
                assert cond["observedGeneration"] == st["generation"], (path, cond)
        st = ours("grpcroutes/broken")
        cs = st["conditions"]
        assert cs["Accepted"]["status"] == "True", cs
        assert (cs["ResolvedRefs"]["status"], cs["ResolvedRefs"]["reason"]) == \
            ("False", "BackendNotFound"), cs
        assert cs["ResolvedRefs"]["observedGeneration"] == st["generation"]

        # A change of the GRPCRoute bumps its generation; the status follows with the new one.
        grpc_route["spec"]["rules"][0]["backendRefs"] = [{"name": "no-such-service", "port": 80}]
        c.apply(grpc_route)

        def grpc_route_follows() -> bool:
            st = ours("grpcroutes/echo")
            rr = st["conditions"].get("ResolvedRefs", {})
            return (st["generation"] > 1 and rr.get("status") == "False"
                    and rr.get("observedGeneration") == st["generation"])
        harness.wait_until(grpc_route_follows, 20, "the GRPCRoute's status to follow its change")

        # The Ingress was served all along.
        assert s.get("/", "ing.example").header("X-Backend") == "ing"
        log = s.controller.log()
        assert_nothing_refused(log)
    finally:
        g.stop()
