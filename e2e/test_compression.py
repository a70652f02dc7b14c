"""Response compression (docs/annotations.md, "Compression"): tidegate.io/enable-compression
through the real data plane, over HTTP/1.1 and HTTP/2, decompressed by Python's gzip, by
curl's brotli and by the zstd tool; the BREACH mitigations; what is left alone; substitution first, then compression."""

from __future__ import annotations

import gzip
import subprocess

import pytest

import harness
from harness import endpoint_slice, ingress, path, rule, service, wait_until
from test_substitution import Site, backend_objects

pytestmark = pytest.mark.usefixtures("over_both_protocols")

HOST = "zip.example.com"
PAGE = b"<html><body>" + b"<p>shop.example.com sells colour pencils</p>\n" * 2000 + b"</body>"


@pytest.fixture
def zipped(stack):
    site = Site()
    site.page("/page.html", PAGE, ETag='"p1"')
    site.page("/small.html", b"<p>tiny</p>")
    site.page("/logo.png", b"\x89PNG" + b"\0" * 5000, content_type="image/png")
    site.page("/packed.html", gzip.compress(PAGE), content_encoding="gzip")
    stack.manifests.write(
        "site.yaml", *backend_objects("site", site.host, site.port),
        ingress("zip", [rule(HOST, path("/", "site"))],
                annotations={"tidegate.io/enable-compression": "true",
                             "tidegate.io/substitutions":
                                 "- {match: 'colour', replace: 'color'}"}))
    wait_until(lambda: stack.get("/page.html", host=HOST,
                                 headers={"Accept-Encoding": "gzip"}).status == 200,
               10, "the route")
    stack.site = site
    yield stack
    site.stop()


def test_gzip_when_asked_and_the_substitution_applied_first(zipped):
    r = zipped.get("/page.html", host=HOST, headers={"Accept-Encoding": "gzip"})
    assert r.status == 200
    assert r.header("Content-Encoding") == "gzip"
    assert r.header("Vary") == "Accept-Encoding"
    assert r.header("ETag") == 'W/"p1"'
    assert r.header("Content-Length") is None
    body = gzip.decompress(r.body)
    assert body == PAGE.replace(b"colour", b"color")
    assert len(r.body) < len(body) / 10


def test_brotli_preferred_and_decoded_by_curl(zipped):
    if harness.PROTOCOL == "http2":
        extra = ["--http2-prior-knowledge"]
    else:
        extra = ["--http1.1"]
    out = subprocess.run(
        ["curl", "-sS", *extra, "-H", f"Host: {HOST}", "-H", "Accept-Encoding: gzip, br",
         "-D", "-", "-o", "-", f"http://127.0.0.1:{zipped.port}/page.html"],
        capture_output=True, timeout=20)
    assert out.returncode == 0, out.stderr
    head, _, raw = out.stdout.partition(b"\r\n\r\n")
    assert b"content-encoding: br" in head.lower(), head
    decoded = subprocess.run(
        ["curl", "-sS", *extra, "--compressed", "-H", f"Host: {HOST}",
         f"http://127.0.0.1:{zipped.port}/page.html"], capture_output=True, timeout=20)
    assert decoded.stdout == PAGE.replace(b"colour", b"color")
    assert len(raw) < len(decoded.stdout) / 10


def test_zstd_when_named_and_decoded_by_the_zstd_tool(zipped):
    r = zipped.get("/page.html", host=HOST, headers={"Accept-Encoding": "gzip, zstd"})
    assert r.status == 200 and r.header("Content-Encoding") == "zstd"
    decoded = subprocess.run(["zstd", "-d", "-c"], input=r.body, capture_output=True, timeout=20)
    assert decoded.returncode == 0, decoded.stderr
    assert decoded.stdout == PAGE.replace(b"colour", b"color")
    assert len(r.body) < len(decoded.stdout) / 10
    # Equal q-values: br first; "*" never means zstd.
    assert zipped.get("/page.html", host=HOST,
                      headers={"Accept-Encoding": "zstd, br"}).header("Content-Encoding") == "br"
    assert zipped.get("/page.html", host=HOST,
                      headers={"Accept-Encoding": "*, br;q=0"}).header(
                          "Content-Encoding") == "gzip"


def test_breach_mitigations(stack):
    site = Site()
    site.page("/page.html", PAGE)
    try:
        def write(mode: str) -> None:
            stack.manifests.write(
                "site.yaml", *backend_objects("site", site.host, site.port),
                ingress("zip", [rule(HOST, path("/", "site"))],
                        annotations={"tidegate.io/enable-compression": "true",
                                     "tidegate.io/compression-breach-mitigation": mode}))

        def get(**headers):
            return stack.get("/page.html", host=HOST,
                             headers={"Accept-Encoding": "gzip", **headers})

        write("no-credentials")
        wait_until(lambda: get().header("Content-Encoding") == "gzip", 10, "the route")
        for creds in ({"Cookie": "session=1"}, {"Authorization": "Bearer x"}):
            r = get(**creds)
            assert r.header("Content-Encoding") is None and r.body == PAGE, creds
        write("padding")
        wait_until(lambda: get().header("X-Compression-Padding") is not None, 10, "padding")
        lengths = set()
        for _ in range(20):
            r = get(Cookie="session=1")
            assert r.header("Content-Encoding") == "gzip" and gzip.decompress(r.body) == PAGE
            lengths.add(len(r.header("X-Compression-Padding")))
        assert len(lengths) > 5, lengths
    finally:
        site.stop()


def test_what_is_left_alone(zipped):
    ask = {"Accept-Encoding": "gzip, br"}
    # Not asked for: the identity body, with Vary so that caches keep both.
    r = zipped.get("/page.html", host=HOST)
    assert r.header("Content-Encoding") is None and r.header("Vary") == "Accept-Encoding"
    assert r.body == PAGE.replace(b"colour", b"color")
    # Too small, not a listed type, already compressed by the backend.
    for target in ("/small.html", "/logo.png"):
        r = zipped.get(target, host=HOST, headers=ask)
        assert r.status == 200 and r.header("Content-Encoding") is None, target
    r = zipped.get("/packed.html", host=HOST, headers=ask)
    assert r.header("Content-Encoding") == "gzip"
    assert gzip.decompress(r.body) == PAGE  # passed through once, not twice


def test_compression_alone_frames_the_body_and_keeps_the_connection(stack):
    # Without a substitution before it, the compressor is what takes Content-Length away: the
    # body must go chunked to HTTP/1.1 clients (else it could only end with the connection).
    site = Site()
    site.page("/page.html", PAGE)
    try:
        stack.manifests.write(
            "site.yaml", *backend_objects("site", site.host, site.port),
            ingress("zip", [rule(HOST, path("/", "site"))],
                    annotations={"tidegate.io/enable-compression": "true"}))
        wait_until(lambda: stack.get("/page.html", host=HOST).status == 200, 10, "the route")
        if harness.PROTOCOL == "http2":
            r = stack.get("/page.html", host=HOST, headers={"Accept-Encoding": "gzip"})
            assert r.header("Content-Encoding") == "gzip" and gzip.decompress(r.body) == PAGE
            return
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=5)
        try:
            for _ in range(3):  # one connection: each body ends by its framing
                conn.request("GET", "/page.html",
                             headers={"Host": HOST, "Accept-Encoding": "gzip"})
                res = conn.getresponse()
                assert res.getheader("Transfer-Encoding") == "chunked"
                assert res.getheader("Content-Length") is None
                assert gzip.decompress(res.read()) == PAGE
                assert not res.will_close
        finally:
            conn.close()
    finally:
        site.stop()
