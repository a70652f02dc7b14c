"""Hostile requests and responses (issue 17; docs/proxy.md, "Strict HTTP/1.1" and "Path
normalization"): request smuggling (CL.TE, TE.CL, TE.TE obfuscations), malformed framing,
absolute-form targets, dot segments, fragments, h2c upgrades, and backends that answer with
ambiguous framing. Each row says what the client must get (status, and whether the proxy closes
the connection) and what the backend must receive: a raw TCP backend on loopback records every
byte and parses it with a strict reference parser, so a request the proxy and the backend would
frame differently shows up as a parse error or as an unexpected request."""

from __future__ import annotations

import re
import socket
import threading
import time
from dataclasses import dataclass, field

import pytest

from harness import (RawConnection, endpoint_slice, ingress, make_stack, path, rule, service,
                     wait_until)

TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
OK_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class ReferenceBackend:
    """A TCP server that records every byte it receives and parses requests strictly (CRLF only,
    token names, one framing: exactly one Content-Length of digits or exactly `chunked` with
    plain hex sizes). It answers 200 "ok", or, for `/respond/NAME`, the raw bytes
    RESPONSES[NAME] and then closes the connection."""

    def __init__(self, name: str):
        self.name = name
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.host, self.port = self.sock.getsockname()
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.errors: list[str] = []
        self.incomplete: list[bytes] = []
        self.bytes_received = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.sock.close()

    def mark(self) -> tuple[int, int, int, int]:
        with self.lock:
            return (len(self.requests), len(self.errors), len(self.incomplete),
                    self.bytes_received)

    def since(self, mark) -> tuple[list[dict], list[str], list[bytes], int]:
        with self.lock:
            return (self.requests[mark[0]:], self.errors[mark[1]:], self.incomplete[mark[2]:],
                    self.bytes_received - mark[3])

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket):
        buf = b""
        try:
            c.settimeout(30)
            while True:
                try:
                    chunk = c.recv(65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    if buf:
                        with self.lock:
                            self.incomplete.append(buf)
                    return
                with self.lock:
                    self.bytes_received += len(chunk)
                buf += chunk
                while True:
                    try:
                        parsed = self._parse(buf)
                    except ValueError as e:
                        with self.lock:
                            self.errors.append(f"{e}: {buf[:300]!r}")
                        return
                    if parsed is None:
                        break
                    req, buf = parsed
                    with self.lock:
                        self.requests.append(req)
                    if req["target"].startswith("/respond/"):
                        resp = RESPONSES[req["target"][len("/respond/"):]]
                        c.sendall(resp.raw)
                        if resp.later:
                            time.sleep(0.3)
                            c.sendall(resp.later)
                        time.sleep(0.05)
                        return
                    c.sendall(OK_RESPONSE)
        finally:
            c.close()

    @staticmethod
    def _parse(buf: bytes):
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > 200_000:
                raise ValueError("head too long")
            return None
        lines = buf[:end].split(b"\r\n")
        for line in lines:
            if b"\r" in line or b"\n" in line or b"\0" in line:
                raise ValueError("bare CR, LF or NUL")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or parts[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
            raise ValueError("bad request line")
        headers = []
        for line in lines[1:]:
            if b":" not in line:
                raise ValueError("field without colon")
            name, value = line.split(b":", 1)
            if not TOKEN.match(name):
                raise ValueError(f"bad field name {name!r}")
            headers.append((name.decode("latin-1").lower(), value.strip(b" \t").decode("latin-1")))
        cl = [v for n, v in headers if n == "content-length"]
        te = [v for n, v in headers if n == "transfer-encoding"]
        rest = buf[end + 4:]
        if cl and te:
            raise ValueError("Content-Length and Transfer-Encoding")
        body = b""
        if te:
            if te != ["chunked"]:
                raise ValueError(f"Transfer-Encoding {te}")
            while True:
                eol = rest.find(b"\r\n")
                if eol < 0:
                    return None
                size_text = rest[:eol]
                if not re.fullmatch(rb"[0-9a-fA-F]{1,16}", size_text):
                    raise ValueError(f"chunk size {size_text!r}")
                size = int(size_text, 16)
                if size == 0:
                    trailer_end = rest.find(b"\r\n", eol + 2)
                    if trailer_end < 0:
                        return None
                    if trailer_end != eol + 2:
                        raise ValueError("trailer fields")
                    rest = rest[eol + 4:]
                    break
                if len(rest) < eol + 2 + size + 2:
                    return None
                body += rest[eol + 2:eol + 2 + size]
                if rest[eol + 2 + size:eol + 4 + size] != b"\r\n":
                    raise ValueError("chunk without CRLF")
                rest = rest[eol + 4 + size:]
        elif cl:
            if len(cl) != 1 or not cl[0].isdigit():
                raise ValueError(f"Content-Length {cl}")
            n = int(cl[0])
            if len(rest) < n:
                return None
            body, rest = rest[:n], rest[n:]
        req = {"method": parts[0].decode("latin-1"), "target": parts[1].decode("latin-1"),
               "version": parts[2].decode(), "headers": headers, "body": body}
        return req, rest


def R(*lines: bytes | str, body: bytes = b"") -> bytes:
    """A request from its lines (CRLF added), then the empty line and the body."""
    out = b""
    for line in lines:
        out += (line.encode("latin-1") if isinstance(line, str) else line) + b"\r\n"
    return out + b"\r\n" + body


def post(*headers: str | bytes, body: bytes = b"", target: str = "/") -> bytes:
    return R(f"POST {target} HTTP/1.1", "Host: a.example", *headers, body=body)


def get(target: str, *headers: str | bytes, host: str | None = "a.example",
        version: str = "HTTP/1.1") -> bytes:
    lines = [f"GET {target} {version}"]
    if host is not None:
        lines.append(f"Host: {host}")
    return R(*lines, *headers)


CHUNKED_HELLO = b"5\r\nhello\r\n0\r\n\r\n"


@dataclass
class Case:
    raw: bytes
    status: int | list[int]           # the answer (a list: pipelined requests, in order)
    close: bool = False               # the proxy closes the client connection after it
    upstream: list[str] = field(default_factory=list)  # "METHOD target" the backend parses
    backend: str = "a"                # which backend gets them
    host: str = "a.example"           # the Host the backend sees on the first one
    body: bytes | None = None         # the body the backend sees on the first one
    absent: tuple[str, ...] = ()      # fields the backend must not see
    present: dict[str, str] = field(default_factory=dict)  # fields it must see, exactly
    partial_ok: bool = False          # a body error: the head may have gone up, never a request


def refused(raw: bytes, status: int = 400, **kw) -> Case:
    return Case(raw, status, close=True, **kw)


def fwd(raw: bytes, *upstream: str, status: int | list[int] = 200, **kw) -> Case:
    return Case(raw, status, upstream=list(upstream), **kw)


REQUESTS: dict[str, Case] = {
    # ---- Transfer-Encoding (RFC 9112 section 6.1, 6.3) and TE.TE obfuscations
    "te-xchunked": refused(post("Transfer-Encoding: xchunked", body=CHUNKED_HELLO)),
    "te-chunked-identity": refused(post("Transfer-Encoding: chunked, identity",
                                        body=CHUNKED_HELLO)),
    "te-identity": refused(post("Transfer-Encoding: identity", body=b"hello")),
    "te-gzip": refused(post("Transfer-Encoding: gzip", body=b"hello")),
    "te-chunked-gzip": refused(post("Transfer-Encoding: chunked, gzip", body=CHUNKED_HELLO)),
    "te-gzip-chunked": refused(post("Transfer-Encoding: gzip, chunked", body=CHUNKED_HELLO), 501),
    "te-unknown-then-chunked-lines": refused(post("Transfer-Encoding: x",
                                                  "Transfer-Encoding: chunked",
                                                  body=CHUNKED_HELLO), 501),
    "te-chunked-then-unknown-lines": refused(post("Transfer-Encoding: chunked",
                                                  "Transfer-Encoding: x", body=CHUNKED_HELLO)),
    "te-chunked-twice": refused(post("Transfer-Encoding: chunked, chunked", body=CHUNKED_HELLO)),
    "te-chunked-two-lines": refused(post("Transfer-Encoding: chunked",
                                         "Transfer-Encoding: chunked", body=CHUNKED_HELLO)),
    "te-empty": refused(post("Transfer-Encoding: ", body=CHUNKED_HELLO)),
    "te-only-commas": refused(post("Transfer-Encoding: , ,", body=CHUNKED_HELLO)),
    "te-space-before-colon": refused(post("Transfer-Encoding : chunked", body=CHUNKED_HELLO)),
    "te-tab-before-colon": refused(post("Transfer-Encoding\t: chunked", body=CHUNKED_HELLO)),
    "te-vertical-tab": refused(post(b"Transfer-Encoding: \x0bchunked", body=CHUNKED_HELLO)),
    "te-form-feed": refused(post(b"Transfer-Encoding: chunked\x0c", body=CHUNKED_HELLO)),
    "te-nul": refused(post(b"Transfer-Encoding: chunked\x00", body=CHUNKED_HELLO)),
    "te-nbsp": refused(post(b"Transfer-Encoding: \xa0chunked", body=CHUNKED_HELLO)),
    "te-parameter": refused(post("Transfer-Encoding: chunked;q=1", body=CHUNKED_HELLO)),
    "te-quoted": refused(post('Transfer-Encoding: "chunked"', body=CHUNKED_HELLO)),
    "te-obs-fold-appends-identity": refused(post("Transfer-Encoding: chunked", " , identity",
                                                 body=CHUNKED_HELLO)),
    "te-in-http10": refused(R("POST / HTTP/1.0", "Host: a.example", "Transfer-Encoding: chunked",
                              body=CHUNKED_HELLO)),
    "te-in-http10-with-cl": refused(R("POST / HTTP/1.0", "Host: a.example", "Content-Length: 5",
                                      "Transfer-Encoding: chunked", body=CHUNKED_HELLO)),
    "te-leading-line-fold-leading": refused(R("POST / HTTP/1.1", " Transfer-Encoding: chunked",
                                              "Host: a.example", body=CHUNKED_HELLO)),
    "te-tab-value": fwd(post("Transfer-Encoding:\tchunked", body=CHUNKED_HELLO), "POST /",
                        body=b"hello", present={"transfer-encoding": "chunked"}),
    "te-extra-spaces": fwd(post("Transfer-Encoding:    chunked   ", body=CHUNKED_HELLO), "POST /",
                           body=b"hello", present={"transfer-encoding": "chunked"}),
    "te-upper-case": fwd(post("Transfer-Encoding: CHUNKED", body=CHUNKED_HELLO), "POST /",
                         body=b"hello", present={"transfer-encoding": "chunked"}),
    "te-empty-elements": fwd(post("Transfer-Encoding: , chunked", body=CHUNKED_HELLO), "POST /",
                             body=b"hello", present={"transfer-encoding": "chunked"}),
    "te-obs-fold-value": fwd(post("Transfer-Encoding:", " chunked", body=CHUNKED_HELLO),
                             "POST /", body=b"hello", present={"transfer-encoding": "chunked"}),
    "te-underscore-name-is-not-te": fwd(post("Transfer_Encoding: chunked", "Content-Length: 5",
                                             body=b"hello"), "POST /", body=b"hello"),
    # ---- CL.TE and TE.CL
    "cl-te": refused(post("Content-Length: 6", "Transfer-Encoding: chunked",
                          body=b"0\r\n\r\nG")),
    "te-cl": refused(post("Transfer-Encoding: chunked", "Content-Length: 3",
                          body=b"8\r\nSMUGGLED\r\n0\r\n\r\n")),
    "cl-xchunked": refused(post("Content-Length: 4", "Transfer-Encoding: xchunked",
                                body=b"1\r\nZ\r\n0\r\n\r\n")),
    "xchunked-cl": refused(post("Transfer-Encoding: xchunked", "Content-Length: 4",
                                body=b"1\r\nZ\r\n0\r\n\r\n")),
    "cl-te-smuggled-get": refused(post("Content-Length: 44", "Transfer-Encoding: chunked",
                                       body=b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a.example"
                                            b"\r\n\r\n")),
    "te-cl-smuggled-get": refused(post("Transfer-Encoding: chunked", "Content-Length: 4",
                                       body=b"2c\r\nGET /smuggled HTTP/1.1\r\nHost: a.example\r\n"
                                            b"\r\n\r\n0\r\n\r\n")),
    "xchunked-smuggled-get": refused(post("Transfer-Encoding: xchunked",
                                          body=b"GET /smuggled HTTP/1.1\r\nHost: a.example\r\n"
                                               b"\r\n")),
    # ---- Content-Length
    "cl-two-equal": refused(post("Content-Length: 5", "Content-Length: 5", body=b"hello")),
    "cl-two-differing": refused(post("Content-Length: 5", "Content-Length: 6", body=b"hello!")),
    "cl-list-equal": refused(post("Content-Length: 5, 5", body=b"hello")),
    "cl-list-differing": refused(post("Content-Length: 5, 6", body=b"hello!")),
    "cl-plus": refused(post("Content-Length: +5", body=b"hello")),
    "cl-negative": refused(post("Content-Length: -5", body=b"hello")),
    "cl-hex": refused(post("Content-Length: 0x5", body=b"hello")),
    "cl-inner-space": refused(post("Content-Length: 5 5", body=b"hello")),
    "cl-overflow": refused(post("Content-Length: 99999999999999999999999", body=b"hello")),
    "cl-empty": refused(post("Content-Length: ", body=b"hello")),
    "cl-space-before-colon": refused(post("Content-Length : 5", body=b"hello")),
    "cl-letters": refused(post("Content-Length: five", body=b"hello")),
    "cl-leading-zeros": fwd(post("Content-Length: 005", body=b"hello"), "POST /", body=b"hello"),
    "cl-get-with-body": fwd(R("GET / HTTP/1.1", "Host: a.example", "Content-Length: 5",
                              body=b"hello"), "GET /", body=b"hello"),
    "cl-pipelined": fwd(post("Content-Length: 5", body=b"hello") + get("/second"),
                        "POST /", "GET /second", status=[200, 200], body=b"hello"),
    "chunked-pipelined": fwd(post("Transfer-Encoding: chunked", body=CHUNKED_HELLO) +
                             get("/second"), "POST /", "GET /second", status=[200, 200],
                             body=b"hello"),
    # ---- chunked bodies (errors after the head: the head may reach the backend, the request
    # never completes there)
    "chunk-size-overflow": refused(post("Transfer-Encoding: chunked",
                                        body=b"fffffffffffffffffff\r\nhello\r\n0\r\n\r\n"),
                                   partial_ok=True),
    "chunk-size-17-digits": refused(post("Transfer-Encoding: chunked",
                                         body=b"10000000000000005\r\nhello\r\n0\r\n\r\n"),
                                    partial_ok=True),
    "chunk-size-negative": refused(post("Transfer-Encoding: chunked",
                                        body=b"-5\r\nhello\r\n0\r\n\r\n"), partial_ok=True),
    "chunk-size-0x": refused(post("Transfer-Encoding: chunked",
                                  body=b"0x5\r\nhello\r\n0\r\n\r\n"), partial_ok=True),
    "chunk-size-not-hex": refused(post("Transfer-Encoding: chunked",
                                       body=b"zz\r\nhello\r\n0\r\n\r\n"), partial_ok=True),
    "chunk-size-bare-lf": refused(post("Transfer-Encoding: chunked",
                                       body=b"5\nhello\r\n0\r\n\r\n"), partial_ok=True),
    "chunk-data-too-long": refused(post("Transfer-Encoding: chunked",
                                        body=b"3\r\nhello\r\n0\r\n\r\n"), partial_ok=True),
    "chunk-data-without-crlf": refused(post("Transfer-Encoding: chunked",
                                            body=b"5\r\nhelloXX0\r\n\r\n"), partial_ok=True),
    "chunk-ext-lf": refused(post("Transfer-Encoding: chunked",
                                 body=b"5;a\nb\r\nhello\r\n0\r\n\r\n"), partial_ok=True),
    "chunk-ext-nul": refused(post("Transfer-Encoding: chunked",
                                  body=b"5;a\x00\r\nhello\r\n0\r\n\r\n"), partial_ok=True),
    "chunk-ext-valid": fwd(post("Transfer-Encoding: chunked",
                                body=b"5;name=value\r\nhello\r\n0\r\n\r\n"), "POST /",
                           body=b"hello"),
    "chunk-ext-quoted": fwd(post("Transfer-Encoding: chunked",
                                 body=b'5;name="v a"\r\nhello\r\n0\r\n\r\n'), "POST /",
                            body=b"hello"),
    "chunk-trailer": fwd(post("Transfer-Encoding: chunked",
                              body=b"5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n"), "POST /",
                         body=b"hello"),
    "chunk-upper-hex": fwd(post("Transfer-Encoding: chunked",
                                body=b"A\r\n0123456789\r\n0\r\n\r\n"), "POST /",
                           body=b"0123456789"),
    "chunk-leading-zeros": fwd(post("Transfer-Encoding: chunked",
                                    body=b"0005\r\nhello\r\n000\r\n\r\n"), "POST /",
                               body=b"hello"),
    # ---- field lines and characters
    "nul-in-value": refused(get("/", b"X-A: a\x00b")),
    "nul-in-name": refused(get("/", b"X\x00A: b")),
    "cr-in-value": refused(get("/", b"X-A: a\rb")),
    "lf-in-value": refused(get("/", b"X-A: a\nX-B: b")),
    "del-in-value": refused(get("/", b"X-A: a\x7f")),
    "vt-in-value": refused(get("/", b"X-A: \x0b")),
    "esc-in-value": refused(get("/", b"X-A: \x1b[31m")),
    "space-in-name": refused(get("/", "Bad Name: x")),
    "paren-in-name": refused(get("/", "X(A): x")),
    "utf8-in-name": refused(get("/", b"X-\xc3\xa9: x")),
    "empty-name": refused(get("/", ": x")),
    "no-colon": refused(get("/", "NoColonHere")),
    "bare-lf-lines": refused(b"GET / HTTP/1.1\nHost: a.example\n\n"),
    "bare-lf-one-line": refused(b"GET / HTTP/1.1\r\nHost: a.example\nX-A: 1\r\n\r\n"),
    "bare-cr-line-end": refused(b"GET / HTTP/1.1\rHost: a.example\r\n\r\n"),
    "obs-text-value": fwd(get("/", b"X-A: caf\xe9"), "GET /", present={"x-a": "caf\xe9"}),
    "obs-fold-value": fwd(get("/", "X-A: 1", "\t2"), "GET /", present={"x-a": "1 2"}),
    "100-fields": fwd(get("/", *[f"X-F{i}: v" for i in range(99)]), "GET /"),
    "101-fields": refused(get("/", *[f"X-F{i}: v" for i in range(100)]), 431),
    "header-block-over-64k": refused(get("/", "X-Big: " + "x" * (70 * 1024)), 431),
    "request-line-8k-fits": fwd(get("/" + "a" * 8100), "GET /" + "a" * 8100),
    "request-line-over-8k": refused(get("/" + "a" * (9 * 1024)), 414),
    "request-line-over-64k": refused(get("/" + "a" * (70 * 1024)), 414),
    # ---- Host (RFC 9112 section 3.2)
    "no-host": refused(get("/", host=None)),
    "two-hosts": refused(get("/", "Host: b.example")),
    "two-hosts-differing-case": refused(get("/", "host: A.example")),
    "host-with-path": refused(get("/", host="a.example/admin")),
    "host-with-userinfo": refused(get("/", host="user@a.example")),
    "host-with-space": refused(get("/", host="a.example b.example")),
    "host-bad-port": refused(get("/", host="a.example:8x")),
    "host-unclosed-ipv6": refused(get("/", host="[::1")),
    "host-upper-case": fwd(get("/", host="A.EXAMPLE"), "GET /", host="A.EXAMPLE"),
    "host-with-port": fwd(get("/", host="a.example:80"), "GET /", host="a.example:80"),
    "host-empty": Case(get("/", host=""), 404),
    "http10-without-host": Case(get("/", host=None, version="HTTP/1.0"), 404, close=True),
    # ---- absolute-form (RFC 9112 section 3.2.2): the target's authority is the Host
    "absolute-form-other-host": fwd(get("http://a.example/x", host="b.example"), "GET /x",
                                    present={"x-forwarded-host": "a.example"}),
    "absolute-form-https": fwd(get("https://a.example/x", host="b.example"), "GET /x"),
    "absolute-form-upper-scheme": fwd(get("HTTP://a.example/x", host="b.example"), "GET /x"),
    "absolute-form-no-path": fwd(get("http://a.example", host="b.example"), "GET /"),
    "absolute-form-query-only": fwd(get("http://a.example?q=1", host="b.example"),
                                    "GET /?q=1"),
    "absolute-form-port": fwd(get("http://a.example:8080/x", host="b.example"), "GET /x",
                              host="a.example:8080"),
    "absolute-form-to-b": fwd(get("http://b.example/y", host="a.example"), "GET /y",
                              backend="b", host="b.example"),
    "absolute-form-userinfo": refused(get("http://user@a.example/", host="a.example")),
    "absolute-form-empty-authority": refused(get("http:///x", host="a.example")),
    "absolute-form-other-scheme": refused(get("ftp://a.example/", host="a.example")),
    "absolute-form-dot-segments": Case(get("http://a.example/public/../admin", host="b.example"),
                                       403),
    "absolute-form-fragment": refused(get("http://a.example/#x", host="a.example")),
    "absolute-form-http10": fwd(get("http://a.example/z", host=None, version="HTTP/1.0"),
                                "GET /z", status=200),
    "authority-form-get": refused(get("a.example:80")),
    "connect": refused(R("CONNECT a.example:443 HTTP/1.1", "Host: a.example:443"), 405),
    # Accepted, but "*" is no path of any route.
    "asterisk-options": Case(R("OPTIONS * HTTP/1.1", "Host: a.example"), 404),
    "asterisk-get": refused(get("*")),
    "relative-target": refused(get("a/b")),
    # ---- fragments
    "fragment": refused(get("/a#b")),
    "fragment-in-query": refused(get("/a?x=1#b")),
    "fragment-empty": refused(get("/#")),
    "fragment-hides-dots": refused(get("/public#/../admin")),
    # ---- path normalization (the /admin route refuses our address: 403 proves it matched)
    "dot-dot-bypass": Case(get("/public/../admin"), 403),
    "dot-dot-encoded": Case(get("/public/%2e%2e/admin"), 403),
    "dot-dot-mixed-case": Case(get("/public/%2E%2e/admin"), 403),
    "dot-dot-half-encoded": Case(get("/public/.%2e/admin"), 403),
    "dot-segment": Case(get("/./admin"), 403),
    "dot-segments-deep": Case(get("/a/b/c/../../../admin"), 403),
    "unreserved-encoded": Case(get("/%61dmin"), 403),
    "unreserved-encoded-upper": Case(get("/%61%64%6D%69%6E"), 403),
    "dot-dot-with-empty-segment": Case(get("/admin//.."), 403),
    "admin-trailing-dot": Case(get("/admin/."), 403),
    "above-root": refused(get("/../admin")),
    "above-root-encoded": refused(get("/%2e%2e/admin")),
    "above-root-deep": refused(get("/a/../../admin")),
    "above-root-only": refused(get("/..")),
    "bad-percent": refused(get("/a%zz")),
    "truncated-percent": refused(get("/a%4")),
    "trailing-percent": refused(get("/a%")),
    "encoded-slash-kept": fwd(get("/public%2F..%2Fadmin"), "GET /public%2F..%2Fadmin"),
    "encoded-slash-lower-case": fwd(get("/x%2fy"), "GET /x%2Fy"),
    "backslash-kept": fwd(get("/public\\..\\admin"), "GET /public\\..\\admin"),
    "double-slash-kept": fwd(get("//admin"), "GET //admin"),
    "dot-dot-resolved-upstream": fwd(get("/a/b/../c"), "GET /a/c"),
    "query-untouched": fwd(get("/a/./b?x=/../%2e&y=%41"), "GET /a/b?x=/../%2e&y=%41"),
    "double-encoding-kept": fwd(get("/%252e%252e/admin"), "GET /%252e%252e/admin"),
    "reserved-hex-upper": fwd(get("/a%3bb"), "GET /a%3Bb"),
    "raw-utf8": fwd(get("/caf\u00e9".encode().decode("latin-1")),
                    "GET " + "/caf\u00e9".encode().decode("latin-1")),
    # ---- versions
    # Beast accepts HTTP/1.x only (400); the policy's 505 is for anything else that parses.
    # HTTP/2's whole preface starts HTTP/2 (test_http2.py); one that differs anywhere is read
    # as an HTTP/1.1 request line with version 2.0.
    "http2-preface-broken": refused(b"PRI * HTTP/2.0\r\n\r\nSX\r\n\r\n"),
    "http12": refused(get("/", version="HTTP/1.2")),
    "http09": refused(b"GET /\r\n\r\n"),
    "lower-case-version": refused(get("/", version="http/1.1")),
    "version-extra-token": refused(b"GET / HTTP/1.1 x\r\nHost: a.example\r\n\r\n"),
    # ---- upgrades: only WebSocket goes up as one
    "h2c-upgrade": fwd(get("/", "Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c",
                           "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"), "GET /",
                       absent=("upgrade", "http2-settings")),
    "h2c-without-connection": fwd(get("/", "Upgrade: h2c"), "GET /", absent=("upgrade",)),
    "http2-settings-alone": fwd(get("/", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"), "GET /",
                                absent=("http2-settings",)),
    "upgrade-tls": fwd(get("/", "Connection: Upgrade", "Upgrade: TLS/1.2"), "GET /",
                       absent=("upgrade",)),
    "upgrade-list": fwd(get("/", "Connection: Upgrade", "Upgrade: websocket, h2c"), "GET /",
                        absent=("upgrade",)),
    "upgrade-two-lines": fwd(get("/", "Connection: Upgrade", "Upgrade: websocket",
                                 "Upgrade: h2c"), "GET /", absent=("upgrade",)),
    "websocket-http10": Case(get("/", "Connection: Upgrade", "Upgrade: websocket",
                                 version="HTTP/1.0"), 200, close=True, upstream=["GET /"],
                             absent=("upgrade",)),
    "h2c-switch-answered-502": Case(get("/respond/switch-h2c", "Connection: Upgrade",
                                        "Upgrade: h2c"), 502, close=True,
                                    upstream=["GET /respond/switch-h2c"], absent=("upgrade",)),
}


@dataclass
class ResponseCase:
    raw: bytes
    status: int             # what the client gets; 502: refused, never relayed
    body: bytes | None = None
    truncated: bool = False  # the status line went out, then the client connection closes
    later: bytes = b""       # sent 0.3 s after `raw`


RESPONSES: dict[str, ResponseCase] = {
    "ok-content-length": ResponseCase(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200,
                                      b"hello"),
    "ok-chunked": ResponseCase(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                               + CHUNKED_HELLO, 200, b"hello"),
    "ok-chunked-upper": ResponseCase(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n"
                                     + CHUNKED_HELLO, 200, b"hello"),
    "ok-close-delimited": ResponseCase(b"HTTP/1.1 200 OK\r\n\r\nhello", 200, b"hello"),
    "ok-http10": ResponseCase(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200,
                              b"hello"),
    "ok-interim-then-final": ResponseCase(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
                                          b"Content-Length: 5\r\n\r\nhello", 200, b"hello"),
    "ok-obs-fold": ResponseCase(b"HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 5\r\n\r\n"
                                b"hello", 200, b"hello"),
    "ok-extra-bytes-after": ResponseCase(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
                                         b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\npoisoned",
                                         200, b"hello"),
    "cl-and-te": ResponseCase(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n" + CHUNKED_HELLO, 502),
    "te-and-cl": ResponseCase(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                              b"Content-Length: 5\r\n\r\n" + CHUNKED_HELLO, 502),
    "xchunked-and-cl": ResponseCase(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n"
                                    b"Content-Length: 5\r\n\r\nhello", 502),
    "cl-two-equal": ResponseCase(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n"
                                 b"\r\nhello", 502),
    "cl-two-differing": ResponseCase(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                                     b"Content-Length: 7\r\n\r\nhello!!", 502),
    "cl-list": ResponseCase(b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello", 502),
    "cl-letters": ResponseCase(b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nhello", 502),
    "cl-negative": ResponseCase(b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello", 502),
    "te-xchunked": ResponseCase(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\nhello",
                                502),
    "te-gzip-chunked": ResponseCase(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                                    + CHUNKED_HELLO, 502),
    "te-chunked-identity": ResponseCase(b"HTTP/1.1 200 OK\r\n"
                                        b"Transfer-Encoding: chunked, identity\r\n\r\nhello", 502),
    "te-two-lines": ResponseCase(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                                 b"Transfer-Encoding: chunked\r\n\r\n" + CHUNKED_HELLO, 502),
    "te-in-http10": ResponseCase(b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 + CHUNKED_HELLO, 502),
    "te-space-before-colon": ResponseCase(b"HTTP/1.1 200 OK\r\nTransfer-Encoding : chunked\r\n"
                                          b"\r\n" + CHUNKED_HELLO, 502),
    "bare-lf": ResponseCase(b"HTTP/1.1 200 OK\nContent-Length: 5\n\nhello", 502),
    "nul-in-field": ResponseCase(b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 5\r\n\r\n"
                                 b"hello", 502),
    "http2-version": ResponseCase(b"HTTP/2.0 200 OK\r\nContent-Length: 5\r\n\r\nhello", 502),
    "bad-status-code": ResponseCase(b"HTTP/1.1 2000 OK\r\nContent-Length: 5\r\n\r\nhello", 502),
    "bad-chunk-size": ResponseCase(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   b"zz\r\nhello\r\n0\r\n\r\n", 502),
    "chunk-size-overflow": ResponseCase(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                        b"fffffffffffffffffff\r\nhello\r\n", 502),
    # A bad chunk after the status line went out: the client connection is closed mid-body.
    "bad-chunk-later": ResponseCase(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                    b"5\r\nhello\r\n", 200, truncated=True,
                                    later=b"zz\r\nhello\r\n0\r\n\r\n"),
    "switch-h2c": ResponseCase(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n"
                               b"Connection: Upgrade\r\n\r\n", 502),
}


@dataclass
class Env:
    stack: object
    a: ReferenceBackend
    b: ReferenceBackend


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    s = make_stack(root)
    a, b = ReferenceBackend("a"), ReferenceBackend("b")
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    s.manifests.write(
        "hostile.yaml",
        service("svc-a"), endpoint_slice("svc-a-1", "svc-a", ["127.0.0.1"], a.port),
        service("svc-b"), endpoint_slice("svc-b-1", "svc-b", ["127.0.0.1"], b.port),
        ingress("hostile", [rule("a.example", path("/", "svc-a")),
                            rule("b.example", path("/", "svc-b"))]),
        # A policy that refuses our address: a 403 proves the /admin route matched.
        ingress("admin", [rule("a.example", path("/admin", "svc-a"))],
                annotations={"tidegate.io/whitelist-source-range": "10.0.0.0/8"}))
    s.wait_status("/admin", "a.example", 403)
    s.wait_status("/", "a.example", 200)
    yield Env(s, a, b)
    crashed = s.crashed()
    s.shutdown()
    a.close()
    b.close()
    assert not crashed, crashed


def settle(backends, marks, quiet: float = 0.15) -> None:
    """Waits until no backend has received a byte for `quiet` seconds."""
    last = [sum(b.mark()[3] for b in backends)]
    deadline = time.monotonic() + 3

    def quiet_now():
        time.sleep(quiet)
        now = sum(b.mark()[3] for b in backends)
        done = now == last[0]
        last[0] = now
        return done or time.monotonic() > deadline
    wait_until(quiet_now, 5, "backends to go quiet", interval=0)


@pytest.mark.parametrize("name", REQUESTS.keys())
def test_hostile_request(env, name):
    case = REQUESTS[name]
    backends = {"a": env.a, "b": env.b}
    marks = {k: b.mark() for k, b in backends.items()}
    statuses = case.status if isinstance(case.status, list) else [case.status]
    with RawConnection(env.stack.port, timeout=5) as c:
        c.send(case.raw)
        for want in statuses:
            r = c.read_response("HEAD" if case.raw.startswith(b"HEAD") else "GET")
            assert r.status == want, (name, r.status, r.body[:200])
        if case.close:
            assert c.closed_by_peer(3), f"{name}: the proxy kept the connection open"
        else:
            assert c.stray_bytes(0.2) == b"", f"{name}: bytes after the answer"
    settle(list(backends.values()), marks)
    for key, backend in backends.items():
        reqs, errors, incomplete, received = backend.since(marks[key])
        assert errors == [], f"{name}: backend {key} could not parse what it got: {errors}"
        want = case.upstream if key == case.backend else []
        got = [f"{x['method']} {x['target']}" for x in reqs]
        assert got == want, f"{name}: backend {key} got {got}, want {want}"
        if not case.partial_ok:
            assert incomplete == [], f"{name}: backend {key} got a partial request {incomplete}"
        if not want and not case.partial_ok:
            assert received == 0, f"{name}: {received} bytes reached backend {key}"
        if reqs:
            first = reqs[0]
            headers = dict(first["headers"])
            hosts = [v for n, v in first["headers"] if n == "host"]
            assert hosts == [case.host], (name, hosts)
            if case.body is not None:
                assert first["body"] == case.body, (name, first["body"])
            for h in case.absent:
                assert h not in headers, (name, h, first["headers"])
            for h, v in case.present.items():
                assert headers.get(h) == v, (name, h, first["headers"])


@pytest.mark.parametrize("name", RESPONSES.keys())
def test_hostile_response(env, name):
    case = RESPONSES[name]
    with RawConnection(env.stack.port, timeout=5) as c:
        c.send(get(f"/respond/{name}"))
        if case.truncated:
            version, status, _, headers = c.read_head()
            assert status == case.status, (name, status)
            rest = c.read_until_close()
            assert not rest.endswith(b"0\r\n\r\n"), (name, rest)
            return
        r = c.read_response()
        assert r.status == case.status, (name, r.status, r.body[:200])
        keep_alive = True
        if case.status == 502:
            assert b"hello" not in r.body and b"poisoned" not in r.body, (name, r.body)
            if r.text != "upstream sent a malformed response\n":
                # Beast could not parse the head (or a 101 nobody asked for): answered as a
                # broken upstream, and the client connection closed.
                assert r.text in ("upstream unavailable\n", "upstream failed\n",
                                  "upstream switched protocols unexpectedly\n"), (name, r.text)
                assert c.closed_by_peer(3), name
                keep_alive = False
        if case.body is not None:
            assert r.body == case.body, (name, r.body)
        if keep_alive:
            # The client connection is still in step: the next answer is the next request's.
            c.send(get("/next"))
            r2 = c.read_response()
            assert (r2.status, r2.body) == (200, b"ok"), (name, r2.status, r2.body[:200])
            assert c.stray_bytes(0.2) == b""
    # An upstream connection with bytes past its response is never reused.
    for _ in range(3):
        with RawConnection(env.stack.port, timeout=5) as c:
            c.send(get("/again"))
            r = c.read_response()
            assert (r.status, r.body) == (200, b"ok"), (name, r.status, r.body[:200])


def test_the_corpus_is_large_enough():
    assert len(REQUESTS) + len(RESPONSES) >= 100


@pytest.mark.parametrize("flags,cases", [
    (["--merge-slashes", "on", "--path-escaped-slashes", "reject"], {
        "//admin": 403, "/public//..//admin": 403, "/public%2F..%2Fadmin": 400,
        "/a\\b": 400, "/a%5cb": 400, "//x//y": "/x/y"}),
    (["--path-escaped-slashes", "decode"], {
        "/public%2F..%2Fadmin": 403, "/public\\..\\admin": 403, "/x\\y": "/x/y",
        "/x%2fy": "/x/y", "/a/..%2f..%2fb": 400, "//x": "//x"}),
], ids=["merge-and-reject", "decode"])
def test_path_flags(stack_factory, flags, cases):
    s = stack_factory(dataplane_args=flags)
    a = ReferenceBackend("a")
    try:
        s.start_dataplane()
        s.start_controller()
        s.dataplane.wait_ready()
        s.manifests.write(
            "p.yaml", service("svc-a"),
            endpoint_slice("svc-a-1", "svc-a", ["127.0.0.1"], a.port),
            ingress("p", [rule("a.example", path("/", "svc-a"))]),
            ingress("admin", [rule("a.example", path("/admin", "svc-a"))],
                    annotations={"tidegate.io/whitelist-source-range": "10.0.0.0/8"}))
        s.wait_status("/admin", "a.example", 403)
        for target, want in cases.items():
            mark = a.mark()
            with RawConnection(s.port, timeout=5) as c:
                c.send(get(target))
                r = c.read_response()
            if isinstance(want, int):
                assert r.status == want, (target, r.status, r.body)
                assert a.since(mark)[0] == [], target
            else:
                assert r.status == 200, (target, r.status, r.body)
                assert [x["target"] for x in a.since(mark)[0]] == [want], target
    finally:
        a.close()
