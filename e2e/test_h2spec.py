"""HTTP/2 conformance: every h2spec server test case (RFC 7540 and HPACK, 146 cases) against the
data plane, over TLS (ALPN h2) and over cleartext with prior knowledge. h2spec is built from the
Go module proxy at the version pinned in e2e/h2spec/go.mod (e2e/h2spec/build-tools.sh, cached
under ~/.cache/tidegate/h2spec)."""

from __future__ import annotations

import socket
import subprocess
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness import REPO, https_port, ingress, path, rule, service_with_backend

H2SPEC_DIR = REPO / "e2e" / "h2spec"


@pytest.fixture(scope="module")
def h2spec() -> Path:
    p = subprocess.run([str(H2SPEC_DIR / "build-tools.sh")], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, f"e2e/h2spec/build-tools.sh failed:\n{p.stderr[-8000:]}"
    return Path(p.stdout.strip()) / "h2spec"


@pytest.fixture
def h2stack(stack):
    """h2spec asks for / with :authority 127.0.0.1:port: a default backend answers it."""
    echo = stack.backend("echo")
    stack.manifests.write("echo.yaml", *service_with_backend("svc-echo", echo),
                          ingress("echo", default_backend={"service": {
                              "name": "svc-echo", "port": {"number": 80}}}))
    stack.wait_backend("/", "127.0.0.1", "echo")
    return stack


def run_h2spec(h2spec: Path, port: int, tls: bool, report: Path) -> dict[str, str]:
    """The failed cases ("package classname: name") with what h2spec said of each."""
    args = [str(h2spec), "-h", "127.0.0.1", "-p", str(port), "-o", "3", "-j", str(report)]
    if tls:
        args += ["-t", "-k"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert report.exists(), f"h2spec exited {p.returncode}: {p.stdout[-3000:]} {p.stderr[-2000:]}"
    # h2spec writes a failing case's frames as they are: their NUL and other control bytes are
    # not XML. Taken out, so that a failure is reported by name rather than as a parse error.
    text = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", "?", report.read_text(errors="replace"))
    tree = ET.ElementTree(ET.fromstring(text))
    failed: dict[str, str] = {}
    total = 0
    for case in tree.iter("testcase"):
        total += 1
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            failed[f"{case.get('package')} {case.get('classname')}: {case.get('name')}"] = \
                (problem.text or "").strip()[:300]
    # Every case ran (a crash of the data plane midway would leave cases out or fail them).
    assert total >= 140, p.stdout[-3000:]
    return failed


# The plain port speaks HTTP/1.1 to whatever does not start with HTTP/2's preface, so h2spec's
# "invalid connection preface" (INVALID CONNECTION PREFACE\r\n\r\n) gets an HTTP/1.1 400 and
# a close there, where h2spec wants a bare close; over TLS (ALPN h2) it gets the close. The one
# documented difference (docs/proxy.md, "HTTP/2"); the 400 itself is checked below.
SHARED_PORT_CASES = {"http2/3.5 Sends invalid connection preface: None"}


@pytest.mark.deadline(400)
@pytest.mark.parametrize("tls", [False, True], ids=["cleartext", "tls"])
def test_h2spec_server_cases_all_pass(h2spec, h2stack, tls, tmp_path):
    port = https_port(h2stack.dataplane) if tls else h2stack.port
    failed = run_h2spec(h2spec, port, tls, tmp_path / "h2spec.xml")
    expected = set() if tls else SHARED_PORT_CASES
    assert set(failed) == expected, "\n".join(f"{k}: {v}" for k, v in failed.items())
    if not tls:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"INVALID CONNECTION PREFACE\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 400 ")
