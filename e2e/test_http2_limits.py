"""HTTP/2 attacks and limits (docs/proxy.md, "HTTP/2"): rapid reset, CONTINUATION flood, HPACK
bomb, SETTINGS/PING/WINDOW_UPDATE and empty-frame floods, zero-window stalls, the stream limit.
Each attack runs on its own connection, written frame by frame (hyperframe/hpack, Debian's);
past its limit the connection gets GOAWAY and closes, while a normal client on another connection
keeps getting answers."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from harness import (H2Client, ingress, path, rule, service_with_backend)

HOST = "limits.example.com"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
ENHANCE_YOUR_CALM = 0xB
PROTOCOL_ERROR = 0x1


@pytest.fixture
def h2l(stack_factory):
    """One worker: the attacker's connection and the bystander's share it, so an attack that
    held the worker up would show in the bystander's answers."""
    return echo_stack(stack_factory)


def echo_stack(stack_factory, *dataplane_args: str):
    """A data plane with one worker (see h2l) in front of an echo backend, with data plane flags
    of the test's own."""
    s = stack_factory(workers=1, dataplane_args=list(dataplane_args)).start_ready()
    echo = s.backend("echo", record=False)
    s.manifests.write("echo.yaml", *service_with_backend("svc-echo", echo),
                      ingress("echo", [rule(HOST, path("/", "svc-echo"))]))
    s.wait_backend("/", HOST, "echo")
    return s


class RawH2:
    """A client that writes frames as they come: no flow control, no validation."""

    def __init__(self, port: int, settings: dict | None = None, timeout: float = 10.0):
        import hpack
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.encoder = hpack.Encoder()
        self.buf = b""
        payload = b"".join(struct.pack(">HI", k, v) for k, v in (settings or {}).items())
        self.sock.sendall(PREFACE + self.frame(0x4, 0, 0, payload))

    @staticmethod
    def frame(type_: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
        return struct.pack(">I", len(payload))[1:] + bytes([type_, flags]) + \
            struct.pack(">I", sid) + payload

    def headers_block(self, target: str = "/", method: str = "GET", extra=()) -> bytes:
        return self.encoder.encode([(":method", method), (":scheme", "http"),
                                    (":authority", HOST), (":path", target), *extra])

    def send(self, data: bytes) -> bool:
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False

    def read_frames(self, until: float):
        """Frames (type, flags, stream id, payload) until the deadline or the close."""
        out = []
        self.sock.settimeout(0.2)
        while time.monotonic() < until:
            while len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + n:
                    break
                t, f = self.buf[3], self.buf[4]
                sid = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                out.append((t, f, sid, self.buf[9:9 + n]))
                self.buf = self.buf[9 + n:]
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                out.append(("closed", 0, 0, b""))
                return out
            if not data:
                out.append(("closed", 0, 0, b""))
                return out
            self.buf += data
        return out

    def goaway(self, timeout: float = 10.0) -> tuple[int | None, bool]:
        """(GOAWAY error code or None, whether the connection closed) within the timeout."""
        code, deadline = None, time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, _, _, payload in self.read_frames(min(deadline, time.monotonic() + 1)):
                if t == 0x7:
                    code = int.from_bytes(payload[4:8], "big")
                if t == "closed":
                    return code, True
        return code, False

    def close(self):
        self.sock.close()


def server_preface(a: RawH2) -> tuple[list, dict[int, int]]:
    """The frames the data plane sends first, and the settings its SETTINGS frame announces."""
    frames = a.read_frames(time.monotonic() + 1)
    settings = [p for t, f, _, p in frames if t == 0x4 and not f & 1][0]
    return frames, {int.from_bytes(settings[i:i + 2], "big"):
                    int.from_bytes(settings[i + 2:i + 6], "big")
                    for i in range(0, len(settings), 6)}


def assert_goaway(a: RawH2, expected: int):
    """The connection gets GOAWAY with `expected` and is closed."""
    code, closed = a.goaway()
    a.close()
    assert closed
    assert code == expected, code


class Bystander:
    """A normal HTTP/2 client on its own connection to the same (single) worker, asking every
    2 ms from before the attack until after it: every answer must come, and those in flight
    while the attack ran, or asked in the 100 ms after it (the worker may still be reading the
    attacker's frames), must come at once."""

    def __init__(self, port: int):
        self.port, self.samples, self.errors = port, [], []  # samples: (asked at, latency)
        self.stop = threading.Event()
        self.started = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.attack = (0.0, 0.0)

    def run(self):
        with H2Client(self.port) as c:
            while not self.stop.is_set():
                t = time.monotonic()
                try:
                    r = c.request("GET", "/bystander", HOST)
                    if r.status != 200:
                        self.errors.append(r.status)
                except Exception as e:  # noqa: BLE001 - any failure counts
                    self.errors.append(repr(e))
                    return
                self.samples.append((t, time.monotonic() - t))
                self.started.set()
                time.sleep(0.002)

    def __enter__(self):
        self.thread.start()
        assert self.started.wait(10), self.errors
        self.attack = (time.monotonic(), 0.0)
        return self

    def __exit__(self, *exc):
        self.attack = (self.attack[0], time.monotonic())
        # Answers asked after the attack ended, past the 100 ms that check() looks at, too.
        deadline = time.monotonic() + 5
        while (not any(t > self.attack[1] + 0.1 for t, _ in self.samples[-5:])
               and time.monotonic() < deadline and not self.errors):
            time.sleep(0.02)
        self.stop.set()
        self.thread.join(10)

    def check(self):
        assert not self.errors, self.errors
        begin, end = self.attack
        # Every request in flight at some point of the attack (asked before its end, answered
        # after its beginning), or asked in the 100 ms after it.
        during = [lat for t, lat in self.samples if t < end + 0.1 and t + lat > begin]
        assert during, (begin, end, self.samples[-5:])
        assert any(t > end for t, _ in self.samples)
        # The worker shared with the attacker kept answering at once (loopback: ~1 ms).
        assert max(during) < 0.25, sorted(during)[-5:]


def test_rapid_reset_gets_goaway(h2l):
    """CVE-2023-44487: streams opened and reset at once, in a loop."""
    with Bystander(h2l.port) as b:
        a = RawH2(h2l.port)
        sid, burst = 1, []
        for _ in range(3000):
            burst.append(a.frame(0x1, 0x5, sid, a.headers_block("/reset")))  # END_STREAM|HEADERS
            burst.append(a.frame(0x3, 0, sid, struct.pack(">I", 0x8)))        # RST_STREAM CANCEL
            sid += 2
            if len(burst) >= 200:
                if not a.send(b"".join(burst)):
                    break
                burst = []
        assert_goaway(a, ENHANCE_YOUR_CALM)
    b.check()


def test_continuation_flood_gets_goaway(h2l):
    with Bystander(h2l.port) as b:
        a = RawH2(h2l.port)
        block = a.headers_block("/cont")
        a.send(a.frame(0x1, 0x0, 1, block))  # HEADERS without END_HEADERS
        for _ in range(200):
            if not a.send(a.frame(0x9, 0x0, 1, a.encoder.encode([("x-pad", "p" * 100)]))):
                break
        code, closed = a.goaway()
        a.close()
    assert closed
    assert code is not None and code != 0
    b.check()


def test_hpack_bomb_is_refused_with_431_and_a_repeated_one_gets_goaway(h2l):
    """One 2 KB header in the dynamic table, then a request that refers to it 100 times: 200 KB
    decoded from a few hundred bytes. Past the 64 KiB header list limit: 431, and the connection
    lives (a browser with an oversized cookie). A client that keeps sending them costs their
    decoding each time: past 8 oversized header lists, GOAWAY(ENHANCE_YOUR_CALM)."""
    import hpack
    with Bystander(h2l.port) as b:
        a = RawH2(h2l.port)
        big = ("x-big", "b" * 2000)
        first = a.headers_block("/seed", extra=[big])
        a.send(a.frame(0x1, 0x5, 1, first))
        bomb = a.headers_block("/bomb", extra=[big] * 100)
        assert len(bomb) < 600
        a.send(a.frame(0x1, 0x5, 3, bomb))
        statuses = {}
        deadline = time.monotonic() + 10
        decoder = hpack.Decoder()
        decoder.max_allowed_table_size = 65536
        while len(statuses) < 2 and time.monotonic() < deadline:
            for t, f, sid, payload in a.read_frames(time.monotonic() + 1):
                if t == 0x1:
                    statuses[sid] = dict(decoder.decode(payload))[":status"]
                assert t != "closed"
        assert statuses == {1: "200", 3: "431"}
        # The same bomb again and again (each its own stream): the ninth oversized list ends
        # the connection.
        for sid in range(5, 5 + 2 * 20, 2):
            if not a.send(a.frame(0x1, 0x5, sid, a.headers_block("/bomb", extra=[big] * 100))):
                break
        assert_goaway(a, ENHANCE_YOUR_CALM)
    b.check()


@pytest.mark.parametrize("kind", ["ping", "settings", "window_update", "empty_data"])
def test_control_frame_floods_get_goaway(h2l, kind):
    with Bystander(h2l.port) as b:
        a = RawH2(h2l.port)
        if kind == "empty_data":
            a.send(a.frame(0x1, 0x4, 1, a.headers_block("/upload", "POST")))  # body to come
        one = {"ping": a.frame(0x6, 0, 0, b"12345678"),
               "settings": a.frame(0x4, 0, 0, struct.pack(">HI", 0x3, 100)),
               "window_update": a.frame(0x8, 0, 0, struct.pack(">I", 1)),
               "empty_data": a.frame(0x0, 0, 1, b"")}[kind]
        for _ in range(50):
            if not a.send(one * 100):
                break
        assert_goaway(a, ENHANCE_YOUR_CALM)
    b.check()


def test_zero_window_stall_resets_the_stream(stack_factory):
    """A client that announces a zero window and never opens it: the stream's response cannot
    move, and after --client-send-timeout's worth of no progress the stream is reset; the
    connection and other streams are left alone."""
    s = echo_stack(stack_factory, "--client-send-timeout", "2")
    a = RawH2(s.port, settings={0x4: 0})  # SETTINGS_INITIAL_WINDOW_SIZE = 0
    a.send(a.frame(0x4, 0x1, 0))  # ACK the server's SETTINGS
    a.send(a.frame(0x1, 0x5, 1, a.headers_block("/big?respond=bytes&size=100000")))
    rst, started = None, time.monotonic()
    while rst is None and time.monotonic() - started < 15:
        for t, _, sid, payload in a.read_frames(time.monotonic() + 1):
            assert t != "closed"
            if t == 0x3 and sid == 1:
                rst = (int.from_bytes(payload, "big"), time.monotonic() - started)
    assert rst is not None
    assert rst[0] == 0x8  # CANCEL
    assert 1.5 < rst[1] < 6
    # The connection is still usable: PING answered.
    a.send(a.frame(0x6, 0, 0, b"abcdefgh"))
    frames = a.read_frames(time.monotonic() + 2)
    assert any(t == 0x6 and f & 1 for t, f, _, _ in frames)
    a.close()


def test_zero_window_stalls_on_many_streams_get_goaway(stack_factory):
    """A client that lets stream after stream stall behind a zero window holds a response per
    stream for --client-send-timeout each time: past 4 stalled streams on one connection,
    GOAWAY(ENHANCE_YOUR_CALM) instead of more resets. A bystander on the same worker is not
    slowed meanwhile."""
    s = echo_stack(stack_factory, "--client-send-timeout", "1")
    with Bystander(s.port) as b:
        a = RawH2(s.port, settings={0x4: 0})
        a.send(a.frame(0x4, 0x1, 0))
        for sid in range(1, 12, 2):  # six streams, each answered 100 KB it cannot receive
            a.send(a.frame(0x1, 0x5, sid, a.headers_block("/big?respond=bytes&size=100000")))
        started = time.monotonic()
        code, closed = a.goaway(timeout=10)
        elapsed = time.monotonic() - started
        a.close()
    assert closed
    assert code == ENHANCE_YOUR_CALM, code
    assert 0.9 < elapsed < 5
    b.check()


def test_a_shut_connection_window_gets_goaway(stack_factory):
    """The stream's window is open (1 MiB) but the connection's never is: after the first
    65,535 bytes no stream can move, as with an HTTP/1.1 client that stopped reading, and after
    --client-send-timeout's worth of no progress the connection gets GOAWAY(ENHANCE_YOUR_CALM)
    and closes. A bystander on the same worker is not slowed meanwhile."""
    s = echo_stack(stack_factory, "--client-send-timeout", "2")
    with Bystander(s.port) as b:
        a = RawH2(s.port, settings={0x4: 1 << 20})  # no WINDOW_UPDATE for the connection, ever
        a.send(a.frame(0x4, 0x1, 0))
        a.send(a.frame(0x1, 0x5, 1, a.headers_block("/big?respond=bytes&size=300000")))
        goaway, received, started, closed = None, 0, time.monotonic(), False
        while not closed and time.monotonic() - started < 15:
            for t, _, sid, payload in a.read_frames(time.monotonic() + 1):
                if t == "closed":
                    closed = True
                if t == 0x0 and sid == 1:
                    received += len(payload)
                if t == 0x7:
                    goaway = (int.from_bytes(payload[4:8], "big"), time.monotonic() - started)
        a.close()
    assert received == 65535  # the connection's initial window, no more
    assert closed
    assert goaway is not None and goaway[0] == ENHANCE_YOUR_CALM, goaway
    assert 1.5 < goaway[1] < 6
    b.check()


def test_concurrent_stream_limit_is_announced_and_enforced(stack_factory):
    s = echo_stack(stack_factory, "--http2-max-concurrent-streams", "4")
    a = RawH2(s.port)
    frames, announced = server_preface(a)
    assert announced[0x3] == 4          # MAX_CONCURRENT_STREAMS
    assert announced[0x4] == 65536      # INITIAL_WINDOW_SIZE
    assert announced[0x5] == 16384      # MAX_FRAME_SIZE
    assert announced[0x6] == 65536      # MAX_HEADER_LIST_SIZE
    # The connection window (--http2-connection-window, 1 MiB): the initial 65,535 opened by a
    # WINDOW_UPDATE on stream 0 right after the SETTINGS.
    increments = [int.from_bytes(p, "big") & 0x7FFFFFFF
                  for t, _, sid, p in frames if t == 0x8 and sid == 0]
    assert 65535 + sum(increments) == 1 << 20, increments
    a.send(a.frame(0x4, 0x1, 0))
    # Four slow streams at once are all answered.
    for i in range(4):
        a.send(a.frame(0x1, 0x5, 1 + 2 * i,
                       a.headers_block("/slow?respond=chunked&chunks=2&chunk_size=10"
                                       "&delay_ms=200")))
    answered = set()
    deadline = time.monotonic() + 10
    while len(answered) < 4 and time.monotonic() < deadline:
        for t, f, sid, _ in a.read_frames(time.monotonic() + 1):
            assert t != "closed"
            if t == 0x0 and f & 1:
                answered.add(sid)
    assert answered == {1, 3, 5, 7}
    # A fifth while four are open breaks the acknowledged limit: nghttp2 makes the stream error
    # a connection error (RFC 9113 5.4.1 allows it): GOAWAY(PROTOCOL_ERROR), closed.
    for i in range(5):
        a.send(a.frame(0x1, 0x5, 9 + 2 * i,
                       a.headers_block("/slow?respond=chunked&chunks=2&chunk_size=10"
                                       "&delay_ms=500")))
    code, closed = a.goaway()
    a.close()
    assert closed and code == PROTOCOL_ERROR


def test_the_settings_flags_are_announced(stack_factory):
    """Each HTTP/2 setting flag changes what the data plane announces (and the connection
    window its first WINDOW_UPDATE opens), and the limits apply: a frame larger than the
    announced --http2-max-frame-size is a FRAME_SIZE_ERROR, a header list past
    --http2-max-header-list-size a 431."""
    import hpack
    s = echo_stack(stack_factory, "--http2-max-concurrent-streams", "7",
                   "--http2-stream-window", "131072", "--http2-connection-window", "4194304",
                   "--http2-max-frame-size", "32768", "--http2-max-header-list-size", "8192")
    a = RawH2(s.port)
    frames, announced = server_preface(a)
    assert announced[0x3] == 7
    assert announced[0x4] == 131072
    assert announced[0x5] == 32768
    assert announced[0x6] == 8192
    increments = [int.from_bytes(p, "big") & 0x7FFFFFFF
                  for t, _, sid, p in frames if t == 0x8 and sid == 0]
    assert 65535 + sum(increments) == 4194304, increments
    a.send(a.frame(0x4, 0x1, 0))
    # 9 KB of header fields: past 8192 -> 431; the connection lives.
    a.send(a.frame(0x1, 0x5, 1, a.headers_block("/h", extra=[("x-pad", "p" * 9000)])))
    decoder = hpack.Decoder()
    status = None
    deadline = time.monotonic() + 10
    while status is None and time.monotonic() < deadline:
        for t, _, sid, payload in a.read_frames(time.monotonic() + 1):
            assert t != "closed"
            if t == 0x1 and sid == 1:
                status = dict(decoder.decode(payload))[":status"]
    assert status == "431"
    # A 20,000-byte DATA frame fits the announced 32 KiB frames (no error); one of 40,000 does
    # not: GOAWAY(FRAME_SIZE_ERROR).
    a.send(a.frame(0x1, 0x4, 3, a.headers_block("/upload", "POST")))
    a.send(a.frame(0x0, 0x0, 3, b"x" * 20000))
    assert not any(t in (0x7, "closed") for t, *_ in a.read_frames(time.monotonic() + 0.5))
    a.send(a.frame(0x0, 0x1, 3, b"x" * 40000))
    code, closed = a.goaway()
    a.close()
    assert closed and code == 0x6  # FRAME_SIZE_ERROR
