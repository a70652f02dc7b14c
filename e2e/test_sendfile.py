"""X-Sendfile / X-Accel-Redirect (docs/annotations.md, "X-Sendfile"): a backend names a file and
the real data plane serves it, over HTTP/1.1 (sendfile(2)) and HTTP/2 (read and framed): the
bytes, the validators, Range, conditional requests and HEAD; X-Accel-Redirect through a mapping;
every way out of the directories answered 404; what the backend is told; a route without the
annotation relays the backend's answer as it is."""

from __future__ import annotations

import http.client
import os
import socket
import time

import pytest

import harness
from harness import ingress, path, rule, wait_until
from test_substitution import Site, backend_objects

pytestmark = pytest.mark.usefixtures("over_both_protocols")

HOST = "files.example.com"
PLAIN = "plain.example.com"


@pytest.fixture
def files(stack_factory, tmp_path):
    root = tmp_path / "srv"
    stack = stack_factory()
    # The operator's roots: the route's directory lies within; the other one is outside.
    stack.dataplane.argv += ["--x-sendfile-roots", f"/nonexistent,{root}/files"]
    stack.start_dataplane()
    stack.start_controller()
    stack.dataplane.wait_ready()
    (root / "files/sub").mkdir(parents=True)
    (root / "outside").mkdir()
    big = harness.pattern_bytes(6 * 1024 * 1024 + 123, seed=7)  # several sendfile(2) parts
    (root / "files/big.bin").write_bytes(big)
    (root / "files/report.pdf").write_bytes(b"%PDF-1.7 " + b"r" * 991)
    (root / "files/sub/a b.txt").write_bytes(b"spaced name\n")
    (root / "files/empty.txt").write_bytes(b"")
    (root / "outside/secret.txt").write_bytes(b"secret\n")
    os.symlink(root / "outside/secret.txt", root / "files/link-out")
    os.symlink("sub/a b.txt", root / "files/link-in")
    site = Site()
    d = root / "files"
    site.page("/ready", b"ok")
    site.page("/report", b"", content_type="application/pdf", X_Sendfile=f"{d}/report.pdf",
              Content_Disposition='attachment; filename="report.pdf"', Cache_Control="private")
    site.page("/big", b"", X_Sendfile=f"{d}/big.bin", content_type="application/octet-stream")
    site.page("/empty", b"", X_Sendfile=f"{d}/empty.txt")
    # Without a Content-Type of the backend's, the file's name gives one.
    site.page("/accel", b"", content_type=None, X_Accel_Redirect="/protected/sub/a%20b.txt")
    site.page("/accel-link", b"", content_type=None, X_Accel_Redirect="/protected/link-in")
    site.page("/with-body", b"the backend's own body", X_Sendfile=f"{d}/report.pdf")
    for name, value in {"dotdot": f"{d}/../outside/secret.txt",
                        "accel-dotdot": "/protected/%2e%2e/outside/secret.txt",
                        "link-out": f"{d}/link-out", "outside": f"{root}/outside/secret.txt",
                        "missing": f"{d}/missing.txt", "dir": f"{d}/sub",
                        "relative": "files/report.pdf"}.items():
        header = "X_Accel_Redirect" if name.startswith("accel") else "X_Sendfile"
        site.page(f"/bad/{name}", b"", **{header: value})
    stack.manifests.write(
        "site.yaml", *backend_objects("site", site.host, site.port),
        ingress("files", [rule(HOST, path("/", "site"))],
                annotations={"tidegate.io/x-sendfile-directories": str(d),
                             "tidegate.io/x-accel-mapping": f"/protected/={d}"}),
        ingress("plain", [rule(PLAIN, path("/", "site"))]))
    wait_until(lambda: stack.get("/report", host=HOST).status == 200, 10, "the route")
    stack.site, stack.big, stack.dir = site, big, d
    yield stack
    site.stop()


def test_the_named_file_is_the_answer(files):
    r = files.get("/report", host=HOST,
                  headers={"X-Accel-Mapping": "/=/", "X_Accel_Mapping": "/=/",
                           "X_Sendfile_Type": "X-Accel-Redirect"})
    assert r.status == 200
    assert r.body == b"%PDF-1.7 " + b"r" * 991
    assert r.header("Content-Length") == "1000"
    assert r.header("Content-Type") == "application/pdf"
    assert r.header("Content-Disposition") == 'attachment; filename="report.pdf"'
    assert r.header("Cache-Control") == "private"
    assert r.header("Accept-Ranges") == "bytes"
    st = os.stat(files.dir / "report.pdf")
    assert r.header("ETag") == f'"{int(st.st_mtime):x}-{st.st_size:x}"'
    assert r.header("Last-Modified") is not None
    assert r.header("X-Sendfile") is None
    # The backend was told it may hand files over; the client's mapping never reached it.
    method, target, headers = files.site.requests()[-1]
    assert target == "/report"
    assert headers.get("X-Sendfile-Type") == "X-Sendfile"
    assert not any(k.lower().replace("_", "-") == "x-accel-mapping" for k in headers)
    assert [v for k, v in headers.items()
            if k.lower().replace("_", "-") == "x-sendfile-type"] == ["X-Sendfile"]
    # A large file, whole (several parts), and an empty one.
    r = files.get("/big", host=HOST, timeout=30)
    assert r.status == 200 and len(r.body) == len(files.big)
    assert harness.sha256(r.body) == harness.sha256(files.big)
    r = files.get("/empty", host=HOST)
    assert r.status == 200 and r.body == b"" and r.header("Content-Length") == "0"
    # The backend's own body is dropped, the file sent.
    r = files.get("/with-body", host=HOST)
    assert r.status == 200 and r.body.startswith(b"%PDF") and len(r.body) == 1000


def test_x_accel_redirect_through_the_mapping(files):
    # The type follows the name the backend gave (as nginx's follows the URI), not a link's
    # target.
    for target, content_type in (("/accel", "text/plain"),
                                 ("/accel-link", "application/octet-stream")):
        r = files.get(target, host=HOST)
        assert r.status == 200, target
        assert r.body == b"spaced name\n", target
        assert r.header("Content-Type") == content_type, target


def test_ranges_conditionals_and_head(files):
    big = files.big
    r = files.get("/big", host=HOST, headers={"Range": "bytes=100-199"})
    assert r.status == 206 and r.body == big[100:200]
    assert r.header("Content-Range") == f"bytes 100-199/{len(big)}"
    r = files.get("/big", host=HOST, headers={"Range": "bytes=-5"})
    assert r.status == 206 and r.body == big[-5:]
    r = files.get("/big", host=HOST, headers={"Range": f"bytes={len(big)}-"})
    assert r.status == 416 and r.header("Content-Range") == f"bytes */{len(big)}"
    etag = files.get("/report", host=HOST).header("ETag")
    last_modified = files.get("/report", host=HOST).header("Last-Modified")
    r = files.get("/report", host=HOST, headers={"If-None-Match": etag})
    assert r.status == 304 and r.body == b"" and r.header("ETag") == etag
    r = files.get("/report", host=HOST, headers={"If-Modified-Since": last_modified})
    assert r.status == 304
    r = files.get("/report", host=HOST, headers={"If-Match": '"other"'})
    assert r.status == 412
    r = files.get("/big", host=HOST, headers={"If-Range": '"stale"', "Range": "bytes=0-0"})
    assert r.status == 200 and len(r.body) == len(big)
    r = harness.proto_request(files.port, "HEAD", "/report", HOST)
    assert r.status == 200 and r.body == b"" and r.header("Content-Length") == "1000"


@pytest.mark.parametrize("name", ["dotdot", "accel-dotdot", "link-out", "outside", "missing",
                                  "dir", "relative"])
def test_nothing_outside_the_directories(files, name):
    r = files.get(f"/bad/{name}", host=HOST)
    assert r.status == 404, (name, r.status, r.body)
    assert b"secret" not in r.body
    files.dataplane.wait_for_log(r"X-(Sendfile|Accel-Redirect) .*answered 404")


def test_a_route_without_the_annotation_relays_the_answer(files):
    r = files.get("/report", host=PLAIN)
    assert r.status == 200 and r.body == b""
    assert r.header("X-Sendfile") == f"{files.dir}/report.pdf"
    method, target, headers = files.site.requests()[-1]
    assert "X-Sendfile-Type" not in headers


def test_off_without_the_operators_roots(stack, tmp_path):
    """--x-sendfile-roots not given: the annotation changes nothing (the backend is not told,
    its answer is relayed), so a tenant cannot choose what the data plane reads."""
    d = tmp_path / "files"
    d.mkdir()
    (d / "a.txt").write_bytes(b"file")
    site = Site()
    try:
        site.page("/a", b"the app's own body", X_Sendfile=f"{d}/a.txt")
        stack.manifests.write(
            "site.yaml", *backend_objects("site", site.host, site.port),
            ingress("files", [rule(HOST, path("/", "site"))],
                    annotations={"tidegate.io/x-sendfile-directories": str(d)}))
        wait_until(lambda: stack.get("/a", host=HOST).status == 200, 10, "the route")
        r = stack.get("/a", host=HOST)
        assert r.body == b"the app's own body"
        method, target, headers = site.requests()[-1]
        assert "X-Sendfile-Type" not in headers
    finally:
        site.stop()


def test_keep_alive_after_files_and_a_slow_reader(files):
    if harness.PROTOCOL == "http2":
        pytest.skip("HTTP/1.1 connection reuse and the sendfile(2) wait")
    conn = http.client.HTTPConnection("127.0.0.1", files.port, timeout=30)
    try:
        for target, size in (("/report", 1000), ("/big", len(files.big)), ("/report", 1000)):
            conn.request("GET", target, headers={"Host": HOST})
            r = conn.getresponse()
            assert r.status == 200 and len(r.read()) == size, target
    finally:
        conn.close()
    # A client that reads slowly: the socket fills, the data plane waits for it to drain.
    sock = socket.create_connection(("127.0.0.1", files.port), timeout=30)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.sendall(f"GET /big HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    received = b""

    deadline = time.monotonic() + 30
    while b"\r\n\r\n" not in received:
        received += sock.recv(4096)
    head, _, body = received.partition(b"\r\n\r\n")
    while len(body) < len(files.big) and time.monotonic() < deadline:
        chunk = sock.recv(256 * 1024)
        if not chunk:
            break
        body += chunk
        if len(body) < 512 * 1024:
            time.sleep(0.05)
    sock.close()
    assert b"200 OK" in head
    assert harness.sha256(body) == harness.sha256(files.big)
