"""TLS passthrough (issue 20): ssl-passthrough relays a TLS connection whose SNI names the host to
the backend of the Ingress's "/" path without terminating it, on the same HTTPS port where other
hosts are terminated; the ClientHello is read first and goes on unchanged. Live changes, as for
everything else, and open passed-through connections outlive configuration changes."""

from __future__ import annotations

import socket
import ssl
from types import SimpleNamespace

import pytest

from harness import (CertAuthority, RawConnection, Response, TlsBackend, endpoint_slice,
                     https_port, ingress, path, request, rule, service, service_with_backend,
                     tls_secret, wait_until, with_tls)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    ca = CertAuthority(tmp_path_factory.mktemp("pt-ca"))
    c = SimpleNamespace(ca=ca)
    c.backend = ca.issue("backend", ["pt.example.com"], "ec")  # the backend's own
    c.proxy = ca.issue("proxy", ["term.example.com", "pt.example.com"], "rsa")  # Tidegate's
    return c


def connect(port: int, sni: str | None, alpn: list[str] | None = None) -> ssl.SSLSocket:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn)
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    return ctx.wrap_socket(sock, server_hostname=sni)


def send(s: ssl.SSLSocket, host: str, target: str = "/") -> Response:
    s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    raw = RawConnection.__new__(RawConnection)
    raw.timeout, raw.sock, raw.buf = 5, s, b""
    return raw.read_response("GET")


def who_answers(port: int, sni: str, certs) -> str:
    """'backend' when the backend's certificate came back (passed through), 'proxy' when
    Tidegate terminated the connection, 'closed' when it was closed."""
    try:
        s = connect(port, sni)
    except (ssl.SSLError, OSError):
        return "closed"
    try:
        der = s.getpeercert(binary_form=True)
        return "backend" if der == certs.backend.der else (
            "proxy" if der == certs.proxy.der else "other")
    finally:
        s.close()


def manifests(stack, certs, tls_backend, http_backend, passthrough: str | None = "true",
              extra=()):
    annotations = {} if passthrough is None else {"tidegate.io/ssl-passthrough": passthrough}
    pt = with_tls(ingress("pt", [rule("pt.example.com", path("/", "svc-tls"))],
                          annotations=annotations), (["pt.example.com"], "proxy-tls"))
    term = with_tls(ingress("term", [rule("term.example.com", path("/", "svc-app"))]),
                    (["term.example.com"], "proxy-tls"))
    stack.manifests.write(
        "app.yaml", *service_with_backend("svc-tls", tls_backend),
        *service_with_backend("svc-app", http_backend),
        tls_secret("proxy-tls", certs.proxy.cert_pem, certs.proxy.key_pem), pt, term, *extra)


def test_passthrough_beside_termination(stack, certs):
    tls_b = TlsBackend("tls", certs.ca.folder / "backend.crt", certs.ca.folder / "backend.key")
    stack.backends.append(tls_b)
    http_b = stack.backend("app")
    port = https_port(stack.dataplane)
    manifests(stack, certs, tls_b, http_b)
    wait_until(lambda: who_answers(port, "pt.example.com", certs) == "backend", 10, "passthrough")

    # End to end TLS with the backend: its certificate, its answer, the SNI the client sent.
    s = connect(port, "pt.example.com")
    try:
        assert s.getpeercert(binary_form=True) == certs.backend.der
        r = send(s, "pt.example.com", "/first")
        assert r.status == 200 and r.json()["backend"] == "tls" and r.json()["path"] == "/first"
        # A configuration change while the connection is open does not touch it.
        manifests(stack, certs, tls_b, http_b,
                  extra=[ingress("more", [rule("more.example.com", path("/", "svc-app"))])])
        wait_until(lambda: request(stack.port, "GET", "/", "more.example.com").status == 200, 10,
                   "the new host")
        r = send(s, "pt.example.com", "/second")
        assert r.status == 200 and r.json()["path"] == "/second"
    finally:
        s.close()
    assert "pt.example.com" in tls_b.server_names

    # The same port terminates the other host, with Tidegate's certificate, over HTTP/2 too.
    assert who_answers(port, "term.example.com", certs) == "proxy"
    s = connect(port, "term.example.com")
    try:
        r = send(s, "term.example.com", "/t")
        assert r.status == 200 and r.json()["backend"] == "app"
    finally:
        s.close()
    h2 = connect(port, "term.example.com", alpn=["h2", "http/1.1"])
    assert h2.selected_alpn_protocol() == "h2"
    h2.close()
    # No SNI, or another name: terminated (the default certificate, Tidegate's routes).
    assert who_answers(port, None, certs) == "other"
    # Plain HTTP to the passed-through host is routed as usual (here: 308 to HTTPS).
    assert request(stack.port, "GET", "/x", "pt.example.com").status == 308
    # A TLS connection made for another name (or without SNI) is terminated here: it must not
    # reach the passed-through host's routes around the backend's own TLS.
    for sni in ("term.example.com", None):
        s = connect(port, sni)
        try:
            assert send(s, "pt.example.com", "/around").status == 421
        finally:
            s.close()

    # A large exchange both ways goes through intact.
    s = connect(port, "pt.example.com")
    try:
        r = send(s, "pt.example.com", "/?respond=bytes&size=3000000&seed=7")
        assert r.status == 200 and len(r.body) == 3_000_000
    finally:
        s.close()

    # The annotation removed: the host is terminated again, with its spec.tls certificate.
    manifests(stack, certs, tls_b, http_b, passthrough=None)
    wait_until(lambda: who_answers(port, "pt.example.com", certs) == "proxy", 10, "terminated")
    s = connect(port, "pt.example.com")
    try:
        r = send(s, "pt.example.com")
        # Terminated here, the request goes to svc-tls as plain HTTP: the TLS backend cannot
        # answer it (502), which shows the connection was not passed through.
        assert r.status == 502
    finally:
        s.close()


def test_no_endpoint_closes_and_a_dead_one_is_skipped(stack, certs):
    tls_b = TlsBackend("tls", certs.ca.folder / "backend.crt", certs.ca.folder / "backend.key")
    stack.backends.append(tls_b)
    http_b = stack.backend("app")
    port = https_port(stack.dataplane)
    # Two endpoints, one of which refuses connections (nothing listens on 127.0.0.2): every
    # connection reaches the live one.
    pt = ingress("pt", [rule("pt.example.com", path("/", "svc-tls"))],
                 annotations={"tidegate.io/ssl-passthrough": "true"})
    two = endpoint_slice("svc-tls-1", "svc-tls", ["127.0.0.1", "127.0.0.2"], tls_b.port)
    stack.manifests.write("app.yaml", service("svc-tls"), two,
                          *service_with_backend("svc-app", http_b), pt)
    wait_until(lambda: who_answers(port, "pt.example.com", certs) == "backend", 10, "passthrough")
    for _ in range(10):
        assert who_answers(port, "pt.example.com", certs) == "backend"
    # No endpoints: the connection is closed (nothing can answer it).
    stack.manifests.write("app.yaml", service("svc-tls"),
                          *service_with_backend("svc-app", http_b), pt)
    wait_until(lambda: who_answers(port, "pt.example.com", certs) == "closed", 10, "closed")
    stack.dataplane.wait_for_log(r"no endpoints for default/svc-tls:80", 5)


def test_invalid_values_are_reported(stack, certs):
    http_b = stack.backend("app")
    port = https_port(stack.dataplane)
    stack.manifests.write(
        "app.yaml", *service_with_backend("svc-app", http_b),
        ingress("bad", [rule("bad.example.com", path("/", "svc-app"))],
                annotations={"tidegate.io/ssl-passthrough": "yes"}),
        ingress("wild", [rule("*.wild.example.com", path("/", "svc-app"))],
                annotations={"tidegate.io/ssl-passthrough": "true"}),
        ingress("noroot", [rule("noroot.example.com", path("/api", "svc-app"))],
                annotations={"tidegate.io/ssl-passthrough": "true"}))
    stack.controller.wait_for_log(r"ssl-passthrough: invalid value \"yes\"", 10)
    stack.controller.wait_for_log(r"\*\.wild\.example\.com is not an exact host name", 5)
    stack.controller.wait_for_log(r"host noroot\.example\.com has no path \"/\" of this Ingress",
                                  5)
    # Nothing is passed through: each is terminated as usual.
    for host in ("bad.example.com", "noroot.example.com", "a.wild.example.com"):
        assert who_answers(port, host, certs) == "other"
