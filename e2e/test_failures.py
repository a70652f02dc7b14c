"""Failure behaviour: what clients get when backends or manifests are wrong, and what is logged."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from harness import (RawConnection, endpoint_slice, free_port, ingress, path, request, rule,
                     service, service_with_backend)


class ClosingServer:
    """A TCP server that reads the request head and closes without answering: with a FIN, or
    with `reset`, an RST (SO_LINGER 0), as a pod that exits with a request in flight does.
    Records each request's target (`paths`)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, reset: bool = False):
        self.sock = socket.socket()
        self.sock.bind((host, port))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.reset = reset
        self.accepted = 0
        self._paths: list[str] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @property
    def paths(self) -> list[str]:
        with self.lock:
            return list(self._paths)

    def _run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.accepted += 1
            try:
                c.settimeout(2)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = c.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                line = data.split(b"\r\n", 1)[0].split()
                if len(line) >= 2:
                    with self.lock:
                        self._paths.append(line[1].decode("latin-1"))
                if self.reset:
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            finally:
                c.close()

    def close(self):
        self.sock.close()


def test_service_without_endpoints_gives_503(stack):
    stack.manifests.write("svc.yaml",
                          service("svc-empty"),
                          endpoint_slice("svc-empty-1", "svc-empty", [], 8080),
                          service("svc-noslice"),
                          service("svc-unready"),
                          endpoint_slice("svc-unready-1", "svc-unready", ["127.0.0.1"], 8080,
                                         not_ready=["127.0.0.1"]),
                          ingress("e", [rule("empty.example.com",
                                             path("/", "svc-empty"),
                                             path("/noslice", "svc-noslice"),
                                             path("/unready", "svc-unready"))]))
    r = stack.wait_status("/", "empty.example.com", 503)
    assert r.text == "no endpoints available\n"
    assert r.header("Server") == "tidegate"
    for target in ("/noslice", "/unready"):
        r = stack.get(target, "empty.example.com")
        assert (r.status, r.text) == (503, "no endpoints available\n"), target
    # A 503 for the request that never reached a backend keeps the client connection.
    with RawConnection(stack.port) as c:
        for _ in range(3):
            c.send(b"GET / HTTP/1.1\r\nHost: empty.example.com\r\n\r\n")
            assert c.read_response().status == 503


def test_endpoint_with_nothing_listening_gives_fast_502(stack):
    dead_port = free_port()
    stack.manifests.write("dead.yaml", service("svc-dead"),
                          endpoint_slice("svc-dead-1", "svc-dead", ["127.0.0.1"], dead_port),
                          ingress("dead", [rule("dead.example.com", path("/", "svc-dead"))]))
    stack.wait_status("/", "dead.example.com", 502)
    for method in ("GET", "POST"):
        with RawConnection(stack.port) as c:
            start = time.monotonic()
            c.send(f"{method} / HTTP/1.1\r\nHost: dead.example.com\r\nContent-Length: 0\r\n\r\n"
                   .encode())
            r = c.read_response()
            took = time.monotonic() - start
        assert r.status == 502, method
        assert r.text == "upstream unavailable\n"
        assert took < 1.0, f"{method}: 502 took {took:.2f}s"
    assert "127.0.0.1:%d connect failed" % dead_port in stack.dataplane.log()


def test_dead_endpoint_is_skipped_by_retries(stack):
    live = stack.backend("live")
    # Same port on another loopback address with nothing listening: a pod that is gone.
    stack.manifests.write("half.yaml", service("svc-half"),
                          endpoint_slice("svc-half-1", "svc-half", ["127.0.0.1", "127.0.0.3"],
                                         live.port),
                          ingress("half", [rule("half.example.com", path("/", "svc-half"))]))
    stack.wait_backend("/", "half.example.com", "live")
    statuses = [stack.get("/", "half.example.com").status for _ in range(30)]
    assert statuses == [200] * 30
    # POST too: a connect failure means nothing was sent, so any method may move on.
    posts = [request(stack.port, "POST", "/", "half.example.com", body=b"x" * 100).status
             for _ in range(10)]
    assert posts == [200] * 10


def test_upstream_that_closes_without_answer(stack):
    # Two endpoints (one port, two loopback addresses, as pods) that read the request and close.
    port = free_port("127.0.0.2")
    servers = [ClosingServer("127.0.0.1", port), ClosingServer("127.0.0.2", port)]

    def accepted() -> int:
        return sum(s.accepted for s in servers)
    try:
        stack.manifests.write("closing.yaml", service("svc-closing"),
                              endpoint_slice("svc-closing-1", "svc-closing",
                                             ["127.0.0.1", "127.0.0.2"], port),
                              ingress("closing", [rule("closing.example.com",
                                                       path("/", "svc-closing"))]))
        stack.wait_status("/", "closing.example.com", 502)
        before = accepted()
        r = stack.get("/", "closing.example.com")
        assert (r.status, r.text) == (502, "upstream unavailable\n")
        # GET is idempotent: retried on the other endpoint, never twice on one (three tries,
        # two endpoints: two attempts, as nginx makes).
        assert accepted() - before == 2
        assert [s.accepted > 0 for s in servers] == [True, True]
        before = accepted()
        r = request(stack.port, "POST", "/", "closing.example.com", body=b"payload")
        assert r.status == 502
        # A POST that reached the upstream must not be sent twice.
        assert accepted() - before == 1
        assert stack.dataplane.alive()
    finally:
        for s in servers:
            s.close()



def _until_configured(send, what: str, done, timeout: float = 10.0) -> None:
    """Sends numbered requests (send(i) -> (target, response)) until done(target, response);
    404 and 503 mean the configuration has not arrived yet."""
    deadline = time.monotonic() + timeout
    i = 0
    while True:
        assert time.monotonic() < deadline, what
        target, r = send(i)
        i += 1
        if r.status in (404, 503):
            time.sleep(0.05)
            continue
        if done(target, r):
            return


def test_upstream_that_resets_before_answering(stack):
    # Each Service has two endpoints on one port (two loopback addresses, as pods): one resets
    # the connection (RST) once it has read the request, before any response byte, the other
    # answers. The two Services use different ports, so that the passive failure mark one case
    # leaves on its resetting endpoint (docs/proxy.md, "Retries") never touches the other's.
    get_port, post_port = free_port("127.0.0.2"), free_port("127.0.0.2")
    get_reset = ClosingServer("127.0.0.1", get_port, reset=True)
    post_reset = ClosingServer("127.0.0.1", post_port, reset=True)
    get_live = stack.backend("get-live", "127.0.0.2", get_port)
    post_live = stack.backend("post-live", "127.0.0.2", post_port)
    try:
        stack.manifests.write(
            "reset.yaml", service("svc-reset-get"),
            endpoint_slice("svc-reset-get-1", "svc-reset-get", ["127.0.0.1", "127.0.0.2"],
                           get_port),
            service("svc-reset-post"),
            endpoint_slice("svc-reset-post-1", "svc-reset-post", ["127.0.0.1", "127.0.0.2"],
                           post_port),
            ingress("reset", [rule("get.reset.example.com", path("/", "svc-reset-get")),
                              rule("post.reset.example.com", path("/", "svc-reset-post"))]))

        # GET is idempotent: the request that was reset is sent again to the other endpoint,
        # and every client gets its answer.
        def get(i):
            target = f"/get-{i}"
            return target, stack.get(target, "get.reset.example.com")

        def get_answered(target, r) -> bool:
            assert (r.status, r.header("X-Backend")) == (200, "get-live"), (target, r.status,
                                                                             r.text)
            return target in get_reset.paths
        _until_configured(get, "no GET reached the resetting endpoint", get_answered)
        reset_gets = [t for t in get_reset.paths if t.startswith("/get-")]
        live_gets = [x["path"] for x in get_live.requests]
        assert reset_gets and all(t in live_gets for t in reset_gets), (reset_gets, live_gets)

        # POST is not: the backend may have acted on it before it went away, so the client gets
        # the 502, and the other endpoint never sees that request.
        answered = {}

        def post(i):
            target = f"/post-{i}"
            return target, request(stack.port, "POST", target, "post.reset.example.com",
                                   body=b"payload")

        def post_reset_seen(target, r) -> bool:
            answered[target] = r.status
            if target in post_reset.paths:
                assert (r.status, r.text) == (502, "upstream unavailable\n"), (target, r.status)
                return True
            assert r.status == 200, (target, r.status, r.text)
            return False
        _until_configured(post, "no POST reached the resetting endpoint", post_reset_seen)
        reset_posts = [t for t in post_reset.paths if t.startswith("/post-")]
        live_posts = [x["path"] for x in post_live.requests]
        assert reset_posts and not set(reset_posts) & set(live_posts), (reset_posts, live_posts)
        assert len(reset_posts) == len(set(reset_posts)), reset_posts  # never twice on one
        assert all(answered[t] == 502 for t in reset_posts), answered
        assert stack.dataplane.alive()
    finally:
        get_reset.close()
        post_reset.close()

MALFORMED = {
    "garbage": b"GARBAGE\r\n\r\n",
    "no-version": b"GET /\r\n\r\n",
    "extra-token": b"GET / HTTP/1.1 extra\r\nHost: a\r\n\r\n",
    "field-without-colon": b"GET / HTTP/1.1\r\nHost: a\r\nNoColonHere\r\n\r\n",
    "bad-content-length": b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n",
    "two-content-lengths":
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    "space-in-field-name": b"GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n",
    "tls-client-hello": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40 + b"\r\n\r\n",
    # Both framings at once: the classic request-smuggling shape.
    "content-length-and-chunked":
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"0\r\n\r\n",
}


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_request_gets_400_and_others_are_served(stack, raw):
    b = stack.backend("ok")
    stack.manifests.write("ok.yaml", *service_with_backend("svc-ok", b),
                          ingress("ok", [rule(None, path("/", "svc-ok"))]))
    stack.wait_backend("/", "a", "ok")
    # A good connection opened before the bad request must keep working after it.
    with RawConnection(stack.port) as good, RawConnection(stack.port) as bad:
        good.send(b"GET /before HTTP/1.1\r\nHost: a\r\n\r\n")
        assert good.read_response().status == 200
        bad.send(raw)
        r = bad.read_response()
        assert r.status == 400, (raw, r.status, r.body)
        assert r.text == "bad request\n"
        assert bad.closed_by_peer()
        good.send(b"GET /after HTTP/1.1\r\nHost: a\r\n\r\n")
        assert good.read_response().json()["path"] == "/after"
    assert stack.get("/new", "a").status == 200
    assert [x["path"] for x in b.requests if x["path"] != "/"] == ["/before", "/after", "/new"]


def test_bad_chunked_body_gets_400(stack):
    b = stack.backend("ok")
    stack.manifests.write("ok.yaml", *service_with_backend("svc-ok", b),
                          ingress("ok", [rule(None, path("/", "svc-ok"))]))
    stack.wait_backend("/", "a", "ok")
    with RawConnection(stack.port) as c:
        c.send(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n")
        r = c.read_response()
        assert r.status == 400
        assert c.closed_by_peer()
    assert stack.get("/", "a").status == 200


def test_oversized_request_header_gets_431(stack):
    with RawConnection(stack.port) as c:
        c.send(b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + b"x" * (70 * 1024) + b"\r\n\r\n")
        r = c.read_response()
        assert r.status == 431
    assert stack.dataplane.alive()


def test_broken_yaml_is_reported_and_other_files_keep_working(stack):
    b = stack.backend("good")
    stack.manifests.write("good.yaml", *service_with_backend("svc-good", b),
                          ingress("good", [rule("good.example.com", path("/", "svc-good"))]))
    stack.wait_backend("/", "good.example.com", "good")
    since = stack.controller.log_size()
    # A broken document and, in the same file, a good one after it.
    stack.manifests.write_text("broken.yaml", (
        "apiVersion: networking.k8s.io/v1\n"
        "kind: Ingress\n"
        "metadata: {name: broken\n"        # unclosed flow mapping
        "spec: [\n"
        "---\n"
        "apiVersion: networking.k8s.io/v1\n"
        "kind: Ingress\n"
        "metadata: {name: second}\n"
        "spec:\n"
        "  ingressClassName: tidegate\n"
        "  rules:\n"
        "  - host: second.example.com\n"
        "    http:\n"
        "      paths:\n"
        "      - {path: /, pathType: Prefix, backend: {service: {name: svc-good, port: {number: 80}}}}\n"
    ))
    m = stack.controller.wait_for_log(r".*broken\.yaml.*", since=since)
    line = m.group(0)
    assert "document 1" in line and "invalid YAML" in line, line
    # The good document of the broken file and the other files keep working.
    stack.wait_backend("/", "second.example.com", "good")
    assert stack.get("/", "good.example.com").header("X-Backend") == "good"
    # A later change still gets through while the broken file stays.
    stack.manifests.write("late.yaml", ingress("late", [rule("late.example.com",
                                                             path("/", "svc-good"))]))
    stack.wait_backend("/", "late.example.com", "good")
    # Fixing the file is reported as resolved.
    since = stack.controller.log_size()
    stack.manifests.remove("broken.yaml")
    stack.controller.wait_for_log(r"resolved: .*broken\.yaml", since=since)
    stack.wait_status("/", "second.example.com", 404)


def test_broken_json_is_reported(stack):
    since = stack.controller.log_size()
    stack.manifests.write_text("bad.json", '{"apiVersion": "v1", "kind": "Service", ')
    line = stack.controller.wait_for_log(r".*bad\.json.*", since=since).group(0)
    assert "invalid" in line.lower(), line
    assert stack.dataplane.ready()


def test_missing_service_is_reported_and_not_routed(stack):
    b = stack.backend("present")
    since = stack.controller.log_size()
    stack.manifests.write("app.yaml", *service_with_backend("svc-present", b),
                          ingress("app", [rule("app.example.com",
                                               path("/ok", "svc-present"),
                                               path("/missing", "svc-missing"))]))
    stack.wait_backend("/ok", "app.example.com", "present")
    line = stack.controller.wait_for_log(r".*svc-missing.*", since=since).group(0)
    assert 'service "svc-missing" not found in namespace "default"' in line, line
    assert "Ingress default/app" in line, line
    r = stack.get("/missing", "app.example.com")
    assert r.status in (404, 503), r.status
    # The Service shows up: the path starts working and the problem is reported as resolved.
    m = stack.backend("missing")
    since = stack.controller.log_size()
    stack.manifests.write("missing.yaml", *service_with_backend("svc-missing", m))
    stack.wait_backend("/missing", "app.example.com", "missing")
    stack.controller.wait_for_log(r"resolved: .*svc-missing", since=since)


def test_conflicting_paths_oldest_ingress_wins_and_conflict_is_reported(stack):
    old, new = stack.backend("old"), stack.backend("new")
    since = stack.controller.log_size()
    i_old = ingress("aaa-old", [rule("c.example.com", path("/", "svc-old"))])
    i_old["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    i_new = ingress("zzz-new", [rule("c.example.com", path("/", "svc-new"))])
    i_new["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"  # older, despite its name
    stack.manifests.write("c.yaml", *service_with_backend("svc-old", old),
                          *service_with_backend("svc-new", new), i_old, i_new)
    stack.wait_backend("/", "c.example.com", "new")
    line = stack.controller.wait_for_log(r".*Ingress default/aaa-old.*already routed.*",
                                         since=since).group(0)
    assert "svc-new" in line or "zzz-new" in line, line


@pytest.mark.parametrize("raw", [
    b"GET /two-hosts HTTP/1.1\r\nHost: a\r\nHost: b.example.com\r\n\r\n",
    b"GET /no-host HTTP/1.1\r\n\r\n",
], ids=["two-Host-fields", "no-Host-field"])
def test_http11_host_field_rules(stack, raw):
    """RFC 9112 section 3.2: a server MUST answer 400 to an HTTP/1.1 request without a Host
    field or with more than one. Otherwise the proxy routes on one Host and the backend may
    act on the other."""
    b = stack.backend("ok")
    stack.manifests.write("ok.yaml", *service_with_backend("svc-ok", b),
                          ingress("ok", [rule(None, path("/", "svc-ok"))]))
    stack.wait_backend("/", "a", "ok")
    with RawConnection(stack.port) as c:
        c.send(raw)
        r = c.read_response()
    assert r.status == 400, (r.status, r.body[:300])
    assert not [x for x in b.requests if x["path"] in ("/two-hosts", "/no-host")]


def test_truncated_upstream_body_closes_the_client_connection(stack):
    b = stack.backend("trunc")
    stack.manifests.write("t.yaml", *service_with_backend("svc-t", b),
                          ingress("t", [rule("t.example.com", path("/", "svc-t"))]))
    stack.wait_backend("/", "t.example.com", "trunc")
    with RawConnection(stack.port) as c:
        start = time.monotonic()
        c.send(b"GET /?respond=truncated&size=1000&promise=100000 HTTP/1.1\r\n"
               b"Host: t.example.com\r\n\r\n")
        version, status, _, headers = c.read_head()
        assert status == 200
        got = c.read_until_close()  # must end: the proxy cannot finish the promised body
        took = time.monotonic() - start
    assert len(got) == 1000
    assert took < 2.0, f"client connection left open {took:.1f}s after the upstream failed"
    assert "failed mid-body" in stack.dataplane.log()
    assert stack.get("/", "t.example.com").status == 200


def test_oversized_upstream_header_gives_502(stack):
    b = stack.backend("big")
    stack.manifests.write("big.yaml", *service_with_backend("svc-big", b),
                          ingress("big", [rule("big.example.com", path("/", "svc-big"))]))
    stack.wait_backend("/", "big.example.com", "big")
    r = stack.get("/?respond=bigheader&size=70000", "big.example.com")
    assert r.status == 502
    assert stack.get("/?respond=bigheader&size=1000", "big.example.com").status == 200


def test_expect_100_continue_with_dead_upstream_gets_502_without_100(stack):
    stack.manifests.write("dead.yaml", service("svc-dead"),
                          endpoint_slice("svc-dead-1", "svc-dead", ["127.0.0.1"], free_port()),
                          ingress("dead", [rule("dead.example.com", path("/", "svc-dead"))]))
    stack.wait_status("/", "dead.example.com", 502)
    with RawConnection(stack.port) as c:
        c.send(b"PUT /x HTTP/1.1\r\nHost: dead.example.com\r\nContent-Length: 100000\r\n"
               b"Expect: 100-continue\r\n\r\n")
        r = c.read_response()  # the final answer, no 100 first: the body is not wanted
        assert r.status == 502


class Blackhole:
    """A listener whose accept queue is full: the kernel drops further SYNs without an answer,
    as for a pod address nobody holds any more (no RST comes; a connect just waits)."""

    def __init__(self, host: str, port: int):
        self.sock = socket.socket()
        self.sock.bind((host, port))
        self.sock.listen(0)
        self.fillers = []
        for _ in range(4):  # fill the queue (never accepted)
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex((host, port))
            self.fillers.append(c)
        time.sleep(0.2)

    def close(self):
        for c in self.fillers:
            c.close()
        self.sock.close()


def test_connect_that_hangs_fails_over_after_half_a_second(stack):
    live = stack.backend("live")
    hole = Blackhole("127.0.0.4", live.port)
    try:
        probe = socket.socket()
        probe.settimeout(0.3)
        with pytest.raises(OSError):  # the blackhole really swallows connects
            probe.connect(("127.0.0.4", live.port))
        probe.close()
        stack.manifests.write("hole.yaml", service("svc-hole"),
                              endpoint_slice("svc-hole-1", "svc-hole", ["127.0.0.1", "127.0.0.4"],
                                             live.port),
                              ingress("hole", [rule("hole.example.com", path("/", "svc-hole"))]),
                              service("svc-alive"),
                              endpoint_slice("svc-alive-1", "svc-alive", ["127.0.0.1"], live.port),
                              ingress("alive", [rule("alive.example.com", path("/", "svc-alive"))]),
                              service("svc-onlyhole"),
                              endpoint_slice("svc-onlyhole-1", "svc-onlyhole", ["127.0.0.4"],
                                             live.port),
                              ingress("onlyhole", [rule("only.example.com",
                                                        path("/", "svc-onlyhole"))],
                                      annotations={"tidegate.io/proxy-connect-timeout": "2s"}))
        stack.wait_backend("/", "alive.example.com", "live")  # configured, blackhole untried
        took = []
        for _ in range(20):
            start = time.monotonic()
            assert stack.get("/", "hole.example.com").status == 200
            took.append(time.monotonic() - start)
        # Each worker tries the blackhole once: that request moves on after 0.5 s (not the
        # 5 s proxy-connect-timeout), and the mark keeps the next ones away from it.
        slow = [t for t in took if t > 0.3]
        assert 1 <= len(slow) <= 2 and all(t < 1.5 for t in slow), took
        # With no other endpoint left, the one attempt gets the whole proxy-connect-timeout.
        start = time.monotonic()
        r = stack.get("/", "only.example.com")
        elapsed = time.monotonic() - start
        assert r.status == 504 and 1.8 < elapsed < 4, (r.status, elapsed)
    finally:
        hole.close()
