"""Request mirroring (the Gateway API's RequestMirror filter, docs/gateway-api.md, "Request
mirroring") on loopback with real backends, over HTTP/1.1 and HTTP/2 clients: the mirror gets
a copy of each request as the backend gets it (modified headers, body), a share of them when
the filter says so; the client only ever sees the backend's answer, whatever the mirror does."""

from __future__ import annotations

import time

import pytest

from harness import endpoint_slice, proto_request, request, scrape_metrics, service, wait_until
from test_gateway_api import GATEWAY, GATEWAY_CLASS, backend, http_route
from test_websocket import WsClient, ws_backends, ws_service  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("over_both_protocols")


def mirror(name: str, port: int = 80, **share) -> dict:
    spec = {"backendRef": {"name": name, "port": port}, **share}
    return {"type": "RequestMirror", "requestMirror": spec}


@pytest.fixture
def mirrored(stack):
    """Backends: main (svc-main), two mirrors (svc-m1, svc-m2); routes are the tests'."""
    b = {n: stack.backend(n) for n in ("main", "m1", "m2")}
    stack.manifests.write("services.yaml", *[service(f"svc-{n}") for n in b])
    stack.manifests.write(
        "slices.yaml",
        *[endpoint_slice(f"svc-{n}-1", f"svc-{n}", [x.host], x.port) for n, x in b.items()])
    stack.manifests.write("gateway.yaml", GATEWAY_CLASS, GATEWAY)
    stack.b = b
    return stack


def mirrored_request(b, path: str, timeout: float = 5.0) -> dict:
    """The copy of the request with `path` the backend got (waits for it)."""
    return wait_until(lambda: next((r for r in b.requests if r["path"] == path), None), timeout,
                      f"{b.name} to get a copy of {path}")


def header(record: dict, name: str) -> list[str]:
    return [v for k, v in record["headers"] if k.lower() == name.lower()]


def test_mirrors_get_the_request_as_the_backend_does(mirrored):
    s = mirrored
    s.manifests.write("routes.yaml", http_route("m", ["m.example.com"], [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/copy"}}],
         "filters": [
             {"type": "RequestHeaderModifier",
              "requestHeaderModifier": {"set": [{"name": "X-Set", "value": "by-gateway"}],
                                        "remove": ["X-Remove"]}},
             mirror("svc-m1"), mirror("svc-m2")],
         "backendRefs": [backend("svc-main")]},
        {"backendRefs": [backend("svc-main")]},
    ]))
    s.wait_backend("/copy/ready", "m.example.com", "main")
    r = s.get("/copy/a?x=1", "m.example.com", headers={"X-Remove": "gone"})
    assert r.status == 200 and r.header("X-Backend") == "main"
    main = next(x for x in s.b["main"].requests if x["path"] == "/copy/a?x=1")
    for name in ("m1", "m2"):
        copy = mirrored_request(s.b[name], "/copy/a?x=1")
        assert copy["method"] == "GET" and copy["body_len"] == 0
        assert header(copy, "X-Set") == ["by-gateway"] and not header(copy, "X-Remove")
        # The same request id and forwarding fields as the backend's request.
        for field in ("X-Request-ID", "X-Forwarded-For", "Host"):
            assert header(copy, field) == header(main, field), field
    # A body is copied whole (Content-Length framing, whatever the client used).
    body = bytes(range(256)) * 40
    r = proto_request(s.port, "POST", "/copy/post", "m.example.com", body=body)
    assert r.status == 200
    for name in ("m1", "m2"):
        copy = mirrored_request(s.b[name], "/copy/post")
        main = next(x for x in s.b["main"].requests if x["path"] == "/copy/post")
        assert copy["method"] == "POST" and not copy["request_chunked"]
        assert (copy["body_len"], copy["body_sha256"]) == (main["body_len"], main["body_sha256"])
    # Routes without the filter are not mirrored.
    assert s.get("/other", "m.example.com").status == 200
    time.sleep(0.3)
    assert not [x for x in s.b["m1"].requests if x["path"] == "/other"]


def test_the_client_never_waits_for_or_sees_the_mirror(mirrored):
    s = mirrored
    s.manifests.write("routes.yaml", http_route("m", ["m.example.com"], [
        {"filters": [mirror("svc-m1")], "backendRefs": [backend("svc-main")]},
    ]))
    s.wait_backend("/ready", "m.example.com", "main")
    # A slow mirror: the answer does not wait for it.
    s.b["m1"].slow_down(3.0)
    start = time.monotonic()
    r = s.get("/slow", "m.example.com")
    took = time.monotonic() - start
    assert r.status == 200 and r.header("X-Backend") == "main"
    assert took < 1.5, took
    mirrored_request(s.b["m1"], "/slow")
    s.b["m1"].slow_down(0)
    # A failing mirror: its 503 is not the client's.
    s.b["m1"].answer_with(503)
    r = s.get("/failing", "m.example.com")
    assert r.status == 200 and r.header("X-Backend") == "main"
    mirrored_request(s.b["m1"], "/failing")

    def answered() -> float:
        return scrape_metrics(s.dataplane).get('tidegate_mirror_requests_total{result="answered"}', 0)
    # /ready's copy and /failing's were answered (the 503 too): wait for the proxy to have read
    # the second answer before the mirror goes away.
    wait_until(lambda: answered() >= 2, 5, "two mirror answers counted")
    # A mirror that is gone (connection refused): the client is served all the same.
    s.b["m1"].stop()
    for i in range(5):
        r = s.get(f"/gone/{i}", "m.example.com")
        assert r.status == 200 and r.header("X-Backend") == "main"
    m = wait_until(lambda: (lambda m: m if m.get(
        'tidegate_mirror_requests_total{result="failed"}', 0) >= 1 else None)(
        scrape_metrics(s.dataplane)), 5, "a failed mirror counted")
    assert m['tidegate_mirror_requests_total{result="answered"}'] >= 2


def test_a_share_of_the_requests_is_mirrored(mirrored):
    s = mirrored
    s.manifests.write("routes.yaml", http_route("m", ["m.example.com"], [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/quarter"}}],
         "filters": [mirror("svc-m1", percent=25)], "backendRefs": [backend("svc-main")]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/third"}}],
         "filters": [mirror("svc-m2", fraction={"numerator": 1, "denominator": 3})],
         "backendRefs": [backend("svc-main")]},
    ]))
    s.wait_backend("/quarter/ready", "m.example.com", "main")
    s.wait_backend("/third/ready", "m.example.com", "main")
    n = 400
    for i in range(n):
        assert request(s.port, "GET", f"/quarter/{i}", "m.example.com").status == 200
        assert request(s.port, "GET", f"/third/{i}", "m.example.com").status == 200
    time.sleep(0.5)

    def count(b, prefix):
        return sum(1 for r in b.requests if r["path"].startswith(prefix) and "ready" not in r["path"])
    # Binomial: n/4 = 100 (sd 8.7) and n/3 = 133 (sd 9.4); five standard deviations either way.
    assert 56 <= count(s.b["m1"], "/quarter/") <= 144
    assert 86 <= count(s.b["m2"], "/third/") <= 180
    assert count(s.b["m2"], "/quarter/") == 0 and count(s.b["m1"], "/third/") == 0


def test_a_body_longer_than_a_mirror_takes_is_not_mirrored(mirrored):
    s = mirrored
    s.manifests.write("routes.yaml", http_route("m", ["m.example.com"], [
        {"filters": [mirror("svc-m1")], "backendRefs": [backend("svc-main")]},
    ]))
    s.wait_backend("/ready", "m.example.com", "main")
    big = b"x" * (64 * 1024 + 1)
    r = proto_request(s.port, "POST", "/big", "m.example.com", body=big)
    assert r.status == 200 and r.header("X-Backend") == "main"
    main = next(x for x in s.b["main"].requests if x["path"] == "/big")
    assert main["body_len"] == len(big)
    r = proto_request(s.port, "POST", "/small", "m.example.com", body=b"y" * 64 * 1024)
    assert r.status == 200
    assert mirrored_request(s.b["m1"], "/small")["body_len"] == 64 * 1024
    assert not [x for x in s.b["m1"].requests if x["path"] == "/big"]
    assert scrape_metrics(s.dataplane)['tidegate_mirror_requests_total{result="skipped"}'] >= 1


def test_an_unresolvable_mirror_is_left_out(mirrored):
    s = mirrored
    s.manifests.write("routes.yaml", http_route("m", ["m.example.com"], [
        {"filters": [mirror("no-such-service")], "backendRefs": [backend("svc-main")]},
    ]))
    s.wait_backend("/ready", "m.example.com", "main")
    assert s.get("/x", "m.example.com").status == 200
    assert "no-such-service" in s.controller.log()


def test_an_upgrade_is_never_mirrored(mirrored, ws_backends):
    """A WebSocket upgrade on a mirrored route goes to its backend only: a copy would turn a
    pooled mirror connection into a tunnel. Requests after it are mirrored as before."""
    s = mirrored
    ws = ws_backends("ws")
    s.manifests.write("ws.yaml", *ws_service("svc-ws", ws))
    s.manifests.write("routes.yaml", http_route("m", ["m.example.com"], [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/ws"}}],
         "filters": [mirror("svc-m1")], "backendRefs": [backend("svc-ws")]},
        {"filters": [mirror("svc-m1")], "backendRefs": [backend("svc-main")]},
    ]))
    s.wait_backend("/ready", "m.example.com", "main")
    c = WsClient(s.port, "m.example.com", "/ws/chat")
    try:
        assert c.echo(b"hello", 0x1)
    finally:
        c.close()
    assert s.get("/after", "m.example.com").status == 200
    mirrored_request(s.b["m1"], "/after")
    assert not [r for r in s.b["m1"].requests if r["path"].startswith("/ws")]
