"""enable-cors / cors-* and canary Ingresses applied by the data plane, end to end (controller
-> data plane -> real backends). Semantics: docs/annotations.md, "CORS" and "Canary"."""

from __future__ import annotations

import time

import pytest

from harness import ingress, path, proto_request as request, rule, service_with_backend, wait_until

# Every test runs over HTTP/1.1 and over HTTP/2 (conftest.over_both_protocols).
pytestmark = pytest.mark.usefixtures("over_both_protocols")

HOST = "cc.example.com"


def _cors_app(stack, name: str, annotations: dict):
    b = stack.backend(name)
    host = f"{name}.{HOST}"
    stack.manifests.write(f"{name}.yaml", *service_with_backend(f"svc-{name}", b),
                          ingress(name, [rule(host, path("/", f"svc-{name}"))],
                                  annotations={"tidegate.io/enable-cors": "true", **annotations}))
    stack.wait_backend("/", host, name)
    return b, host


def test_cors_preflight_and_simple_requests_for_listed_origins(stack):
    b, host = _cors_app(stack, "listed", {
        "tidegate.io/cors-allow-origin": "https://app.example.com, https://*.example.org",
        "tidegate.io/cors-allow-methods": "GET, POST",
        "tidegate.io/cors-allow-headers": "X-Api-Key, Content-Type",
        "tidegate.io/cors-expose-headers": "X-Total-Count",
        "tidegate.io/cors-max-age": "600",
    })
    before = b.count
    # A preflight from an allowed origin is answered by the proxy: 204, never reaches the backend.
    r = request(stack.port, "OPTIONS", "/api", host, headers={
        "Origin": "https://x.example.org", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "X-Api-Key"})
    assert r.status == 204, (r.status, r.headers)
    assert r.header("Access-Control-Allow-Origin") == "https://x.example.org"
    assert r.header("Access-Control-Allow-Credentials") == "true"
    assert r.header("Access-Control-Allow-Methods") == "GET, POST"
    assert r.header("Access-Control-Allow-Headers") == "X-Api-Key, Content-Type"
    assert r.header("Access-Control-Max-Age") == "600"
    assert "Origin" in (r.header("Vary") or "")
    assert r.body == b""
    assert b.count == before

    # A normal request from an allowed origin goes upstream; the response carries the fields.
    r = stack.get("/api", host, headers={"Origin": "https://app.example.com"})
    assert r.status == 200 and r.header("X-Backend") == "listed"
    assert r.header("Access-Control-Allow-Origin") == "https://app.example.com"
    assert r.header("Access-Control-Allow-Credentials") == "true"
    assert r.header("Access-Control-Expose-Headers") == "X-Total-Count"
    assert "Origin" in (r.header("Vary") or "")
    assert b.count == before + 1

    # Another origin gets no CORS fields, and its preflight goes to the backend.
    r = stack.get("/api", host, headers={"Origin": "https://evil.example.net"})
    assert r.status == 200 and r.header("Access-Control-Allow-Origin") is None
    r = request(stack.port, "OPTIONS", "/api", host, headers={
        "Origin": "https://example.org", "Access-Control-Request-Method": "POST"})
    assert r.header("Access-Control-Allow-Origin") is None
    assert r.header("X-Backend") == "listed"  # answered by the backend, not the proxy
    # No Origin: not a CORS request.
    r = stack.get("/api", host)
    assert r.header("Access-Control-Allow-Origin") is None


def test_cors_any_origin_never_allows_credentials(stack):
    b, host = _cors_app(stack, "star", {})  # defaults: "*", credentials "true"
    r = request(stack.port, "OPTIONS", "/", host, headers={
        "Origin": "https://whoever.example", "Access-Control-Request-Method": "PUT"})
    assert r.status == 204
    assert r.header("Access-Control-Allow-Origin") == "*"
    assert r.header("Access-Control-Allow-Credentials") is None
    assert r.header("Access-Control-Allow-Methods") == "GET, PUT, POST, DELETE, PATCH, OPTIONS"
    assert r.header("Access-Control-Max-Age") == "1728000"
    r = stack.get("/", host, headers={"Origin": "https://whoever.example"})
    assert r.header("Access-Control-Allow-Origin") == "*"
    assert r.header("Access-Control-Allow-Credentials") is None
    # The backend's errors and the proxy's own answers carry the fields too, so a browser sees
    # the error itself rather than a CORS failure.
    r = stack.get("/?respond=status&code=500", host, headers={"Origin": "https://whoever.example"})
    assert r.status == 500 and r.header("Access-Control-Allow-Origin") == "*"
    b.stop()
    r = stack.get("/", host, headers={"Origin": "https://whoever.example"})
    assert r.status == 502 and r.header("Server") == "tidegate", (r.status, r.headers)
    assert r.header("Access-Control-Allow-Origin") == "*"


def test_cors_without_enable_cors_adds_nothing(stack):
    b = stack.backend("plain")
    host = f"plain.{HOST}"
    stack.manifests.write("plain.yaml", *service_with_backend("svc-plain", b),
                          ingress("plain", [rule(host, path("/", "svc-plain"))],
                                  annotations={"tidegate.io/cors-allow-origin": "*"}))
    stack.wait_backend("/", host, "plain")
    r = request(stack.port, "OPTIONS", "/", host, headers={
        "Origin": "https://a.example", "Access-Control-Request-Method": "GET"})
    assert r.header("Access-Control-Allow-Origin") is None and r.header("X-Backend") == "plain"


def _canary_pair(stack, name: str, canary_annotations: dict, main_annotations: dict | None = None):
    main = stack.backend(f"{name}-main")
    canary = stack.backend(f"{name}-canary")
    host = f"{name}.{HOST}"
    main_ing = ingress(f"{name}-main", [rule(host, path("/", f"svc-{name}-main"))],
                       annotations=main_annotations or {})
    canary_ing = ingress(f"{name}-canary", [rule(host, path("/", f"svc-{name}-canary"))],
                         annotations={"tidegate.io/canary": "true", **canary_annotations})
    stack.manifests.write(f"{name}.yaml", *service_with_backend(f"svc-{name}-main", main),
                          *service_with_backend(f"svc-{name}-canary", canary), main_ing,
                          canary_ing)
    return main, canary, host


def wait_canary(stack, host: str, headers: dict) -> None:
    """Until the canary configuration serves (the canary answers the given request)."""
    wait_until(lambda: stack.get("/", host, headers=headers).header("X-Backend") ==
               f"{host.split('.')[0]}-canary", 10, f"{host}: canary configured")


def test_canary_by_header_cookie_and_weight(stack):
    main, canary, host = _canary_pair(stack, "cw", {
        "tidegate.io/canary-weight": "25",
        "tidegate.io/canary-by-header": "X-Canary",
        "tidegate.io/canary-by-cookie": "use_canary"})
    def backend(**headers) -> str:
        r = stack.get("/", host, headers=headers)
        assert r.status == 200, (r.status, r.body)
        return r.header("X-Backend")

    wait_canary(stack, host, {"X-Canary": "always"})

    for _ in range(20):
        assert backend(**{"X-Canary": "always"}) == "cw-canary"
        assert backend(**{"X-Canary": "never", "Cookie": "use_canary=always"}) == "cw-main"
        assert backend(Cookie="a=1; use_canary=always") == "cw-canary"
        assert backend(Cookie="use_canary=never") == "cw-main"
    # The weight: 25% of 400 requests (each worker's split is exact over every 100 of its own
    # requests, so the total is off by at most a few).
    picks = [backend() for _ in range(400)]
    share = picks.count("cw-canary")
    assert 80 <= share <= 120, share
    # Header "X-Canary: other" falls through to the weight.
    picks = [backend(**{"X-Canary": "maybe"}) for _ in range(100)]
    assert 10 <= picks.count("cw-canary") <= 40, picks.count("cw-canary")

    # Metrics count each backend's requests under its own service label (the main Ingress).
    def served(service: str) -> float:
        status, body = stack.dataplane.admin("/metrics")
        assert status == 200
        total = 0.0
        for line in body.splitlines():
            if (line.startswith("tidegate_requests_total{") and f'service="{service}"' in line
                    and 'ingress="cw-main"' in line):
                total += float(line.rpartition(" ")[2])
        return total
    # (A request is recorded just after its last byte is written: allow that moment.)
    wait_until(lambda: served("svc-cw-canary") == canary.count and
               served("svc-cw-main") == main.count, 5, "per-service request counts")


def test_canary_by_header_value_and_removal(stack):
    main, canary, host = _canary_pair(stack, "hv", {
        "tidegate.io/canary-by-header": "X-Region",
        "tidegate.io/canary-by-header-value": "blue"})
    def backend(**headers) -> str:
        return stack.get("/", host, headers=headers).header("X-Backend")

    wait_canary(stack, host, {"X-Region": "blue"})
    before = canary.count
    # Weight 0: nothing without the header; exact value only, no fall-through.
    got = {backend(**{"X-Region": "blue"}) for _ in range(10)}
    assert got == {"hv-canary"}, got
    assert {backend(**{"X-Region": "green"}) for _ in range(10)} == {"hv-main"}
    assert {backend(**{"X-Region": "always"}) for _ in range(10)} == {"hv-main"}
    assert {backend() for _ in range(20)} == {"hv-main"}
    assert canary.count == before + 10

    # Removing the canary Ingress sends everything to the main backend again.
    stack.manifests.write("hv.yaml", *service_with_backend("svc-hv-main", main),
                          ingress("hv-main", [rule(host, path("/", "svc-hv-main"))]))
    deadline = time.monotonic() + 10
    while backend(**{"X-Region": "blue"}) != "hv-main":
        assert time.monotonic() < deadline, "canary still served after its Ingress was removed"
        time.sleep(0.05)
    assert {backend(**{"X-Region": "blue"}) for _ in range(10)} == {"hv-main"}

