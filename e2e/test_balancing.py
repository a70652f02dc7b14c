"""Load balancing, affinity and retries on status codes in the request path (issue 6):
load-balance (round_robin, least_conn, ip_hash), upstream-hash-by, affinity: cookie, and
proxy-next-upstream http_503, against real backends on 127.0.0.x addresses sharing one port (one
EndpointSlice port, as pods have)."""

from __future__ import annotations

import http.client
import re
import threading
import time
from collections import Counter

import pytest

import harness
from harness import (Backend, endpoint_slice, free_port, ingress, path, report, rule, service,
                     wait_until)

# Every test runs over HTTP/1.1 and over HTTP/2 (conftest.over_both_protocols): fresh
# connections of call() speak the run's protocol, keep-alive ones stay HTTP/1.1.
pytestmark = pytest.mark.usefixtures("over_both_protocols")


class Pods:
    """Backends on 127.0.0.x, all on one port."""

    def __init__(self, first: int = 1):
        self.port = free_port("127.0.0.2")
        self.next = first

    def backend(self, stack, name: str, record: bool = False) -> Backend:
        while self.next < 255:
            host = f"127.0.0.{self.next}"
            self.next += 1
            try:
                b = Backend(name, host, self.port, record=record)
            except OSError:
                continue  # something else holds this address:port
            stack.backends.append(b)
            return b
        raise RuntimeError("ran out of loopback addresses")


def slice_for(name: str, backends: list[Backend]) -> dict:
    return endpoint_slice(f"svc-{name}-1", f"svc-{name}", [b.host for b in backends],
                          backends[0].port)


def deploy(stack, name: str, host: str, backends: list[Backend], annotations: dict | None = None,
           route: str = "/") -> None:
    stack.manifests.write(f"{name}.yaml", service(f"svc-{name}"), slice_for(name, backends),
                          ingress(name, [rule(host, path(route, f"svc-{name}"))],
                                  annotations=annotations))


def call(port: int, target: str, host: str, headers: dict | None = None, method: str = "GET",
         body: bytes | None = None, source: str | None = None,
         conn: http.client.HTTPConnection | None = None):
    """One request (on `conn` when given, else on a fresh connection from `source`); returns
    (status, headers dict with lower-case names, body)."""
    own = conn is None
    if own and harness.PROTOCOL == "http2":
        r = harness.h2_request(port, method, target, host, headers,
                               body if body is not None or method != "POST" else b"",
                               source=source)
        return r.status, {k.lower(): v for k, v in r.headers}, r.body
    if own:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                          source_address=(source, 0) if source else None)
    try:
        hdrs = {"Host": host, **(headers or {})}
        if body is not None or method == "POST":
            hdrs.setdefault("Content-Length", str(len(body or b"")))
        conn.request(method, target, body=body, headers=hdrs)
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        if own:
            conn.close()


def backend_of(port: int, target: str, host: str, **kw) -> str:
    status, headers, body = call(port, target, host, **kw)
    assert status == 200, (status, body[:200])
    return headers["x-backend"]


def wait_serving(stack, host: str, names: set[str], target: str = "/", **kw) -> None:
    """Until requests have reached every one of `names` (fresh connections)."""
    seen: set[str] = set()

    def all_seen():
        status, headers, _ = call(stack.port, target, host, **kw)
        if status == 200:
            seen.add(headers.get("x-backend"))
        return names <= seen
    wait_until(all_seen, 15, f"{host} to reach {sorted(names)} (seen {sorted(seen)})",
               interval=0.01)


def load(port: int, host: str, clients: int, seconds: float | None = None,
         per_client: int | None = None) -> Counter:
    """`clients` keep-alive connections in threads, each sending GETs for `seconds` or
    `per_client` times; returns the X-Backend counts of 200 answers (and "status N" others)."""
    counts: Counter = Counter()
    lock = threading.Lock()
    errors: list[BaseException] = []
    deadline = time.monotonic() + seconds if seconds else None

    def run():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        mine: Counter = Counter()
        try:
            n = 0
            while (per_client is None or n < per_client) and (
                    deadline is None or time.monotonic() < deadline):
                status, headers, _ = call(port, "/", host, conn=conn)
                mine[headers.get("x-backend") if status == 200 else f"status {status}"] += 1
                n += 1
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            conn.close()
            with lock:
                counts.update(mine)

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    return counts


# ---------------------------------------------------------------------------------------------


def test_round_robin_spreads_requests_equally(stack):
    pods = Pods()
    bs = [pods.backend(stack, f"rr{i}") for i in range(3)]
    deploy(stack, "rr", "rr.example.com", bs)
    wait_serving(stack, "rr.example.com", {b.name for b in bs})
    counts = load(stack.port, "rr.example.com", clients=4, per_client=750)
    total = sum(counts.values())
    report(f"round_robin over 3 backends, {total} requests: {dict(sorted(counts.items()))}")
    assert total == 3000, counts
    for b in bs:
        # The model has no weights: equal shares, within 2% (the schedule is exact per worker).
        assert abs(counts[b.name] - 1000) <= 20, counts


def test_least_conn_sends_fewer_requests_to_a_slow_backend(stack):
    pods = Pods()
    fast, slow = pods.backend(stack, "fast"), pods.backend(stack, "slow")
    deploy(stack, "lc", "lc.example.com", [fast, slow],
           {"tidegate.io/load-balance": "least_conn"})
    wait_serving(stack, "lc.example.com", {"fast", "slow"})
    slow.slow_down(0.2)
    counts = load(stack.port, "lc.example.com", clients=8, seconds=2.5)
    total = counts["fast"] + counts["slow"]
    report(f"least_conn, one backend 200 ms slower, 8 clients: {dict(counts)}")
    assert total == sum(counts.values()), counts  # nothing but 200s
    # Round robin would give the slow backend half of the requests.
    assert counts["slow"] < 0.15 * total, counts


def test_ip_hash_keeps_each_client_address_on_one_backend(stack):
    pods = Pods()
    bs = [pods.backend(stack, f"ip{i}") for i in range(3)]
    deploy(stack, "iph", "iph.example.com", bs, {"tidegate.io/load-balance": "ip_hash"})
    wait_until(lambda: call(stack.port, "/", "iph.example.com")[0] == 200, 10, "route")
    chosen = {}
    for c in range(1, 13):
        source = f"127.0.1.{c}"
        # Fresh connections: they land on either worker, which must agree.
        seen = {backend_of(stack.port, "/", "iph.example.com", source=source) for _ in range(8)}
        assert len(seen) == 1, (source, seen)
        chosen[source] = seen.pop()
    report(f"ip_hash, 12 client addresses: {dict(Counter(chosen.values()))}")
    assert len(set(chosen.values())) >= 2, chosen


def test_ip_hash_and_source_ranges_read_x_forwarded_for_only_from_trusted_proxies(stack_factory):
    s = stack_factory(dataplane_args=["--trusted-proxies", "127.0.0.1"])
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    pods = Pods()
    bs = [pods.backend(s, f"xf{i}") for i in range(3)]
    deploy(s, "xff", "xff.example.com", bs, {"tidegate.io/load-balance": "ip_hash"})
    allow = Pods().backend(s, "allow")
    deploy(s, "ranges", "ranges.example.com", [allow],
           {"tidegate.io/whitelist-source-range": "10.1.0.0/16"})
    wait_until(lambda: call(s.port, "/", "xff.example.com")[0] == 200, 10, "route")

    # From the trusted proxy, the forwarded client decides.
    chosen = {}
    for c in range(1, 13):
        xff = {"X-Forwarded-For": f"10.1.0.{c}"}
        seen = {backend_of(s.port, "/", "xff.example.com", headers=xff, source="127.0.0.1")
                for _ in range(5)}
        assert len(seen) == 1, (xff, seen)
        chosen[c] = seen.pop()
    assert len(set(chosen.values())) >= 2, chosen
    # From an untrusted peer, X-Forwarded-For is ignored: the peer's address decides.
    untrusted = {backend_of(s.port, "/", "xff.example.com", source="127.0.0.2",
                            headers={"X-Forwarded-For": f"10.1.0.{c}"}) for c in range(1, 13)}
    assert len(untrusted) == 1, untrusted

    # whitelist-source-range reads the same client address.
    def status(xff: str | None, source: str) -> int:
        headers = {"X-Forwarded-For": xff} if xff else {}
        return call(s.port, "/", "ranges.example.com", headers=headers, source=source)[0]
    wait_until(lambda: status("10.1.2.3", "127.0.0.1") == 200, 10, "source range route")
    assert status("10.2.0.1", "127.0.0.1") == 403
    assert status(None, "127.0.0.1") == 403
    assert status("10.1.2.3", "127.0.0.2") == 403  # forged by an untrusted peer


def test_upstream_hash_by_keeps_keys_and_moves_only_the_removed_backends(stack):
    pods = Pods()
    bs = [pods.backend(stack, f"h{i}") for i in range(3)]
    host = "hash.example.com"
    annotations = {"tidegate.io/upstream-hash-by": "$http_x_user"}
    deploy(stack, "hash", host, bs, annotations)
    wait_until(lambda: call(stack.port, "/", host)[0] == 200, 10, "route")

    def where(user: int) -> str:
        return backend_of(stack.port, "/", host, headers={"X-User": f"user-{user}"})

    users = range(150)
    before = {}
    for u in users:
        first, second = where(u), where(u)
        assert first == second, (u, first, second)
        before[u] = first
    shares = Counter(before.values())
    assert all(shares[b.name] >= 20 for b in bs), shares
    # Requests without the key are not pinned anywhere.
    assert len({backend_of(stack.port, "/", host) for _ in range(12)}) >= 2

    # h2 leaves the Service: only its users move.
    gone = bs[2].name
    stack.manifests.write("hash.yaml", service("svc-hash"), slice_for("hash", bs[:2]),
                          ingress("hash", [rule(host, path("/", "svc-hash"))],
                                  annotations=annotations))
    victim = next(u for u in users if before[u] == gone)
    # Several fresh connections in a row: every worker has the new endpoints.
    wait_until(lambda: all(where(victim) != gone for _ in range(6)), 10,
               f"user-{victim} to leave {gone}")
    after = {u: where(u) for u in users}
    moved = [u for u in users if after[u] != before[u]]
    report(f"upstream-hash-by over 3 backends: {dict(shares)}; removing one moved "
           f"{len(moved)}/{len(users)} keys")
    assert all(before[u] == gone for u in moved), "a key of a remaining backend moved"
    assert all(after[u] != gone for u in users)
    assert len(moved) == shares[gone]
    assert 0.2 * len(users) <= len(moved) <= 0.47 * len(users), len(moved)


def test_affinity_cookie_pins_the_client_until_its_endpoint_leaves(stack):
    pods = Pods()
    bs = [pods.backend(stack, f"a{i}") for i in range(4)]
    host = "sticky.example.com"
    annotations = {"tidegate.io/affinity": "cookie", "tidegate.io/session-cookie-name": "route"}

    def write(backends):
        stack.manifests.write("sticky.yaml", service("svc-sticky"),
                              slice_for("sticky", backends),
                              ingress("sticky", [rule(host, path("/app", "svc-sticky"))],
                                      annotations=annotations))

    write(bs[:3])
    wait_until(lambda: call(stack.port, "/app/x", host)[0] == 200, 10, "route")
    status, headers, _ = call(stack.port, "/app/x", host)
    assert status == 200
    m = re.fullmatch(r"route=([0-9a-f]{16}); Path=/app; HttpOnly", headers.get("set-cookie", ""))
    assert m, headers
    cookie = {"Cookie": f"other=1; route={m.group(1)}"}
    pinned = headers["x-backend"]

    def with_cookie(n: int, keep_alive: bool) -> set[str]:
        conn = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=10)
        seen = set()
        try:
            for _ in range(n):
                st, hd, _ = call(stack.port, "/app/x", host, headers=cookie,
                                 conn=conn if keep_alive else None)
                assert st == 200 and "set-cookie" not in hd, (st, hd)
                seen.add(hd["x-backend"])
        finally:
            conn.close()
        return seen

    assert with_cookie(100, keep_alive=True) == {pinned}
    assert with_cookie(30, keep_alive=False) == {pinned}
    # Without the cookie, clients are spread and each gets a cookie.
    assert len({call(stack.port, "/app/x", host)[1]["x-backend"] for _ in range(9)}) >= 2

    # An unrelated change: a fourth endpoint arrives, another one leaves.
    others = [b for b in bs[:3] if b.name != pinned]
    write([b for b in bs if b.name != others[0].name])
    wait_serving(stack, host, {bs[3].name}, target="/app/x")
    assert with_cookie(50, keep_alive=False) == {pinned}

    # The pinned endpoint leaves: the client moves and gets a new cookie.
    write([b for b in bs if b.name != pinned])
    wait_until(lambda: all(call(stack.port, "/app/x", host, headers=cookie)[1]["x-backend"]
                           != pinned for _ in range(6)), 10, "the pinned endpoint to leave")
    status, headers, _ = call(stack.port, "/app/x", host, headers=cookie)
    m2 = re.fullmatch(r"route=([0-9a-f]{16}); Path=/app; HttpOnly",
                      headers.get("set-cookie", ""))
    assert status == 200 and m2 and m2.group(1) != m.group(1), headers
    cookie = {"Cookie": f"route={m2.group(1)}"}
    assert with_cookie(20, keep_alive=False) == {headers["x-backend"]}


def test_retries_on_503(stack):
    pods = Pods()
    sick, well, sick2 = (pods.backend(stack, "sick"), pods.backend(stack, "well"),
                         pods.backend(stack, "sick2"))
    sick.answer_with(503)
    sick2.answer_with(503)
    on_503 = "error timeout http_503"
    deploy(stack, "r1", "r1.example.com", [sick, well], {"tidegate.io/proxy-next-upstream": on_503})
    deploy(stack, "r2", "r2.example.com", [sick, well],
           {"tidegate.io/proxy-next-upstream": on_503 + " non_idempotent"})
    deploy(stack, "r3", "r3.example.com", [sick, sick2], {"tidegate.io/proxy-next-upstream": on_503})
    deploy(stack, "r4", "r4.example.com", [sick, well],
           {"tidegate.io/proxy-next-upstream": on_503,
            "tidegate.io/proxy-next-upstream-tries": "1"})
    deploy(stack, "r5", "r5.example.com", [sick, well])  # default: error timeout
    # Own upstreams (own failure marks) for the requests that must still reach `sick`.
    deploy(stack, "r6", "r6.example.com", [sick, well], {"tidegate.io/proxy-next-upstream": on_503})
    deploy(stack, "r7", "r7.example.com", [sick, well],
           {"tidegate.io/proxy-next-upstream": on_503 + " non_idempotent"})
    deploy(stack, "r8", "r8.example.com", [sick, well],
           {"tidegate.io/proxy-next-upstream": on_503 + " non_idempotent"})
    # Waiting on a host of its own, written last: the controller reads the whole folder on each
    # change, so once `ready` is served every route above is too. (Probing r1..r8 themselves
    # would send requests that mark `sick` failed before the assertions below count on it.)
    deploy(stack, "ready", "ready.example.com", [well])
    wait_until(lambda: call(stack.port, "/", "ready.example.com")[0] == 200, 10, "ready")

    def run(host: str, n: int, method: str = "GET", body: bytes | None = None) -> Counter:
        out = Counter()
        for _ in range(n):
            status, headers, data = call(stack.port, "/", host, method=method, body=body)
            out[(status, headers.get("x-backend"))] += 1
            if status == 503:
                assert data == f"status 503 from {headers.get('x-backend')}\n".encode(), data
        return out

    # GET: the 503 is discarded and the other endpoint answers.
    before = sick.count
    assert run("r1.example.com", 20) == {(200, "well"): 20}
    assert sick.count > before  # the sick backend was tried (and its answer discarded)
    # A discarded 503 marks the endpoint failed (as nginx's max_fails=1 fail_timeout=10s): for
    # the next 10 s this upstream's picks leave it out, no attempt is wasted on it.
    before = sick.count
    assert run("r1.example.com", 20) == {(200, "well"): 20}
    assert sick.count == before, sick.count - before
    # POST is not idempotent: not moved without non_idempotent (the 503 is the answer; each
    # worker reaches `sick` once before its mark).
    posts = run("r6.example.com", 10, "POST")
    assert posts[(503, "sick")] >= 1, posts
    # With non_idempotent, a bodyless POST moves, and so does one whose body came whole in one
    # read (the proxy still has it); a POST whose body was streamed up in many reads does not
    # (it cannot be sent again).
    assert run("r2.example.com", 10, "POST") == {(200, "well"): 10}
    assert run("r7.example.com", 10, "POST", body=b"x" * 100) == {(200, "well"): 10}
    streamed = run("r8.example.com", 10, "POST", body=b"x" * (256 * 1024))
    assert streamed[(503, "sick")] >= 1, streamed
    # Every endpoint answered 503: the last answer is forwarded, each endpoint tried once.
    before = sick.count + sick2.count
    exhausted = run("r3.example.com", 10)
    assert sum(n for (status, _), n in exhausted.items() if status == 503) == 10, exhausted
    assert sick.count + sick2.count - before == 20
    # One try: nothing moves.
    assert run("r4.example.com", 10)[(503, "sick")] >= 1
    # Without http_503 a 503 is an answer like any other.
    assert run("r5.example.com", 10)[(503, "sick")] >= 1
