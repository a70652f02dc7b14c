"""Gateway API end to end on loopback: a GatewayClass, a Gateway and HTTPRoutes in the manifest
folder -> controller -> data plane -> real backends (docs/gateway-api.md). Over HTTP/1.1 and
HTTP/2. The same data plane features the conformance suite checks on the one-node cluster:
matches by path, method, header and query parameter; weights; the request and response header
modifiers; redirects (every status code); URL rewrites; 500 for backends that cannot be
resolved; CORS; TLS to backends with a BackendTLSPolicy; a Service port's appProtocol
(kubernetes.io/h2c to a real HTTP/2 cleartext backend, kubernetes.io/ws to a WebSocket one)."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

import harness
from h2_backend import H2Server
from harness import endpoint_slice, proto_request, service

pytestmark = pytest.mark.usefixtures("over_both_protocols")

GATEWAY_CLASS = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "GatewayClass",
    "metadata": {"name": "tidegate"},
    "spec": {"controllerName": "tidegate.io/gateway-controller"},
}

GATEWAY = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "Gateway",
    "metadata": {"name": "gw", "namespace": "default"},
    "spec": {
        "gatewayClassName": "tidegate",
        "listeners": [{"name": "http", "port": 80, "protocol": "HTTP",
                       "allowedRoutes": {"namespaces": {"from": "Same"}}}],
    },
}


def http_route(name: str, hostnames: list[str], rules: list[dict],
               created: str = "2026-01-01T00:00:00Z") -> dict:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": hostnames, "rules": rules},
    }


def backend(name: str, weight: int | None = None, port: int = 80) -> dict:
    ref = {"name": name, "port": port}
    if weight is not None:
        ref["weight"] = weight
    return ref


@pytest.fixture
def gateway(stack):
    """Four backends behind four Services, the class and the Gateway; routes are the tests'."""
    b = {n: stack.backend(n) for n in ("a", "b", "c", "d")}
    stack.manifests.write("services.yaml", *[service(f"svc-{n}") for n in b])
    stack.manifests.write(
        "slices.yaml",
        *[endpoint_slice(f"svc-{n}-1", f"svc-{n}", [x.host], x.port) for n, x in b.items()])
    stack.manifests.write("gateway.yaml", GATEWAY_CLASS, GATEWAY)
    stack.backends_by_name = b
    return stack


def routes_to(stack, host, target, **kw):
    r = stack.get(target, host, **kw)
    return r.header("X-Backend") if r.status == 200 else r.status


def test_matches_by_path_method_header_and_query(gateway):
    s = gateway
    s.manifests.write("routes.yaml", http_route("match", ["match.example.com"], [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
         "backendRefs": [backend("svc-a")]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/"},
                      "headers": [{"name": "Version", "value": "two"}]}],
         "backendRefs": [backend("svc-b")]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/"},
                      "queryParams": [{"name": "debug", "value": "1"}]}],
         "backendRefs": [backend("svc-c")]},
        {"matches": [{"path": {"type": "Exact", "value": "/write"}, "method": "POST"}],
         "backendRefs": [backend("svc-d")]},
    ]))
    s.wait_backend("/x?debug=1", "match.example.com", "c")
    assert routes_to(s, "match.example.com", "/x") == "a"
    assert routes_to(s, "match.example.com", "/x", headers={"version": "two"}) == "b"
    assert routes_to(s, "match.example.com", "/x", headers={"Version": "three"}) == "a"
    # A header match counts before a query match (the Gateway API's precedence).
    assert routes_to(s, "match.example.com", "/x?debug=1", headers={"Version": "two"}) == "b"
    assert routes_to(s, "match.example.com", "/x?debug=2") == "a"
    assert routes_to(s, "match.example.com", "/write") == "a"  # GET: the method route passes
    r = proto_request(s.port, "POST", "/write", "match.example.com", body=b"x")
    assert r.status == 200 and r.header("X-Backend") == "d"
    # Other hosts are not this route's.
    assert s.get("/x", "other.example.com").status == 404


def test_weights_split_requests(gateway):
    s = gateway
    s.manifests.write("routes.yaml", http_route("split", ["split.example.com"], [
        {"backendRefs": [backend("svc-a", 3), backend("svc-b", 1), backend("svc-c", 0)]},
    ]))
    s.wait_route("/", "split.example.com", lambda r: r.status == 200)
    counts = Counter(routes_to(s, "split.example.com", "/") for _ in range(400))
    assert set(counts) <= {"a", "b"}, counts
    # 3:1 with the golden-ratio spread: within a few requests of 300/100 (two workers, each
    # with its own turns).
    assert 280 <= counts["a"] <= 320 and 80 <= counts["b"] <= 120, counts


def test_unresolvable_backends_answer_500(gateway):
    s = gateway
    s.manifests.write("routes.yaml", http_route("broken", ["broken.example.com"], [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/missing"}}],
         "backendRefs": [backend("no-such-service")]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/half"}}],
         "backendRefs": [backend("svc-a", 1), backend("no-such-service", 1)]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
         "backendRefs": [backend("svc-b")]},
    ]))
    s.wait_backend("/", "broken.example.com", "b")
    assert s.get("/missing", "broken.example.com").status == 500
    got = Counter(routes_to(s, "broken.example.com", "/half") for _ in range(100))
    assert set(got) == {"a", 500}, got
    assert 40 <= got[500] <= 60, got


def test_header_modifiers(gateway):
    s = gateway
    s.manifests.write("routes.yaml", http_route("headers", ["headers.example.com"], [
        {"filters": [
            {"type": "RequestHeaderModifier", "requestHeaderModifier": {
                "set": [{"name": "X-Set", "value": "by-gateway"}],
                "add": [{"name": "X-Add", "value": "added"}],
                "remove": ["X-Remove"]}},
            {"type": "ResponseHeaderModifier", "responseHeaderModifier": {
                "set": [{"name": "X-Frame-Options", "value": "DENY"}],
                "add": [{"name": "X-Response-Add", "value": "yes"}],
                "remove": ["X-Body-SHA256"]}}],
         "backendRefs": [backend("svc-a")]},
    ]))
    s.wait_backend("/", "headers.example.com", "a")
    r = s.get("/?respond=bytes&size=10", "headers.example.com",
              headers={"X-Set": "from-client", "X-Add": "client", "X-Remove": "secret"})
    assert r.status == 200
    assert r.header("X-Frame-Options") == "DENY"
    assert r.header("X-Response-Add") == "yes"
    assert r.header("X-Body-SHA256") is None
    seen = gateway.backends_by_name["a"].requests[-1]
    fields = [(k.lower(), v) for k, v in seen["headers"]]
    assert ("x-set", "by-gateway") in fields and ("x-set", "from-client") not in fields
    assert ("x-add", "client") in fields and ("x-add", "added") in fields
    assert not any(k == "x-remove" for k, _ in fields)


def test_redirects(gateway):
    s = gateway
    s.manifests.write("routes.yaml", http_route("redirects", ["redirect.example.com"], [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/scheme"}}],
         "filters": [{"type": "RequestRedirect",
                      "requestRedirect": {"scheme": "https", "statusCode": 301}}]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/host"}}],
         "filters": [{"type": "RequestRedirect",
                      "requestRedirect": {"hostname": "elsewhere.example.com"}}]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
         "filters": [{"type": "RequestRedirect", "requestRedirect": {
             "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"},
             "port": 8443, "statusCode": 302}}]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/see-other"}}],
         "filters": [{"type": "RequestRedirect", "requestRedirect": {
             "path": {"type": "ReplaceFullPath", "replaceFullPath": "/result"},
             "statusCode": 303}}]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/moved"}}],
         "filters": [{"type": "RequestRedirect", "requestRedirect": {
             "hostname": "new.example.com", "scheme": "https", "statusCode": 308}}]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/temporary"}}],
         "filters": [{"type": "RequestRedirect", "requestRedirect": {"statusCode": 307,
                                                                     "port": 8080}}]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
         "backendRefs": [backend("svc-a")]},
    ]))
    s.wait_route("/scheme/x", "redirect.example.com", lambda r: r.status == 301)
    r = s.get("/scheme/x?q=1", "redirect.example.com")
    assert r.header("Location") == "https://redirect.example.com/scheme/x?q=1"
    r = s.get("/host/y", "redirect.example.com")
    assert r.status == 302 and r.header("Location") == "http://elsewhere.example.com/host/y"
    r = s.get("/old/z", "redirect.example.com")
    assert r.status == 302 and r.header("Location") == "http://redirect.example.com:8443/new/z"
    # 303 See Other (a POST's answer is fetched with GET), 308 (method and body kept), 307.
    r = proto_request(s.port, "POST", "/see-other/form?id=3", "redirect.example.com", body=b"x")
    assert r.status == 303 and r.header("Location") == "http://redirect.example.com/result?id=3"
    r = proto_request(s.port, "PUT", "/moved/doc", "redirect.example.com", body=b"x")
    assert r.status == 308 and r.header("Location") == "https://new.example.com/moved/doc"
    r = s.get("/temporary/t", "redirect.example.com")
    assert r.status == 307 and r.header("Location") == "http://redirect.example.com:8080/temporary/t"
    assert routes_to(s, "redirect.example.com", "/other") == "a"


def test_url_rewrite(gateway):
    s = gateway
    s.manifests.write("routes.yaml", http_route("rewrite", ["rewrite.example.com"], [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
         "filters": [{"type": "URLRewrite", "urlRewrite": {
             "hostname": "internal.example.com",
             "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}}}],
         "backendRefs": [backend("svc-a")]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/full"}}],
         "filters": [{"type": "URLRewrite", "urlRewrite": {
             "path": {"type": "ReplaceFullPath", "replaceFullPath": "/one"}}}],
         "backendRefs": [backend("svc-b")]},
    ]))
    s.wait_backend("/api/items", "rewrite.example.com", "a")
    r = s.get("/api/items?id=7", "rewrite.example.com")
    assert r.status == 200
    assert r.json()["path"] == "/v2/items?id=7"
    host = [v for k, v in r.json()["headers"] if k.lower() == "host"]
    assert host == ["internal.example.com"]
    r = s.get("/full/a/b?x=1", "rewrite.example.com")
    assert r.status == 200 and r.json()["path"] == "/one?x=1"


def test_grpc_route_matches_service_and_method(stack):
    """A GRPCRoute: a method match and a service match to two real grpcio backends, over
    cleartext HTTP/2 (GRPCRoute backends speak h2c); an unknown service is not routed."""
    import grpc

    from grpc_backend import GrpcBackend, channel
    from harness import wait_until
    g1, g2 = GrpcBackend("g1"), GrpcBackend("g2")
    try:
        stack.manifests.write("gateway.yaml", GATEWAY_CLASS, GATEWAY)
        stack.manifests.write(
            "grpc.yaml", service("svc-g1"), service("svc-g2"),
            endpoint_slice("svc-g1-1", "svc-g1", [g1.host], g1.port),
            endpoint_slice("svc-g2-1", "svc-g2", [g2.host], g2.port),
            {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
             "metadata": {"name": "echo", "namespace": "default"},
             "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["grpc.example.com"],
                      "rules": [
                          {"name": "unary",  # a named rule (GRPCRouteNamedRouteRule)
                           "matches": [{"method": {"service": "test.Echo", "method": "Unary"}}],
                           "backendRefs": [backend("svc-g1")]},
                          {"matches": [{"method": {"service": "test.Echo"}}],
                           "backendRefs": [backend("svc-g2")]},
                          {"matches": [{"method": {"service": "test.Missing"}}],
                           "backendRefs": [backend("no-such-service")]}]}})

        def unary(method: str):
            with channel(stack.port, "grpc.example.com") as ch:
                return ch.unary_unary(method).with_call(b"hi", timeout=3)

        def routed():
            try:
                return unary("/test.Echo/Unary")
            except grpc.RpcError:
                return None
        response, call = wait_until(routed, 15, "the GRPCRoute to route")
        assert response == b"g1:hi"
        assert ("x-backend", "g1") in call.trailing_metadata()
        with channel(stack.port, "grpc.example.com") as ch:
            replies = list(ch.unary_stream("/test.Echo/ServerStream")(b"3", timeout=3))
        assert replies and all(r.startswith(b"g2:") for r in replies), replies
        try:
            unary("/other.Service/Call")
            raise AssertionError("an unrouted service answered")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNIMPLEMENTED, e
        # A rule whose backend cannot be used: UNAVAILABLE (GRPCRoute's rule), not UNKNOWN.
        try:
            unary("/test.Missing/Call")
            raise AssertionError("a rule without a usable backend answered")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    finally:
        g1.stop()
        g2.stop()


def test_cors_filter(gateway):
    """The CORS filter with the conformance suite's cases: exact and wildcard origins, a
    preflight answered by the proxy, "*" echoed when credentials are allowed."""
    s = gateway
    s.manifests.write("routes.yaml", http_route("cors", ["cors.example.com"], [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/cors-1"}}],
         "filters": [{"type": "CORS", "cors": {
             "allowOrigins": ["https://www.foo.com", "https://*.bar.com"],
             "allowMethods": ["GET", "OPTIONS"], "allowHeaders": ["x-header-1", "x-header-2"],
             "exposeHeaders": ["x-header-3", "x-header-4"], "allowCredentials": True,
             "maxAge": 3600}}],
         "backendRefs": [backend("svc-a")]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/any"}}],
         "filters": [{"type": "CORS", "cors": {
             "allowOrigins": ["*"], "allowMethods": ["*"], "allowHeaders": ["*"],
             "allowCredentials": True}}],
         "backendRefs": [backend("svc-a")]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/plain"}}],
         "filters": [{"type": "CORS", "cors": {"allowOrigins": ["*"], "allowMethods": ["PUT"]}}],
         "backendRefs": [backend("svc-a")]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/unsupported"}}],
         "filters": [{"type": "ExtensionRef",
                      "extensionRef": {"group": "example.com", "kind": "Thing", "name": "x"}}],
         "backendRefs": [backend("svc-a")]},
    ]))
    preflight = {"Origin": "https://xpto.www.bar.com", "Access-Control-Request-Method": "GET",
                 "Access-Control-Request-Headers": "x-header-1, x-header-2"}
    s.wait_backend("/cors-1", "cors.example.com", "a")
    r = proto_request(s.port, "OPTIONS", "/cors-1", "cors.example.com", headers=preflight)
    assert r.status == 204
    assert r.header("Access-Control-Allow-Origin") == "https://xpto.www.bar.com"
    assert r.header("Access-Control-Allow-Methods") == "GET, OPTIONS"
    assert r.header("Access-Control-Allow-Headers") == "x-header-1, x-header-2"
    assert r.header("Access-Control-Expose-Headers") == "x-header-3, x-header-4"
    assert r.header("Access-Control-Max-Age") == "3600"
    assert r.header("Access-Control-Allow-Credentials") == "true"
    # The default port of the scheme is the same origin, written or not.
    r = s.get("/cors-1", "cors.example.com", headers={"Origin": "https://www.foo.com:443"})
    assert r.status == 200 and r.header("Access-Control-Allow-Origin") == "https://www.foo.com:443"
    # Not an allowed origin: no CORS fields; its preflight is answered by the proxy all the same
    # (204 without them), not sent to the backend.
    r = s.get("/cors-1", "cors.example.com", headers={"Origin": "https://foobar.com"})
    assert r.status == 200 and r.header("Access-Control-Allow-Origin") is None
    before = len(s.backends_by_name["a"].requests)
    r = proto_request(s.port, "OPTIONS", "/cors-1", "cors.example.com", headers={
        "Origin": "https://foobar.com", "Access-Control-Request-Method": "GET"})
    assert r.status == 204 and r.header("Access-Control-Allow-Origin") is None
    assert len(s.backends_by_name["a"].requests) == before
    # "*" with credentials: the request's own origin, method and headers.
    r = proto_request(s.port, "OPTIONS", "/any", "cors.example.com", headers={
        "Origin": "https://other.foo.com", "Access-Control-Request-Method": "PUT",
        "Access-Control-Request-Headers": "x-header-1"})
    assert r.status == 204
    assert r.header("Access-Control-Allow-Origin") == "https://other.foo.com"
    assert r.header("Access-Control-Allow-Methods") == "PUT"
    assert r.header("Access-Control-Allow-Headers") == "x-header-1"
    assert r.header("Access-Control-Allow-Credentials") == "true"
    assert r.header("Access-Control-Max-Age") == "5"
    # "*" without credentials: a literal "*", never credentials.
    r = proto_request(s.port, "PUT", "/plain", "cors.example.com", body=b"x",
                      headers={"Origin": "https://foobar.com:12345"})
    assert r.status == 200 and r.header("Access-Control-Allow-Origin") == "*"
    assert r.header("Access-Control-Allow-Credentials") is None
    # A rule with a filter Tidegate does not support answers 500 rather than skipping it.
    assert s.get("/unsupported", "cors.example.com").status == 500


def test_backend_tls_policy(stack, tmp_path):
    """A BackendTLSPolicy makes the Service's upstream TLS: SNI and verification for its
    hostname with the CA in a ConfigMap; a wrong hostname fails (502); a missing ConfigMap
    fails closed (503)."""
    from harness import CertAuthority, TlsBackend
    ca = CertAuthority(tmp_path / "ca")
    ca.issue("backend", ["backend.internal"], "ec")
    b = TlsBackend("tls", ca.folder / "backend.crt", ca.folder / "backend.key")
    stack.backends.append(b)

    def policy(name: str, svc: str, hostname: str, config_map: str) -> dict:
        return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": svc}],
                         "validation": {"caCertificateRefs": [
                             {"group": "", "kind": "ConfigMap", "name": config_map}],
                             "hostname": hostname}}}

    services = []
    for svc in ("svc-tls", "svc-wrong-name", "svc-no-ca"):
        services += [service(svc, port_name="https"),
                     endpoint_slice(f"{svc}-1", svc, [b.host], b.port, port_name="https")]
    stack.manifests.write("gateway.yaml", GATEWAY_CLASS, GATEWAY)
    stack.manifests.write(
        "tls.yaml", *services,
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "backend-ca", "namespace": "default"},
         "data": {"ca.crt": ca.ca_pem.decode()}},
        policy("tls", "svc-tls", "backend.internal", "backend-ca"),
        policy("wrong-name", "svc-wrong-name", "other.internal", "backend-ca"),
        policy("no-ca", "svc-no-ca", "backend.internal", "no-such-config-map"),
        http_route("tls", ["tls.example.com"], [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/wrong-name"}}],
             "backendRefs": [backend("svc-wrong-name")]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/no-ca"}}],
             "backendRefs": [backend("svc-no-ca")]},
            {"backendRefs": [backend("svc-tls")]}]))
    r = stack.wait_backend("/hello", "tls.example.com", "tls")
    assert r.json()["path"] == "/hello"
    assert "backend.internal" in b.server_names
    assert stack.get("/wrong-name", "tls.example.com").status == 502
    assert stack.get("/no-ca", "tls.example.com").status == 503


def test_request_timeout_bounds_the_whole_exchange(gateway):
    """timeouts.request is a deadline for the whole exchange, not a wait between two reads: a
    response whose every chunk comes quickly but whose whole takes longer is cut at it, and a
    backend slower than it gets the client a 504 at it."""
    s = gateway
    s.manifests.write("routes.yaml", http_route("timeouts", ["t.example.com"], [
        {"timeouts": {"request": "1s"}, "backendRefs": [backend("svc-a")]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/free"}}],
         "backendRefs": [backend("svc-a")]},
    ]))
    s.wait_backend("/", "t.example.com", "a")
    slow_body = "?respond=chunked&chunks=8&chunk_size=100&delay_ms=300"  # 2.4 s in all
    # Without the timeout the same response arrives whole.
    r = s.get("/free" + slow_body, "t.example.com")
    assert r.status == 200 and len(r.body) == 800
    start = time.monotonic()
    try:
        r = s.get("/" + slow_body, "t.example.com")
        whole = r.status == 200 and len(r.body) == 800
    except Exception:  # the connection (HTTP/1.1) or stream (HTTP/2) ends short
        whole = False
    assert not whole
    assert time.monotonic() - start < 2.0
    s.backends_by_name["a"].slow_down(2.0)
    try:
        start = time.monotonic()
        r = s.get("/", "t.example.com")
        took = time.monotonic() - start
    finally:
        s.backends_by_name["a"].slow_down(0)
    assert r.status == 504, (r.status, r.body)
    assert 0.9 <= took < 1.8, took


def test_a_request_no_rule_of_its_hostname_takes_falls_to_less_specific_ones(gateway):
    """The Gateway API orders rules by hostname, then by path: a request for a route hostname
    whose rules do not take it goes on to routes of less specific hostnames."""
    s = gateway
    s.manifests.write("routes.yaml",
                      http_route("specific", ["fall.example.com"], [
                          {"matches": [{"path": {"type": "PathPrefix", "value": "/b"}}],
                           "backendRefs": [backend("svc-b")]}]),
                      http_route("wild", ["*.example.com"], [
                          {"matches": [{"path": {"type": "PathPrefix", "value": "/w"}}],
                           "backendRefs": [backend("svc-c")]}]),
                      http_route("general", [], [{"backendRefs": [backend("svc-a")]}]))
    s.wait_backend("/b", "fall.example.com", "b")
    assert routes_to(s, "fall.example.com", "/w") == "c"
    assert routes_to(s, "fall.example.com", "/a") == "a"
    assert routes_to(s, "other.example.com", "/b") == "a"
    assert routes_to(s, "other.example.com", "/w") == "c"


def with_app_protocol(svc: dict, app_protocol: str) -> dict:
    svc["spec"]["ports"][0]["appProtocol"] = app_protocol
    return svc


class H2cBackend(H2Server):
    """An HTTP/2 cleartext backend with prior knowledge only, as the conformance suite's
    echo-basic on its h2c port: each request is answered 200 with a JSON echo of its
    pseudo-headers and X-Backend; a connection that does not start with the HTTP/2 preface (an
    HTTP/1.1 request) is closed (counted in `refused`)."""

    def __init__(self, name: str):
        self.name = name
        self.requests: list[dict] = []
        super().__init__()

    def answer(self, conn, stream_id, head, body, trailers):
        self.requests.append(head)
        echo = json.dumps({"protocol": "HTTP/2", "method": head.get(":method"),
                           "path": head.get(":path"),
                           "authority": head.get(":authority")}).encode()
        conn.send_headers(stream_id, [(":status", "200"), ("content-type", "application/json"),
                                      ("content-length", str(len(echo))),
                                      ("x-backend", self.name)])
        conn.send_data(stream_id, echo, end_stream=True)


def test_h2c_backend_by_app_protocol(stack):
    """An HTTPRoute to a Service port with appProtocol kubernetes.io/h2c: the data plane speaks
    HTTP/2 with prior knowledge to it, for HTTP/1.1 and HTTP/2 clients alike (the conformance
    suite's HTTPRouteBackendProtocolH2C). The same backend behind a port without appProtocol
    gets HTTP/1.1, which it refuses (502)."""
    b = H2cBackend("h2c")
    try:
        stack.manifests.write("gateway.yaml", GATEWAY_CLASS, GATEWAY)
        stack.manifests.write(
            "h2c.yaml",
            with_app_protocol(service("svc-h2c"), "kubernetes.io/h2c"), service("svc-plain"),
            endpoint_slice("svc-h2c-1", "svc-h2c", [b.host], b.port),
            endpoint_slice("svc-plain-1", "svc-plain", [b.host], b.port),
            http_route("h2c", ["h2c.example.com"], [
                {"matches": [{"path": {"type": "PathPrefix", "value": "/plain"}}],
                 "backendRefs": [backend("svc-plain")]},
                {"backendRefs": [backend("svc-h2c")]}]))
        r = stack.wait_backend("/hello?x=1", "h2c.example.com", "h2c")
        echo = r.json()
        assert echo == {"protocol": "HTTP/2", "method": "GET", "path": "/hello?x=1",
                        "authority": "h2c.example.com"}, echo
        r = proto_request(stack.port, "POST", "/upload", "h2c.example.com", body=b"x" * 1000)
        assert r.status == 200 and r.json()["method"] == "POST"
        # Without appProtocol the port is HTTP/1.1: this backend closes such a connection.
        assert stack.get("/plain", "h2c.example.com").status == 502
        # (the backend's thread counts the connection it refused on its own time)
        harness.wait_until(lambda: b.refused >= 1, 5, "the h2c backend refusing HTTP/1.1")
    finally:
        b.stop()


def test_websocket_to_a_ws_app_protocol_port(stack):
    """A WebSocket through an HTTPRoute to a Service port with appProtocol kubernetes.io/ws (the
    conformance suite's HTTPRouteBackendProtocolWebSocket): the upgrade is forwarded, the
    route's request header modifier and path rewrite apply to it, and frames go both ways. The
    client speaks HTTP/1.1 whatever the run's protocol (no Extended CONNECT on HTTP/2); the
    run's protocol reaches the same port with an ordinary request."""
    from test_websocket import WsBackend, WsClient
    ws = WsBackend("ws")
    try:
        stack.manifests.write("gateway.yaml", GATEWAY_CLASS, GATEWAY)
        stack.manifests.write(
            "ws.yaml", with_app_protocol(service("svc-ws"), "kubernetes.io/ws"),
            endpoint_slice("svc-ws-1", "svc-ws", [ws.host], ws.port),
            http_route("ws", ["ws.example.com"], [
                {"matches": [{"path": {"type": "PathPrefix", "value": "/chat"}}],
                 "filters": [
                     {"type": "URLRewrite", "urlRewrite": {"path": {
                         "type": "ReplacePrefixMatch", "replacePrefixMatch": "/socket"}}},
                     {"type": "RequestHeaderModifier", "requestHeaderModifier": {
                         "set": [{"name": "X-Via-Route", "value": "ws"}]}}],
                 "backendRefs": [backend("svc-ws")]}]))
        stack.wait_route("/chat/plain", "ws.example.com",
                         lambda r: r.status == 200 and r.header("X-Backend") == "ws")
        c = WsClient(stack.port, "ws.example.com", "/chat/room?id=1")
        try:
            assert c.echo(b"hello", 0x1)
            assert c.echo(bytes(range(256)) * 100)
            c.send(b"ping", 0x9)
            assert c.recv() == (0xA, b"ping")
        finally:
            c.close()
        h = ws.handshakes[-1]
        assert h["request-line"] == "GET /socket/room?id=1 HTTP/1.1", h
        assert h["x-via-route"] == "ws" and h["host"] == "ws.example.com", h
        assert h["upgrade"].lower() == "websocket", h
        assert ws.errors == []
        harness.wait_until(lambda: ws.open == 0, 5, "the tunnel to close")
    finally:
        ws.stop()
