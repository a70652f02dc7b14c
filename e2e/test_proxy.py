"""Proxy behaviour on the wire: bodies, framing, Expect, keep-alive, pipelining, headers."""

from __future__ import annotations

import http.client
import json
import re
import time

import pytest

from harness import (RawConnection, header_values, ingress, path, pattern_bytes, request, rule,
                     service_with_backend, sha256)

HOST = "proxy.example.com"
MiB = 1024 * 1024


@pytest.fixture
def px(stack):
    """One echo backend behind proxy.example.com/."""
    stack.echo = stack.backend("echo")
    stack.manifests.write("echo.yaml", *service_with_backend("svc-echo", stack.echo),
                          ingress("echo", [rule(HOST, path("/", "svc-echo"))]))
    stack.wait_backend("/", HOST, "echo")
    return stack


def raw_request(method: str, target: str, headers: dict | None = None, body: bytes = b"",
                version: str = "HTTP/1.1", host: str | None = HOST) -> bytes:
    lines = [f"{method} {target} {version}"]
    if host is not None:
        lines.append(f"Host: {host}")
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_chunked_request_body_is_streamed_upstream(px):
    pieces = [pattern_bytes(n, seed=n) for n in (1, 100, 5000, 70000, 3)]
    body = b"".join(pieces)
    with RawConnection(px.port) as c:
        c.send(raw_request("POST", "/upload", {"Transfer-Encoding": "chunked",
                                               "Content-Type": "application/octet-stream"}))
        for p in pieces:
            c.send(f"{len(p):x}\r\n".encode() + p + b"\r\n")
            time.sleep(0.01)
        c.send(b"0\r\n\r\n")
        r = c.read_response()
    assert r.status == 200
    got = r.json()
    assert got["method"] == "POST"
    assert got["body_len"] == len(body)
    assert got["body_sha256"] == sha256(body)
    assert got["request_chunked"] is True  # length unknown up front: relayed chunked


@pytest.mark.parametrize("split", [False, True], ids=["one-packet", "last-chunk-apart"])
def test_chunked_request_is_relayed_with_one_last_chunk(px, split):
    """Nothing may follow the request's last-chunk on the upstream connection."""
    head = raw_request("POST", "/upload", {"Transfer-Encoding": "chunked"})
    with RawConnection(px.port) as c:
        if split:
            c.send(head + b"5\r\nhello\r\n")
            time.sleep(0.05)
            c.send(b"0\r\n\r\n")
        else:
            c.send(head + b"5\r\nhello\r\n0\r\n\r\n")
        r = c.read_response()
        assert r.status == 200 and r.json()["body_sha256"] == sha256(b"hello")
        # Same client connection, so the same worker and its pooled upstream connection: by
        # the time this answer is back, the backend has read whatever followed the body.
        c.send(raw_request("GET", "/after-upload"))
        after = c.read_response()
    assert after.status == 200 and after.json()["path"] == "/after-upload"
    assert px.echo.protocol_errors == [], "the proxy sent bytes that are not HTTP upstream"


def test_chunked_response_is_streamed_downstream(px):
    with RawConnection(px.port) as c:
        c.send(raw_request("GET", "/?respond=chunked&chunks=50&chunk_size=4000"))
        r = c.read_response()
    assert r.status == 200
    assert r.chunked
    assert len(r.body) == 200000
    assert sha256(r.body) == r.header("X-Body-SHA256")


@pytest.mark.parametrize("final_delay", [0, 100], ids=["together", "last-chunk-apart"])
def test_chunked_response_is_relayed_with_one_last_chunk(px, final_delay):
    """Nothing may follow a chunked response's last-chunk on the client connection."""
    with RawConnection(px.port) as c:
        c.send(raw_request("GET", f"/?respond=chunked&chunks=3&chunk_size=100"
                                  f"&final_delay_ms={final_delay}"))
        r = c.read_response()
        assert r.status == 200 and r.chunked
        assert len(r.body) == 300 and sha256(r.body) == r.header("X-Body-SHA256")
        assert c.stray_bytes() == b"", "bytes after the end of the chunked response"
        c.send(raw_request("GET", "/after"))
        assert c.read_response().json()["path"] == "/after"


def test_chunked_response_arrives_before_the_backend_finishes(px):
    # 5 chunks 300 ms apart: the first must reach the client long before the last is sent.
    with RawConnection(px.port) as c:
        start = time.monotonic()
        c.send(raw_request("GET", "/?respond=chunked&chunks=5&chunk_size=10&delay_ms=300"))
        version, status, _, headers = c.read_head()
        first_size = int(c.read_line(), 16)
        first_at = time.monotonic() - start
        assert status == 200 and first_size == 10
        c.read_exact(first_size + 2)
        rest = []
        while (n := int(c.read_line(), 16)) != 0:
            rest.append(c.read_exact(n))
            c.read_exact(2)
        assert c.read_line() == b""
        total = time.monotonic() - start
    assert first_at < 0.25, f"first chunk after {first_at:.3f}s: the response was buffered"
    assert total >= 1.1
    assert len(rest) == 4


def test_large_bodies_both_ways(px):
    up = pattern_bytes(8 * MiB, seed=7)
    conn = http.client.HTTPConnection("127.0.0.1", px.port, timeout=30)
    try:
        conn.request("PUT", "/big-upload", body=up, headers={"Host": HOST})
        res = conn.getresponse()
        data = res.read()
        assert res.status == 200
        got = json.loads(data)
        assert got["body_len"] == len(up)
        assert got["body_sha256"] == sha256(up)
        assert header_values(got, "Content-Length") == [str(len(up))]

        # Same connection: 8 MiB down with a Content-Length, then 8 MiB down chunked.
        conn.request("GET", f"/?respond=bytes&size={8 * MiB}&seed=9", headers={"Host": HOST})
        res = conn.getresponse()
        down = res.read()
        assert res.status == 200
        assert res.getheader("Content-Length") == str(8 * MiB)
        assert len(down) == 8 * MiB and sha256(down) == res.getheader("X-Body-SHA256")

        conn.request("GET", "/?respond=chunked&chunks=128&chunk_size=65536&seed=3",
                     headers={"Host": HOST})
        res = conn.getresponse()
        down = res.read()
        assert res.status == 200
        assert len(down) == 8 * MiB and sha256(down) == res.getheader("X-Body-SHA256")
    finally:
        conn.close()


def test_large_chunked_upload(px):
    body = pattern_bytes(8 * MiB, seed=11)
    with RawConnection(px.port, timeout=30) as c:
        c.send(raw_request("POST", "/", {"Transfer-Encoding": "chunked"}))
        step = 256 * 1024 + 17
        for i in range(0, len(body), step):
            p = body[i:i + step]
            c.send(f"{len(p):x}\r\n".encode() + p + b"\r\n")
        c.send(b"0\r\n\r\n")
        r = c.read_response()
        assert r.status == 200
        assert r.json()["body_len"] == len(body)
        assert r.json()["body_sha256"] == sha256(body)


def test_expect_100_continue(px):
    body = pattern_bytes(300000, seed=5)
    with RawConnection(px.port) as c:
        c.send(raw_request("POST", "/expect", {"Content-Length": str(len(body)),
                                               "Expect": "100-continue"}))
        version, status, reason, _ = c.read_head()  # before any body byte is sent
        assert (version, status) == ("HTTP/1.1", 100)
        c.send(body)
        r = c.read_response()
        assert r.status == 200
        got = r.json()
        assert got["body_sha256"] == sha256(body)
        # The proxy answered the Expect itself; the backend must not see it.
        assert header_values(got, "Expect") == []
        # The connection is still usable.
        c.send(raw_request("GET", "/after"))
        assert c.read_response().json()["path"] == "/after"


def test_expect_100_continue_without_route_gets_final_answer(px):
    with RawConnection(px.port) as c:
        c.send(raw_request("POST", "/", {"Content-Length": "1000", "Expect": "100-continue"},
                           host="unrouted.example.com"))
        r = c.read_response()  # the final status, not 100: the body is never needed
        assert r.status == 404
        assert c.closed_by_peer()  # the unread body makes the connection unusable


def test_keep_alive_reuses_connections_both_sides(px):
    conn = http.client.HTTPConnection("127.0.0.1", px.port, timeout=10)
    try:
        conn.connect()
        sock = conn.sock
        for i in range(300):
            conn.request("GET", f"/ka/{i}", headers={"Host": HOST})
            res = conn.getresponse()
            body = res.read()
            assert res.status == 200, (i, res.status, body)
            assert res.getheader("Connection", "").lower() != "close"
            assert conn.sock is sock, f"client connection was closed after request {i}"
    finally:
        conn.close()
    # The proxy pools its upstream connections: far fewer than one per request.
    assert px.echo.connections_accepted <= 4, px.echo.connections_accepted


def test_pipelined_requests_are_answered_in_order(px):
    body = b"second-request-body"
    with RawConnection(px.port) as c:
        c.send(raw_request("GET", "/one")
               + raw_request("POST", "/two", {"Content-Length": str(len(body))}, body)
               + raw_request("GET", "/three?respond=chunked&chunks=3&chunk_size=7"))
        r1, r2, r3 = c.read_response(), c.read_response(), c.read_response()
    assert (r1.status, r2.status, r3.status) == (200, 200, 200)
    assert r1.json()["path"] == "/one"
    assert r2.json()["path"] == "/two" and r2.json()["body_sha256"] == sha256(body)
    assert len(r3.body) == 21 and sha256(r3.body) == r3.header("X-Body-SHA256")


def test_head_has_no_body_and_keeps_the_connection(px):
    with RawConnection(px.port) as c:
        for _ in range(2):
            c.send(raw_request("HEAD", "/?respond=bytes&size=12345"))
            r = c.read_response(method="HEAD")
            assert r.status == 200
            assert r.header("Content-Length") == "12345"
            assert c.stray_bytes() == b""
        # Had the proxy sent a body after the HEADs, this would parse garbage.
        c.send(raw_request("GET", "/after-head"))
        r = c.read_response()
        assert r.status == 200 and r.json()["path"] == "/after-head"
    methods = [x["method"] for x in px.echo.requests[-3:]]
    assert methods == ["HEAD", "HEAD", "GET"]


def test_head_of_a_chunked_resource_has_no_body(px):
    # The backend answers HEAD with "Transfer-Encoding: chunked" and (rightly) no body at all.
    with RawConnection(px.port) as c:
        c.send(raw_request("HEAD", "/?respond=chunked&chunks=3&chunk_size=10"))
        r = c.read_response(method="HEAD")
        assert r.status == 200
        assert c.stray_bytes() == b"", "a response to HEAD must not carry a body"
        c.send(raw_request("GET", "/after-head"))
        r = c.read_response()
        assert r.status == 200 and r.json()["path"] == "/after-head"


def test_204_has_no_body_and_keeps_the_connection(px):
    with RawConnection(px.port) as c:
        c.send(raw_request("GET", "/?respond=status&code=204"))
        r = c.read_response()
        assert r.status == 204 and r.body == b""
        assert r.header("Transfer-Encoding") is None
        c.send(raw_request("DELETE", "/?respond=status&code=204"))
        assert c.read_response().status == 204
        c.send(raw_request("GET", "/after-204"))
        r = c.read_response()
        assert r.status == 200 and r.json()["path"] == "/after-204"


def test_backend_status_and_body_pass_through(px):
    r = px.get("/?respond=status&code=418", HOST)
    assert r.status == 418 and r.text == "status 418\n"
    r = px.get("/?respond=status&code=503", HOST)
    assert r.status == 503 and r.text == "status 503\n"


def test_forwarded_headers(px):
    got = px.get("/fwd", "Proxy.Example.com:8080").json()
    assert header_values(got, "X-Forwarded-For") == ["127.0.0.1"]
    assert header_values(got, "X-Forwarded-Proto") == ["http"]
    assert header_values(got, "X-Forwarded-Host") == ["Proxy.Example.com:8080"]
    assert header_values(got, "Host") == ["Proxy.Example.com:8080"]  # Host is passed unchanged

    got = px.get("/fwd", HOST, headers={"X-Forwarded-For": "203.0.113.7, 10.0.0.1",
                                        "X-Forwarded-Proto": "https"}).json()
    assert header_values(got, "X-Forwarded-For") == ["203.0.113.7, 10.0.0.1, 127.0.0.1"]
    # The proxy speaks for the scheme it received, not for what the client claims.
    assert header_values(got, "X-Forwarded-Proto") == ["http"]


def test_x_real_ip_is_the_peer_and_never_the_clients_claim(px):
    got = px.get("/rip", HOST).json()
    assert header_values(got, "X-Real-IP") == ["127.0.0.1"]
    got = px.get("/rip", HOST, headers={"X-Real-IP": "203.0.113.7",
                                        "X-Forwarded-For": "203.0.113.7"}).json()
    assert header_values(got, "X-Real-IP") == ["127.0.0.1"]


def test_x_real_ip_behind_a_trusted_proxy_is_the_forwarded_client(stack_factory):
    s = stack_factory(dataplane_args=["--trusted-proxies", "127.0.0.1"]).start_ready()
    echo = s.backend("echo")
    s.manifests.write("echo.yaml", *service_with_backend("svc-echo", echo),
                      ingress("echo", [rule(HOST, path("/", "svc-echo"))]))
    s.wait_backend("/", HOST, "echo")
    xff = {"X-Forwarded-For": "198.51.100.9, 10.0.0.1", "X-Real-IP": "192.0.2.1"}
    # From the trusted proxy: the rightmost address that is not a trusted proxy.
    got = request(s.port, "GET", "/rip", HOST, headers=xff, source="127.0.0.1").json()
    assert header_values(got, "X-Real-IP") == ["10.0.0.1"]
    # From another peer the header names that peer.
    got = request(s.port, "GET", "/rip", HOST, headers=xff, source="127.0.0.2").json()
    assert header_values(got, "X-Real-IP") == ["127.0.0.2"]


def test_request_id_generated_when_absent_and_kept_when_present(px):
    ids = []
    for _ in range(5):
        got = px.get("/rid", HOST).json()
        (rid,) = header_values(got, "X-Request-ID")
        ids.append(rid)
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids), ids
    assert len(set(ids)) == len(ids)
    got = px.get("/rid", HOST, headers={"X-Request-ID": "client-chosen-id-42"}).json()
    assert header_values(got, "X-Request-ID") == ["client-chosen-id-42"]


def test_hop_by_hop_headers_are_not_forwarded(px):
    with RawConnection(px.port) as c:
        c.send(raw_request("GET", "/hop", {
            "Connection": "keep-alive, Foo, X-Secret",
            "Foo": "bar",
            "X-Secret": "do-not-forward",
            "Keep-Alive": "timeout=5",
            "Proxy-Connection": "keep-alive",
            "TE": "trailers",
            "X-End-To-End": "kept",
        }))
        r = c.read_response()
    assert r.status == 200
    got = r.json()
    names = {k.lower() for k, _ in got["headers"]}
    for gone in ("foo", "x-secret", "keep-alive", "proxy-connection", "te"):
        assert gone not in names, (gone, got["headers"])
    assert header_values(got, "Connection") in ([], ["keep-alive"])
    assert header_values(got, "X-End-To-End") == ["kept"]
    assert got["version"] == "HTTP/1.1"


def test_http10_client(px):
    with RawConnection(px.port) as c:
        c.send(raw_request("GET", "/old", version="HTTP/1.0"))
        r = c.read_response()
        assert r.version == "HTTP/1.0"
        assert r.status == 200
        got = r.json()
        assert got["path"] == "/old"
        assert got["version"] == "HTTP/1.1"  # the proxy speaks HTTP/1.1 upstream
        assert c.closed_by_peer()  # HTTP/1.0 without keep-alive: one request per connection


def test_http10_client_gets_a_close_delimited_response(px):
    with RawConnection(px.port) as c:
        c.send(raw_request("GET", "/?respond=close&size=7777", version="HTTP/1.0"))
        r = c.read_response()
        assert r.status == 200 and r.version == "HTTP/1.0"
        assert len(r.body) == 7777 and sha256(r.body) == r.header("X-Body-SHA256")


def test_http10_client_gets_a_chunked_upstream_response_unchunked(px):
    with RawConnection(px.port) as c:
        c.send(raw_request("GET", "/?respond=chunked&chunks=10&chunk_size=999", version="HTTP/1.0"))
        r = c.read_response()
        assert r.version == "HTTP/1.0"
        assert r.status == 200
        assert r.header("Transfer-Encoding") is None  # HTTP/1.0 has no chunked coding
        assert len(r.body) == 9990 and sha256(r.body) == r.header("X-Body-SHA256")


def test_http10_keep_alive(px):
    with RawConnection(px.port) as c:
        for i in range(3):
            c.send(raw_request("GET", f"/old-ka/{i}", {"Connection": "keep-alive"},
                               version="HTTP/1.0"))
            r = c.read_response()
            assert r.status == 200 and r.version == "HTTP/1.0"
            assert r.json()["path"] == f"/old-ka/{i}"
            assert r.header("Connection").lower() == "keep-alive"


def test_http10_request_without_host(px):
    # HTTP/1.0 allows no Host header; with no catch-all route that is a 404, not an error.
    with RawConnection(px.port) as c:
        c.send(raw_request("GET", "/", version="HTTP/1.0", host=None))
        r = c.read_response()
        assert r.status == 404 and r.version == "HTTP/1.0"


def test_close_delimited_upstream_body_is_chunked_for_http11(px):
    with RawConnection(px.port) as c:
        c.send(raw_request("GET", "/?respond=close&size=20000"))
        r = c.read_response()
        assert r.status == 200
        assert r.chunked
        assert sha256(r.body) == r.header("X-Body-SHA256")
        assert c.stray_bytes() == b"", "bytes after the end of the chunked response"
        # The client connection outlives the upstream one.
        c.send(raw_request("GET", "/after-close"))
        assert c.read_response().json()["path"] == "/after-close"


def test_client_disconnect_mid_response_does_not_hurt_others(px):
    with RawConnection(px.port) as c:
        c.send(raw_request("GET", f"/?respond=bytes&size={4 * MiB}"))
        c.read_head()
        c.read_exact(1000)
    # The proxy must drop that exchange cleanly and go on serving.
    for _ in range(5):
        assert px.get("/still-fine", HOST).status == 200
    assert px.dataplane.alive()


def test_interim_103_is_not_forwarded_and_final_response_is(px):
    with RawConnection(px.port) as c:
        c.send(raw_request("GET", "/?respond=early_hints"))
        r = c.read_response()
        assert r.status == 200
        assert r.json()["path"] == "/?respond=early_hints"
        c.send(raw_request("GET", "/after"))
        assert c.read_response().json()["path"] == "/after"


def test_hop_by_hop_response_headers_are_not_forwarded(px):
    r = px.get("/?respond=hop", HOST)
    assert r.status == 200 and r.text == "hop\n"
    names = {k.lower() for k, _ in r.headers}
    assert "x-internal" not in names and "keep-alive" not in names, r.headers
    assert r.header("X-End-To-End") == "kept"


def test_pipelined_requests_after_an_error_answer(px):
    with RawConnection(px.port) as c:
        c.send(raw_request("GET", "/", host="unrouted.example.com") + raw_request("GET", "/ok"))
        r1, r2 = c.read_response(), c.read_response()
    assert (r1.status, r1.text) == (404, "no route\n")
    assert r2.status == 200 and r2.json()["path"] == "/ok"


def test_invalid_request_id_is_replaced(px):
    got = px.get("/rid", HOST, headers={"X-Request-ID": "x" * 200}).json()
    (rid,) = header_values(got, "X-Request-ID")
    assert re.fullmatch(r"[0-9a-f]{32}", rid), rid
