"""Upgrades and long-lived connections (issue 3): WebSockets through the proxy (plain and TLS),
200 WebSockets that outlive 1,000 configuration updates of every kind pushed straight to the data
plane's control socket, and graceful drain on SIGTERM.

The WebSocket server and client are written here (RFC 6455 handshake and framing, stdlib only):
the server echoes every data frame, answers pings and close frames."""

from __future__ import annotations

import base64
import copy
import hashlib
import os
import random
import signal
import socket
import ssl
import struct
import threading
import time
from types import SimpleNamespace

import pytest

from harness import (CertAuthority, ControlClient, children_of, https_port, ingress, path,
                     report, request, rss_kib, rule, service, endpoint_slice, sha256,
                     threads_of, tls_connect, tls_secret, wait_until, with_tls)

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def _read_exact(sock, buf: bytearray, n: int) -> bytes:
    while len(buf) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    data = bytes(buf[:n])
    del buf[:n]
    return data


def _read_head(sock, buf: bytearray) -> tuple[str, dict[str, str]]:
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError(f"closed before the end of the head: {bytes(buf[:200])!r}")
        buf += chunk
        if len(buf) > 65536:
            raise ValueError("head too large")
    end = buf.index(b"\r\n\r\n")
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    del buf[:end + 4]
    headers: dict[str, str] = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return lines[0], headers


def encode_frame(opcode: int, payload: bytes, mask: bool, fin: bool = True) -> bytes:
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    mbit = 0x80 if mask else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 65536:
        head += bytes([mbit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([mbit | 127]) + struct.pack("!Q", n)
    if mask:
        key = os.urandom(4)
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload)) if n < 4096 else \
            _mask_fast(payload, key)
        head += key
    return head + payload


def _mask_fast(payload: bytes, key: bytes) -> bytes:
    k = int.from_bytes((key * ((len(payload) + 3) // 4))[:len(payload)], "big")
    return (int.from_bytes(payload, "big") ^ k).to_bytes(len(payload), "big")


def read_frame(sock, buf: bytearray) -> tuple[bool, int, bytes]:
    b0, b1 = _read_exact(sock, buf, 2)
    fin, opcode = bool(b0 & 0x80), b0 & 0x0F
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", _read_exact(sock, buf, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", _read_exact(sock, buf, 8))[0]
    key = _read_exact(sock, buf, 4) if b1 & 0x80 else None
    payload = _read_exact(sock, buf, n)
    if key:
        payload = _mask_fast(payload, key) if n else payload
    return fin, opcode, payload


class WsBackend:
    """A threaded WebSocket echo server. Non-upgrade requests get a 200 naming the backend."""

    def __init__(self, name: str, host: str = "127.0.0.1", port: int = 0):
        self.name = name
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((host, port))
        self.lsock.listen(1024)
        self.host, self.port = self.lsock.getsockname()
        self.lock = threading.Lock()
        self.conns: set[socket.socket] = set()
        self.handshakes: list[dict[str, str]] = []
        self.open = 0
        self.errors: list[str] = []
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True, name=f"ws-{name}").start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.conns.add(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket):
        buf = bytearray()
        upgraded = False
        try:
            line, h = _read_head(c, buf)
            if h.get("upgrade", "").lower() != "websocket" or "sec-websocket-key" not in h:
                body = f"{self.name}\n".encode()
                c.sendall(f"HTTP/1.1 200 OK\r\nX-Backend: {self.name}\r\nContent-Length: "
                          f"{len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
                return
            with self.lock:
                self.handshakes.append({"request-line": line, **h})
                self.open += 1
            upgraded = True
            head = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    "Connection: Upgrade\r\n"
                    f"Sec-WebSocket-Accept: {accept_key(h['sec-websocket-key'])}\r\n"
                    f"X-Backend: {self.name}\r\n\r\n").encode()
            if "greet" in line:  # a first frame in the same packet as the 101
                head += encode_frame(0x1, f"hello from {self.name}".encode(), mask=False)
            c.sendall(head)
            while True:
                fin, opcode, payload = read_frame(c, buf)
                if opcode == 0x8:  # close: answer it, then close the TCP connection
                    c.sendall(encode_frame(0x8, payload[:125], mask=False))
                    return
                if opcode == 0x9:
                    c.sendall(encode_frame(0xA, payload, mask=False))
                elif opcode in (0x0, 0x1, 0x2):
                    c.sendall(encode_frame(opcode, payload, mask=False, fin=fin))
        except (EOFError, OSError):
            pass
        except Exception as e:  # noqa: BLE001
            with self.lock:
                self.errors.append(repr(e))
        finally:
            with self.lock:
                self.conns.discard(c)
                if upgraded:
                    self.open -= 1
            c.close()

    def stop(self):
        if self.stopped:
            return
        self.stopped = True
        self.lsock.close()
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class WsClient:
    """A WebSocket client connection through the proxy (plain, or TLS with SNI = host)."""

    def __init__(self, port: int, host: str, target: str = "/ws", tls: bool = False,
                 timeout: float = 10.0, early: bytes = b""):
        if tls:
            self.sock = tls_connect(port, host, timeout=timeout)
        else:
            self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {target} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode() + early)
        self.status_line, self.headers = _read_head(self.sock, self.buf)
        if not self.status_line.startswith("HTTP/1.1 101"):
            self.sock.close()
            raise AssertionError(f"no upgrade: {self.status_line} {self.headers}")
        assert self.headers.get("sec-websocket-accept") == accept_key(key), self.headers
        assert self.headers.get("upgrade", "").lower() == "websocket", self.headers

    def send(self, payload: bytes, opcode: int = 0x2) -> None:
        self.sock.sendall(encode_frame(opcode, payload, mask=True))

    def recv(self) -> tuple[int, bytes]:
        _, opcode, payload = read_frame(self.sock, self.buf)
        return opcode, payload

    def echo(self, payload: bytes, opcode: int = 0x2) -> bool:
        self.send(payload, opcode)
        got = self.recv()
        return got == (opcode, payload)

    def closed_by_peer(self, timeout: float) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, ssl.SSLError):
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def ws_service(name: str, backend) -> list[dict]:
    return [service(name), endpoint_slice(f"{name}-1", name, [backend.host], backend.port)]


@pytest.fixture
def ws_backends():
    made: list[WsBackend] = []

    def make(name: str, host: str = "127.0.0.1") -> WsBackend:
        b = WsBackend(name, host)
        made.append(b)
        return b
    yield make
    for b in made:
        b.stop()


def test_websocket_upgrade_echoes_through_proxy(stack, ws_backends):
    ws = ws_backends("ws")
    stack.manifests.write("ws.yaml", *ws_service("svc-ws", ws),
                          ingress("ws", [rule("ws.example.com", path("/", "svc-ws"))]))
    stack.wait_route("/plain", "ws.example.com",
                     lambda r: r.status == 200 and r.header("X-Backend") == "ws")
    c = WsClient(stack.port, "ws.example.com", "/chat?room=1")
    try:
        assert c.echo(b"hello", 0x1)
        big = random.Random(3).randbytes(200_000)  # larger than the relay buffers
        assert c.echo(big)
        assert c.echo(b"")
        c.send(b"ping!", 0x9)
        assert c.recv() == (0xA, b"ping!")
        for i in range(50):
            assert c.echo(f"message {i}".encode(), 0x1)
        c.send(struct.pack("!H", 1000) + b"bye", 0x8)
        assert c.recv() == (0x8, struct.pack("!H", 1000) + b"bye")
        assert c.closed_by_peer(5.0)  # the backend closed: the tunnel closes the client side
    finally:
        c.close()
    h = ws.handshakes[-1]
    assert h["request-line"] == "GET /chat?room=1 HTTP/1.1"
    assert h["upgrade"].lower() == "websocket" and "upgrade" in h["connection"].lower()
    assert h["sec-websocket-version"] == "13"
    assert h["x-forwarded-proto"] == "http"
    assert h["host"] == "ws.example.com"
    assert ws.errors == []
    # The route still serves ordinary requests after the tunnel.
    assert stack.get("/after", "ws.example.com").header("X-Backend") == "ws"


def test_websocket_bytes_sent_along_with_the_handshake_are_relayed(stack, ws_backends):
    """Frames in the same packet as the upgrade request (client) or as the 101 (server) belong
    to the tunnel: they must come out the other side, in order."""
    ws = ws_backends("ws")
    stack.manifests.write("ws.yaml", *ws_service("svc-ws", ws),
                          ingress("ws", [rule("ws.example.com", path("/", "svc-ws"))]))
    stack.wait_route("/plain", "ws.example.com",
                     lambda r: r.status == 200 and r.header("X-Backend") == "ws")
    early = encode_frame(0x1, b"early one", mask=True) + encode_frame(0x1, b"early two", mask=True)
    c = WsClient(stack.port, "ws.example.com", "/early", early=early)
    try:
        assert c.recv() == (0x1, b"early one")
        assert c.recv() == (0x1, b"early two")
        assert c.echo(b"then", 0x1)
    finally:
        c.close()
    c = WsClient(stack.port, "ws.example.com", "/greet")
    try:
        assert c.recv() == (0x1, b"hello from ws")
        assert c.echo(b"after greeting", 0x1)
    finally:
        c.close()


def test_websocket_over_tls(stack, ws_backends, tmp_path):
    ca = CertAuthority(tmp_path / "certs")
    leaf = ca.issue("wss", ["wss.example.com"], "ec")
    ws = ws_backends("wss")
    stack.manifests.write("ws.yaml", *ws_service("svc-ws", ws),
                          tls_secret("wss-tls", leaf.cert_pem, leaf.key_pem),
                          with_tls(ingress("wss", [rule("wss.example.com", path("/", "svc-ws"))]),
                                   (["wss.example.com"], "wss-tls")))
    port = https_port(stack.dataplane)

    def served():
        s = tls_connect(port, "wss.example.com")
        try:
            return s.getpeercert(binary_form=True) == leaf.der
        finally:
            s.close()
    wait_until(served, 10, "wss.example.com to get its certificate")
    c = WsClient(port, "wss.example.com", "/socket", tls=True)
    try:
        assert c.sock.version() in ("TLSv1.2", "TLSv1.3")
        for i in range(20):
            assert c.echo(os.urandom(i * 1000 + 1))
        assert c.echo(random.Random(5).randbytes(100_000))
    finally:
        c.close()
    assert ws.handshakes[-1]["x-forwarded-proto"] == "https"
    # Plain HTTP upgrade attempts on the TLS host get the 308 like any request.
    r = request(stack.port, "GET", "/socket", "wss.example.com",
                headers={"Upgrade": "websocket", "Connection": "Upgrade"})
    assert r.status == 308 and r.header("Location") == "https://wss.example.com/socket"


# --- 200 WebSockets through 1,000 updates -------------------------------------------------


class Model:
    """The data plane's configuration as the controller would hold it, with a diff that makes
    the delta messages of docs/control-protocol.md."""

    def __init__(self):
        self.vhosts: dict[str, dict] = {}
        self.upstreams: dict[str, dict] = {}
        self.certs: dict[str, dict] = {}
        self.tls_hosts: dict[str, dict] = {}
        self.default_route: dict | None = None

    def copy(self) -> "Model":
        return copy.deepcopy(self)

    def wire(self) -> dict:
        c = {"virtual_hosts": list(self.vhosts.values()),
             "upstreams": list(self.upstreams.values()),
             "certificates": list(self.certs.values()),
             "tls_hosts": list(self.tls_hosts.values())}
        if self.default_route:
            c["default_route"] = self.default_route
        return c

    def delta_to(self, new: "Model") -> dict:
        def changed(a: dict, b: dict):
            return ([v for k, v in b.items() if a.get(k) != v], [k for k in a if k not in b])
        d: dict = {}
        d["upsert_virtual_hosts"], d["remove_virtual_hosts"] = changed(self.vhosts, new.vhosts)
        d["upsert_upstreams"], d["remove_upstreams"] = changed(self.upstreams, new.upstreams)
        d["upsert_certificates"], d["remove_certificates"] = changed(self.certs, new.certs)
        d["upsert_tls_hosts"], d["remove_tls_hosts"] = changed(self.tls_hosts, new.tls_hosts)
        if self.default_route != new.default_route:
            d["default_route_changed"] = True
            d["default_route"] = new.default_route
        return d


def route(upstream: str, p: str = "/", ingress_name: str = "default/churn") -> dict:
    return {"path": p, "match": "Prefix", "upstream": upstream, "ingress": ingress_name}


def endpoints(*eps: tuple[str, int]) -> list[dict]:
    return [{"address": a, "port": p} for a, p in sorted(set(eps))]


def test_200_websockets_survive_1000_updates(stack_factory, ws_backends, tmp_path):
    # The data plane alone: the test is the controller.
    s = stack_factory()
    s.start_dataplane()
    dp = s.dataplane
    pid = dp.pid
    port, tls_port = dp.http_port, https_port(dp)
    ws_a = ws_backends("ws-a")                  # the endpoint every socket is connected to
    ws_b = ws_backends("ws-b", "127.0.0.2")     # replaces it in the configuration for a while
    apps = [s.backend(f"app{i}", f"127.0.0.{10 + i}", record=False) for i in range(3)]
    ca = CertAuthority(tmp_path / "certs")
    pems = [ca.issue(f"c{i}", [f"c{i}.example.com"], "ec" if i % 3 else "rsa") for i in range(6)]
    ws_cert = ca.issue("ws", ["ws.example.com"], "ec")

    def cert(name: str, leaf) -> dict:
        return {"name": name, "cert_pem": leaf.cert_pem.decode(), "key_pem": leaf.key_pem.decode()}

    WS_UP, WS_HOST = "default/ws:80", "ws.example.com"
    initial = Model()
    initial.upstreams[WS_UP] = {"name": WS_UP, "endpoints": endpoints((ws_a.host, ws_a.port))}
    initial.vhosts[WS_HOST] = {"host": WS_HOST, "routes": [route(WS_UP)]}
    initial.certs["default/ws-tls"] = cert("default/ws-tls", ws_cert)
    initial.tls_hosts[WS_HOST] = {"host": WS_HOST, "certificate": "default/ws-tls"}
    for i, a in enumerate(apps):
        name = f"default/app{i}:80"
        initial.upstreams[name] = {"name": name, "endpoints": endpoints((a.host, a.port))}
        initial.vhosts[f"app{i}.example.com"] = {"host": f"app{i}.example.com",
                                                 "routes": [route(name)]}
    cc = ControlClient(dp.socket_path)
    version = 1
    try:
        assert cc.hello()["type"] == "hello_reply"
        assert cc.snapshot(version, initial.wire()) == {"type": "ack", "version": version}

        # 200 WebSockets: 160 plain, 40 over TLS.
        t_open = time.monotonic()
        sockets = [WsClient(port, WS_HOST, f"/ws/{i}") for i in range(160)]
        sockets += [WsClient(tls_port, WS_HOST, f"/wss/{i}", tls=True) for i in range(40)]
        t_open = time.monotonic() - t_open
        wait_until(lambda: ws_a.open == 200, 5, "200 sockets open at the backend")
        for i, c in enumerate(sockets):
            assert c.echo(f"before {i}".encode(), 0x1)
        threads0 = threads_of(pid)
        kids0 = children_of(pid)
        time.sleep(0.3)
        rss0 = rss_kib(pid)

        rng = random.Random(1234)
        model = initial.copy()
        extra_hosts: list[str] = []
        extra_certs: list[str] = []
        kinds: dict[str, int] = {}
        max_threads = min_threads = threads0
        t_updates = time.monotonic()
        n_updates = 1000
        for i in range(n_updates - 1):
            new = model.copy()
            kind = ["add-route", "remove-route", "endpoints", "ws-endpoints", "cert-add",
                    "cert-replace", "cert-remove", "ws-route", "default-route",
                    "combined"][i % 10]
            if kind == "add-route" or (kind == "remove-route" and not extra_hosts):
                h = f"r{i}.example.com"
                new.vhosts[h] = {"host": h, "routes": [route(f"default/app{rng.randrange(3)}:80"),
                                                        route(WS_UP, f"/ws{i}")]}
                extra_hosts.append(h)
            elif kind == "remove-route":
                new.vhosts.pop(extra_hosts.pop(rng.randrange(len(extra_hosts))))
            elif kind == "endpoints":
                up = f"default/app{rng.randrange(3)}:80"
                eps = {(a.host, a.port) for a in rng.sample(apps, rng.randrange(1, 4))}
                eps |= {(f"127.0.1.{rng.randrange(1, 50)}", 8000 + rng.randrange(10))}
                new.upstreams[up]["endpoints"] = endpoints(*eps)
            elif kind == "ws-endpoints":
                # The sockets' endpoint leaves the configuration (it keeps running), comes back,
                # moves to another backend, or the upstream has none at all.
                choice = (i // 10) % 4
                eps = [[(ws_b.host, ws_b.port)], [], [(ws_a.host, ws_a.port), (ws_b.host, ws_b.port)],
                       [("127.0.1.99", 9999)]][choice]
                new.upstreams[WS_UP]["endpoints"] = endpoints(*eps)
            elif kind == "cert-add":
                name = f"default/n{i}"
                new.certs[name] = cert(name, pems[rng.randrange(len(pems))])
                new.tls_hosts[f"n{i}.example.com"] = {"host": f"n{i}.example.com",
                                                      "certificate": name}
                extra_certs.append(name)
            elif kind == "cert-replace":
                # Replace the sockets' own certificate half of the time.
                name = "default/ws-tls" if (i // 10) % 2 or not extra_certs else \
                    rng.choice(extra_certs)
                new.certs[name] = cert(name, pems[rng.randrange(len(pems))])
            elif kind == "cert-remove":
                if (i // 10) % 5 == 0 and WS_HOST in new.tls_hosts:
                    del new.tls_hosts[WS_HOST]
                    del new.certs["default/ws-tls"]
                elif extra_certs:
                    name = extra_certs.pop(rng.randrange(len(extra_certs)))
                    del new.certs[name]
                    for h in [h for h, t in new.tls_hosts.items() if t["certificate"] == name]:
                        del new.tls_hosts[h]
                if "default/ws-tls" not in new.certs and (i // 10) % 5 == 2:
                    new.certs["default/ws-tls"] = cert("default/ws-tls", ws_cert)
                    new.tls_hosts[WS_HOST] = {"host": WS_HOST, "certificate": "default/ws-tls"}
            elif kind == "ws-route":
                # Even the route that admitted every socket goes away (and comes back).
                if WS_HOST in new.vhosts:
                    del new.vhosts[WS_HOST]
                else:
                    new.vhosts[WS_HOST] = {"host": WS_HOST, "routes": [route(WS_UP)]}
            elif kind == "default-route":
                new.default_route = (None if new.default_route else
                                     route(f"default/app{rng.randrange(3)}:80"))
            else:  # combined: a new upstream with a host using it, an old pair removed
                up, h = f"default/x{i}:80", f"x{i}.example.com"
                new.upstreams[up] = {"name": up, "endpoints": endpoints(
                    (f"127.0.2.{rng.randrange(1, 200)}", 80))}
                new.vhosts[h] = {"host": h, "routes": [route(up, "/a"), route(up, "/b")]}
                old = [k for k in new.upstreams if k.startswith("default/x") and k != up]
                if old and rng.random() < 0.7:
                    victim = old[0]
                    del new.upstreams[victim]
                    del new.vhosts[victim.split("/")[1].split(":")[0] + ".example.com"]
            delta = model.delta_to(new)
            ans = cc.delta(version + 1, version, delta)
            assert ans == {"type": "ack", "version": version + 1}, (kind, ans)
            version += 1
            model = new
            kinds[kind] = kinds.get(kind, 0) + 1
            n = threads_of(pid)
            max_threads, min_threads = max(max_threads, n), min(min_threads, n)
            if i % 100 == 50:
                assert children_of(pid) == kids0
                # New handshakes see the certificate of the configuration just acknowledged.
                # (The ack precedes the workers' switch by a queued event: allow 1 s.)
                want = (ssl.PEM_cert_to_DER_cert(model.certs["default/ws-tls"]["cert_pem"])
                        if WS_HOST in model.tls_hosts else None)

                def served_cert():
                    tls_s = tls_connect(tls_port, WS_HOST)
                    der = tls_s.getpeercert(binary_form=True)
                    tls_s.close()
                    return der == want if want else b"tidegate-default" in der
                wait_until(served_cert, 1.0, f"the certificate of version {version}")
                for j in rng.sample(range(200), 20):  # some traffic while it churns
                    assert sockets[j].echo(f"during {i} {j}".encode(), 0x1)
        # The last update restores the first configuration (same size, for the memory check).
        ans = cc.delta(version + 1, version, model.delta_to(initial))
        assert ans == {"type": "ack", "version": version + 1}
        version += 1
        t_updates = time.monotonic() - t_updates
        assert dp.version() == version

        # Every socket is open and echoes, on its own data.
        for i, c in enumerate(sockets):
            payload = f"after {i} ".encode() * 20
            assert c.echo(payload, 0x1), f"socket {i} does not echo"
        assert ws_a.open == 200 and ws_a.errors == []
        threads1 = threads_of(pid)
        kids1 = children_of(pid)
        assert dp.alive() and dp.pid == pid

        # Memory back within 10 % of its level before the updates (a short settle time). What
        # stays (+5-6 %, about 1.5 MB) is the allocator keeping the peak the churn reached (the
        # configuration grows during it): measured with heaptrack, the live heap after the
        # updates is within 0.2 MB of before. Before metric label sets were freed with their
        # routes, every host the churn added kept its slots and this was +8-10 %.
        def settled():
            return rss_kib(pid) <= rss0 * 1.10
        try:
            wait_until(settled, 5.0, "RSS to return within 10 % of its level before the updates",
                       interval=0.2)
        finally:
            rss1 = rss_kib(pid)
            report(f"websockets: 200 open ({t_open:.2f} s), {n_updates} updates in "
                   f"{t_updates:.2f} s ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}"
                   f" + restore); threads {threads0} -> min {min_threads} max {max_threads} -> "
                   f"{threads1}; children {len(kids0)} -> {len(kids1)}; RSS {rss0} KiB -> "
                   f"{rss1} KiB ({(rss1 / rss0 - 1) * 100:+.1f} %)")
        assert min_threads == max_threads == threads0 == threads1
        assert kids1 == kids0 == []
        # A new socket through the restored configuration works too.
        c = WsClient(port, WS_HOST, "/new")
        assert c.echo(b"new", 0x1)
        c.close()
        for c in sockets:
            c.close()
    finally:
        cc.close()


# --- Graceful drain -----------------------------------------------------------------------


def test_sigterm_drains_requests_and_closes_tunnels_at_the_deadline(stack_factory, ws_backends):
    s = stack_factory()
    s.dataplane.argv += ["--drain-timeout", "2"]
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    ws = ws_backends("ws")
    slow = s.backend("slow")
    s.manifests.write("drain.yaml", *ws_service("svc-ws", ws),
                      service("svc-slow"),
                      endpoint_slice("svc-slow-1", "svc-slow", [slow.host], slow.port),
                      ingress("drain", [rule("drain.example.com", path("/ws", "svc-ws"),
                                             path("/slow", "svc-slow"))]))
    s.wait_backend("/slow", "drain.example.com", "slow")
    c = WsClient(s.port, "drain.example.com", "/ws")
    assert c.echo(b"before", 0x1)
    # An idle keep-alive connection.
    idle = socket.create_connection(("127.0.0.1", s.port), timeout=5)
    idle.sendall(b"GET /slow?respond=name HTTP/1.1\r\nHost: drain.example.com\r\n\r\n")
    head = idle.recv(65536)
    assert head.startswith(b"HTTP/1.1 200"), head
    # A slow request in flight: 6 chunks 200 ms apart (1.2 s, within the 2 s deadline).
    result: dict = {}

    def slow_request():
        try:
            r = request(s.port, "GET", "/slow?respond=chunked&chunks=6&chunk_size=1000"
                        "&delay_ms=200", "drain.example.com", timeout=10)
            result["r"] = r
            result["t"] = time.monotonic()
        except Exception as e:  # noqa: BLE001
            result["error"] = repr(e)
    before = slow.count
    t = threading.Thread(target=slow_request, daemon=True)
    t.start()
    wait_until(lambda: slow.count > before, 5, "the slow request to reach its backend")

    s.dataplane.expected_exit = True
    t0 = time.monotonic()
    s.dataplane.send_signal(signal.SIGTERM)

    def refused():
        try:
            socket.create_connection(("127.0.0.1", s.port), timeout=1).close()
            return False
        except ConnectionRefusedError:
            return True
    wait_until(refused, 1.0, "new connections to be refused", interval=0.01)
    t_refused = time.monotonic() - t0
    idle.settimeout(1.0)
    assert idle.recv(1) == b"", "the idle keep-alive connection was not closed"
    t_idle = time.monotonic() - t0
    # The tunnel is left alone until the deadline...
    time.sleep(0.3)
    assert c.echo(b"during drain", 0x1)
    # ...the slow request completes...
    t.join(5)
    assert "error" not in result, result
    r = result["r"]
    assert r.status == 200 and len(r.body) == 6000
    assert sha256(r.body) == r.header("X-Body-SHA256")
    # ...and the tunnel is closed at the deadline.
    assert c.closed_by_peer(4.0), "the tunnel outlived the drain deadline"
    t_tunnel = time.monotonic() - t0
    rc = s.dataplane.popen.wait(5)
    t_exit = time.monotonic() - t0
    report(f"drain: refused after {t_refused:.2f} s, idle closed {t_idle:.2f} s, slow request "
           f"done {result['t'] - t0:.2f} s, tunnel closed {t_tunnel:.2f} s, exit {rc} at "
           f"{t_exit:.2f} s")
    c.close()
    idle.close()
    assert rc == 0
    assert 1.7 <= t_tunnel <= 3.0, t_tunnel
    assert t_exit <= 3.5, t_exit


def test_tunnel_idle_timeout_counts_bytes_either_way(stack, ws_backends):
    """proxy-read-timeout ends a tunnel after that long without a byte in either direction: a
    direction that stays quiet while the other is busy must not end it (the backend answers
    nothing to pong frames, so only the client sends here), and a silent tunnel ends on time."""
    ws = ws_backends("ws")
    stack.manifests.write(
        "ws.yaml", *ws_service("svc-ws", ws),
        ingress("ws", [rule("idle.example.com", path("/", "svc-ws"))],
                annotations={"tidegate.io/proxy-read-timeout": "1s"}))
    stack.wait_route("/plain", "idle.example.com",
                     lambda r: r.status == 200 and r.header("X-Backend") == "ws")
    c = WsClient(stack.port, "idle.example.com", "/one-way")
    try:
        for _ in range(12):  # 3 s of client-to-backend traffic only
            c.send(b"unsolicited pong", 0xA)
            time.sleep(0.25)
        assert c.echo(b"still open"), "the busy tunnel was ended by its quiet direction"
        t0 = time.monotonic()
        assert c.closed_by_peer(5.0), "the silent tunnel was not ended"
        assert time.monotonic() - t0 < 2.5
    finally:
        c.close()
