"""Route policies from tidegate.io/ annotations, end to end (controller -> data plane -> real
backends): source ranges, redirects, app-root, rewrite-target with capture groups,
upstream-vhost, custom response headers, body size, timeouts and next-upstream rules."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from harness import (endpoint_slice, ingress, path, proto_request as request, rule, service,
                     service_with_backend, wait_until)

# Every test runs over HTTP/1.1 and over HTTP/2 (conftest.over_both_protocols).
pytestmark = pytest.mark.usefixtures("over_both_protocols")

HOST = "policy.example.com"


def deploy(stack, name: str, annotations: dict, paths: list[dict] | None = None,
           backend_name: str = "b"):
    b = stack.backend(backend_name)
    stack.manifests.write(f"{name}.yaml", *service_with_backend(f"svc-{name}", b),
                          ingress(name, [rule(f"{name}.{HOST}",
                                              *(paths or [path("/", f"svc-{name}")]))],
                                  annotations=annotations))
    return b


def wait_status(stack, host: str, target: str, status: int, timeout: float = 10.0, **kw):
    deadline = time.monotonic() + timeout
    while True:
        r = stack.get(target, host=host, **kw)
        if r.status == status or time.monotonic() > deadline:
            return r
        time.sleep(0.05)


def seen(r) -> dict:
    return json.loads(r.body)


def test_source_range_allows_loopback_and_denies_others(stack):
    deploy(stack, "allow", {"tidegate.io/whitelist-source-range": "127.0.0.0/8, ::1"})
    r = wait_status(stack, f"allow.{HOST}", "/x", 200)
    assert r.status == 200
    deploy(stack, "deny", {"tidegate.io/whitelist-source-range": "10.0.0.0/8"},
           backend_name="d")
    r = wait_status(stack, f"deny.{HOST}", "/x", 403)
    assert r.status == 403, (r.status, r.body)
    # A broken list denies too (never opens the route).
    deploy(stack, "broken", {"tidegate.io/whitelist-source-range": "not-a-cidr"},
           backend_name="e")
    r = wait_status(stack, f"broken.{HOST}", "/x", 403)
    assert r.status == 403, (r.status, r.body)


def test_redirects_and_app_root(stack):
    deploy(stack, "moved", {"tidegate.io/permanent-redirect": "https://elsewhere.example/new"})
    r = wait_status(stack, f"moved.{HOST}", "/old?q=1", 301)
    assert r.status == 301 and r.header("Location") == "https://elsewhere.example/new"
    deploy(stack, "root", {"tidegate.io/app-root": "/app/start"}, backend_name="r")
    r = wait_status(stack, f"root.{HOST}", "/", 302)
    assert r.status == 302 and r.header("Location") == "/app/start"
    r = stack.get("/app/start", host=f"root.{HOST}")
    assert r.status == 200 and seen(r)["path"] == "/app/start"  # only "/" is redirected


def test_rewrite_target_with_captures_and_upstream_vhost(stack):
    deploy(stack, "rw", {"tidegate.io/use-regex": "true", "tidegate.io/rewrite-target": "/$2",
                         "tidegate.io/upstream-vhost": "internal.svc"},
           paths=[path("/something(/|$)(.*)", "svc-rw", path_type="ImplementationSpecific")])
    r = wait_status(stack, f"rw.{HOST}", "/something/a/b?x=1", 200)
    assert r.status == 200, (r.status, r.body)
    got = seen(r)
    assert got["path"] == "/a/b?x=1"
    headers = {k.lower(): v for k, v in got["headers"]}
    assert headers["host"] == "internal.svc"
    assert headers["x-forwarded-host"] == f"rw.{HOST}"
    assert seen(stack.get("/something", host=f"rw.{HOST}"))["path"] == "/"


def test_custom_response_headers(stack):
    deploy(stack, "hdr", {"tidegate.io/custom-headers": "X-Frame-Options: DENY\nX-Team: web"})
    r = wait_status(stack, f"hdr.{HOST}", "/", 200)
    deadline = time.monotonic() + 10
    while r.header("X-Team") is None and time.monotonic() < deadline:
        time.sleep(0.05)
        r = stack.get("/", host=f"hdr.{HOST}")
    assert r.header("X-Frame-Options") == "DENY" and r.header("X-Team") == "web"
    # The proxy's own answers do not carry them.
    assert stack.get("/", host="unknown.example.com").header("X-Team") is None


def test_body_size_limit(stack):
    b = deploy(stack, "small", {"tidegate.io/proxy-body-size": "1k"})
    wait_status(stack, f"small.{HOST}", "/", 200)
    ok = request(stack.port, "POST", "/", f"small.{HOST}", body=b"x" * 1000)
    assert ok.status == 200
    before = b.count
    big = request(stack.port, "POST", "/", f"small.{HOST}", body=b"x" * 5000)
    assert big.status == 413
    assert b.count == before  # a declared length past the limit never reaches the backend


def test_an_error_answer_lingers_while_the_client_still_sends_its_body(stack):
    """A 413 on a declared length leaves the body unread. Closing at once would make the kernel
    reset the connection (which across a network can destroy the answer); the proxy shuts its
    side after the answer and reads and drops what the client still sends (lingering close)."""
    deploy(stack, "linger", {"tidegate.io/proxy-body-size": "1k"})
    wait_status(stack, f"linger.{HOST}", "/", 200)
    s = socket.create_connection(("127.0.0.1", stack.port), timeout=10)
    try:
        s.sendall(f"POST / HTTP/1.1\r\nHost: linger.{HOST}\r\nContent-Length: {64 << 20}\r\n"
                  "\r\n".encode() + b"x" * (256 << 10))
        answer = b""
        while True:  # the answer, then the FIN that follows it
            d = s.recv(65536)
            if not d:
                break
            answer += d
        assert answer.startswith(b"HTTP/1.1 413"), answer[:100]
        # Still sending after the answer: the proxy reads and drops it (no reset, so no EPIPE).
        for _ in range(32):
            s.sendall(b"y" * 65536)
            time.sleep(0.01)
    finally:
        s.close()


def test_read_timeout_and_no_retry_when_off(stack):
    # A backend that accepts and never answers.
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    accepted = []

    def serve():
        while True:
            try:
                c, _ = lsock.accept()
            except OSError:
                return
            accepted.append(c)
    threading.Thread(target=serve, daemon=True).start()
    port = lsock.getsockname()[1]
    try:
        stack.manifests.write(
            "stall.yaml", service("svc-stall", port=80, target_port=port),
            endpoint_slice("svc-stall-1", "svc-stall", ["127.0.0.1"], port),
            ingress("stall", [rule(f"stall.{HOST}", path("/", "svc-stall"))],
                    annotations={"tidegate.io/proxy-read-timeout": "500ms",
                                 "tidegate.io/proxy-next-upstream": "off"}))
        deadline = time.monotonic() + 10
        while True:
            start = time.monotonic()
            r = stack.get("/", host=f"stall.{HOST}")
            took = time.monotonic() - start
            if r.status == 504 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert r.status == 504, (r.status, r.body)
        assert took < 5, took  # 0.5 s, not the 60 s default
    finally:
        lsock.close()
        for c in accepted:
            c.close()


@pytest.mark.parametrize("annotation", ["tidegate.io/proxy-connect-timeout"])
def test_invalid_timeout_is_reported_and_ignored(stack, annotation):
    deploy(stack, "badto", {annotation: "soon"})
    r = wait_status(stack, f"badto.{HOST}", "/", 200)
    assert r.status == 200  # the Ingress keeps routing
    stack.controller.wait_for_log(r"proxy-connect-timeout")


def test_rate_limit_refuses_past_the_burst_with_retry_after(stack):
    deploy(stack, "rl", {"tidegate.io/limit-rps": "1", "tidegate.io/limit-burst-multiplier": "3"})
    # Waiting for the route spends tokens of 127.0.0.1's bucket (the limit is per client
    # address); the burst is measured from another address, whose bucket is still full.
    wait_status(stack, f"rl.{HOST}", "/", 200)
    statuses = [stack.get("/", host=f"rl.{HOST}", source="127.0.0.3") for _ in range(8)]
    codes = [r.status for r in statuses]
    # A burst of 3, then refused (the next token comes a second later).
    assert codes[:4] == [200, 200, 200, 429], codes
    refused = next(r for r in statuses if r.status == 429)
    assert int(refused.header("Retry-After")) >= 1
    # An allow-listed client is never limited.
    deploy(stack, "rlok", {"tidegate.io/limit-rps": "1", "tidegate.io/limit-burst-multiplier": "1",
                           "tidegate.io/limit-allowlist": "127.0.0.0/8"}, backend_name="ok")
    wait_status(stack, f"rlok.{HOST}", "/", 200)
    assert [stack.get("/", host=f"rlok.{HOST}").status for _ in range(10)] == [200] * 10


def test_connection_limit_counts_requests_in_flight(stack):
    b = deploy(stack, "cl", {"tidegate.io/limit-connections": "1"})
    wait_status(stack, f"cl.{HOST}", "/", 200)
    before = b.count
    slow: dict = {}

    def long_request():
        slow["r"] = stack.get("/?respond=chunked&chunks=10&chunk_size=10&delay_ms=150",
                              host=f"cl.{HOST}")
    t = threading.Thread(target=long_request)
    t.start()
    wait_until(lambda: b.count > before, 5, "the first request at the backend")  # in flight
    second = stack.get("/", host=f"cl.{HOST}")
    t.join()
    assert slow["r"].status == 200
    assert second.status == 429, (second.status, second.body)
    # Released when the first ended: the client can have its last byte a moment before the
    # data plane has finished with the request, so this polls.
    assert wait_status(stack, f"cl.{HOST}", "/", 200, timeout=2).status == 200


class UpgradeEchoBackend:
    """A raw backend that answers any request carrying Upgrade with a 101 for that protocol and
    then echoes bytes; a request without Upgrade gets 200 "plain". Records the Upgrade values."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.upgrades: list[str | None] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(4096)
                if not data:
                    return
                head += data
            fields = {}
            for line in head.split(b"\r\n")[1:]:
                if b":" in line:
                    k, v = line.split(b":", 1)
                    fields[k.strip().lower().decode()] = v.strip().decode()
            upgrade = fields.get("upgrade")
            self.upgrades.append(upgrade)
            if upgrade is None:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\n"
                             b"plain\n")
                return
            conn.sendall(f"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                         f"Upgrade: {upgrade}\r\n\r\n".encode())
            while data := conn.recv(4096):
                conn.sendall(data)


def test_allow_upgrade_forwards_only_the_protocols_it_names(stack):
    """tidegate.io/allow-upgrade: the route forwards Upgrade: foo/2 as an upgrade (a tunnel
    after the backend's 101); h2c is never allowed; a route without the annotation strips other
    upgrades and proxies the request as a normal one."""
    b = UpgradeEchoBackend()
    for name, annotations in (("up", {"tidegate.io/allow-upgrade": "foo/2"}), ("noup", {})):
        stack.manifests.write(
            f"{name}.yaml", service(f"svc-{name}"),
            endpoint_slice(f"svc-{name}-1", f"svc-{name}", ["127.0.0.1"], b.port),
            ingress(name, [rule(f"{name}.{HOST}", path("/", f"svc-{name}"))],
                    annotations=annotations))
    wait_status(stack, f"up.{HOST}", "/", 200)
    wait_status(stack, f"noup.{HOST}", "/", 200)

    def upgrade(host: str, protocol: str) -> bytes:
        with socket.create_connection(("127.0.0.1", stack.port), timeout=5) as s:
            s.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\n"
                      f"Upgrade: {protocol}\r\n\r\n".encode())
            reply = s.recv(4096)
            if reply.startswith(b"HTTP/1.1 101"):
                s.sendall(b"ping through the tunnel")
                reply += b"|" + s.recv(4096)
            return reply


    got = upgrade(f"up.{HOST}", "Foo/2")
    assert got.startswith(b"HTTP/1.1 101") and got.endswith(b"|ping through the tunnel"), got
    assert b.upgrades[-1] == "Foo/2"
    # Not named by the route: proxied as a normal request, Upgrade stripped.
    for host, protocol in ((f"up.{HOST}", "bar"), (f"up.{HOST}", "h2c"), (f"noup.{HOST}", "foo/2")):
        got = upgrade(host, protocol)
        assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"plain\n"), (host, protocol, got)
        assert b.upgrades[-1] is None, (host, protocol)
