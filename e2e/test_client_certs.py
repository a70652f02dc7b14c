"""Client certificates (issue 20): auth-tls-secret, auth-tls-verify-client, -verify-depth,
-pass-certificate-to-upstream, -error-page and -match-cn, as ingress-nginx's. Real TLS clients
(Python's ssl, curl for HTTP/2) with certificates from two CAs made with the openssl CLI; the
backend echoes what it heard. Each case also shows what must never happen: a request that reaches
the backend without the check, on another host's connection, or through a resumed session."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import ssl
import subprocess
import urllib.parse
from types import SimpleNamespace

import pytest

from harness import (CertAuthority, RawConnection, Response, header_values, https_port, ingress,
                     path, request, rule, service_with_backend, tls_secret, wait_until, with_tls)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    server_ca = CertAuthority(tmp_path_factory.mktemp("server-ca"))
    client_ca = CertAuthority(tmp_path_factory.mktemp("client-ca"))
    other_ca = CertAuthority(tmp_path_factory.mktemp("other-ca"))
    p = SimpleNamespace(server_ca=server_ca, client_ca=client_ca, other_ca=other_ca)
    p.server = server_ca.issue("server", ["mtls.example.com", "open.example.com",
                                          "alias.example.com", "opt.example.com",
                                          "noca.example.com", "page.example.com",
                                          "cn.example.com", "b.example.com",
                                          "*.wild.example.com"])
    p.alice = client_ca.issue("alice", ["alice"])
    p.bob = client_ca.issue("bob", ["bob"])
    p.mallory = other_ca.issue("mallory", ["mallory"])
    # Chains through intermediates: carol's has one (the default depth, 1, allows it), dave's two
    # (depth 2 needed): client CA -> sub -> subsub -> dave.
    p.sub = client_ca.sub_ca(tmp_path_factory.mktemp("client-sub"))
    p.carol = p.sub.issue("carol", ["carol"])
    p.subsub = p.sub.sub_ca(tmp_path_factory.mktemp("client-subsub"))
    p.dave = p.subsub.issue("dave", ["dave"])
    folder = tmp_path_factory.mktemp("client-files")
    # carol and dave send their intermediates along, as clients with such chains do.
    chains = {"carol": p.sub.ca_pem, "dave": p.subsub.ca_pem + p.sub.ca_pem}
    for name in ("alice", "bob", "mallory", "carol", "dave"):
        c = getattr(p, name)
        chain = c.cert_pem + chains.get(name, b"")
        (folder / f"{name}.crt").write_bytes(chain)
        (folder / f"{name}.key").write_bytes(c.key_pem)
    p.files = folder
    return p


def ca_secret(name: str, ca_pem: bytes, crl_pem: bytes | None = None) -> dict:
    data = {"ca.crt": base64.b64encode(ca_pem).decode()}
    if crl_pem is not None:
        data["ca.crl"] = base64.b64encode(crl_pem).decode()
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"},
            "data": data}


def client_context(pki, who: str | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if who is not None:
        ctx.load_cert_chain(str(pki.files / f"{who}.crt"), str(pki.files / f"{who}.key"))
    return ctx


def connect(port: int, ctx: ssl.SSLContext, sni: str | None, session=None) -> ssl.SSLSocket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    return ctx.wrap_socket(sock, server_hostname=sni, session=session)


def send(s: ssl.SSLSocket, host: str, target: str = "/", headers: dict | None = None,
         close: bool = False) -> Response:
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    conn = "Connection: close\r\n" if close else ""
    s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\n{extra}{conn}\r\n".encode())
    raw = RawConnection.__new__(RawConnection)
    raw.timeout, raw.sock, raw.buf = 5, s, b""
    return raw.read_response("GET")


def get(port: int, pki, who: str | None, host: str, sni: str | None = "", **kw) -> Response:
    """One request on a fresh connection; sni "" means the host."""
    s = connect(port, client_context(pki, who), host if sni == "" else sni)
    try:
        return send(s, host, close=True, **kw)
    finally:
        s.close()


def stack_with(stack, pki, backend, *docs) -> None:
    stack.manifests.write(
        "app.yaml", *service_with_backend("svc-app", backend),
        tls_secret("server-tls", pki.server.cert_pem, pki.server.key_pem),
        ca_secret("client-ca", pki.client_ca.ca_pem), *docs)


def mtls_ingress(name: str, host: str, annotations: dict, tls: bool = True) -> dict:
    ing = ingress(name, [rule(host, path("/", "svc-app"))], annotations=annotations)
    return with_tls(ing, ([host], "server-tls")) if tls else ing


def test_required_certificate(stack, pki):
    b = stack.backend("app")
    port = https_port(stack.dataplane)
    stack_with(stack, pki, b,
               mtls_ingress("mtls", "mtls.example.com",
                            {"tidegate.io/auth-tls-secret": "client-ca",
                             "tidegate.io/auth-tls-pass-certificate-to-upstream": "true",
                             "tidegate.io/server-alias": "alias.example.com"}),
               mtls_ingress("open", "open.example.com", {}))
    wait_until(lambda: get(port, pki, None, "open.example.com").status == 200, 10, "open host")
    wait_until(lambda: get(port, pki, None, "mtls.example.com").status == 400, 10, "mtls host")
    before = b.count

    # No certificate, one from another CA, one whose chain is deeper than the depth (1) allows.
    r = get(port, pki, None, "mtls.example.com")
    assert r.status == 400 and r.text == "No required SSL certificate was sent\n"
    r = get(port, pki, "mallory", "mtls.example.com")
    assert r.status == 400 and r.text == "The SSL certificate error\n"
    r = get(port, pki, "dave", "mtls.example.com")
    assert r.status == 400, r.status
    # The alias is checked as its host is.
    assert get(port, pki, None, "alias.example.com").status == 400
    assert b.count == before, "a refused request reached the backend"

    # A good certificate: the backend hears the verdict, the names and the certificate; what the
    # client claimed itself in those fields is gone.
    r = get(port, pki, "alice", "mtls.example.com",
            headers={"ssl-client-verify": "SUCCESS", "ssl-client-subject-dn": "CN=admin"})
    assert r.status == 200, (r.status, r.body)
    rec = r.json()
    assert header_values(rec, "ssl-client-verify") == ["SUCCESS"]
    assert header_values(rec, "ssl-client-subject-dn") == ["CN=alice"]
    assert header_values(rec, "ssl-client-issuer-dn") == ["CN=Tidegate Test CA"]
    [escaped] = header_values(rec, "ssl-client-cert")
    assert urllib.parse.unquote(escaped).encode() == pki.alice.cert_pem
    assert get(port, pki, "bob", "alias.example.com").status == 200

    # Keep-alive: several requests on one verified connection.
    s = connect(port, client_context(pki, "alice"), "mtls.example.com")
    try:
        for _ in range(3):
            assert send(s, "mtls.example.com").status == 200
        # The same connection asking for another host that needs no certificate: served.
        assert send(s, "open.example.com").status == 200
    finally:
        s.close()

    # A connection made for another name (SNI) cannot be used for the host: 421, whatever the
    # client's certificate (the handshake never asked for one under this host's CA).
    r = get(port, pki, "alice", "mtls.example.com", sni="open.example.com")
    assert r.status == 421, r.status
    r = get(port, pki, "alice", "mtls.example.com", sni=None)
    assert r.status == 421, r.status
    # Plain HTTP: redirected to HTTPS, never served.
    r = request(stack.port, "GET", "/x", "mtls.example.com")
    assert r.status == 308 and r.header("Location") == "https://mtls.example.com/x"
    # The open host needs nothing, and keeps what a client sends in those fields.
    r = get(port, pki, None, "open.example.com", headers={"ssl-client-verify": "mine"})
    assert r.status == 200 and header_values(r.json(), "ssl-client-verify") == ["mine"]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_http2_clients(stack, pki):
    b = stack.backend("app")
    port = https_port(stack.dataplane)
    stack_with(stack, pki, b, mtls_ingress("mtls", "mtls.example.com",
                                           {"tidegate.io/auth-tls-secret": "client-ca"}))
    wait_until(lambda: get(port, pki, None, "mtls.example.com").status == 400, 10, "mtls host")

    def curl(*args: str) -> tuple[str, str]:
        r = subprocess.run(
            ["curl", "-sk", "--http2", "-o", "-", "-w", "\n%{http_version} %{http_code}",
             "--resolve", f"mtls.example.com:{port}:127.0.0.1", *args,
             f"https://mtls.example.com:{port}/h2"], capture_output=True, text=True, timeout=20)
        body, _, status = r.stdout.rpartition("\n")
        return status, body

    status, body = curl("--cert", str(pki.files / "alice.crt"), "--key",
                        str(pki.files / "alice.key"))
    assert status == "2 200", (status, body)
    assert header_values(json.loads(body), "ssl-client-subject-dn") == ["CN=alice"]
    assert curl()[0] == "2 400"
    assert curl("--cert", str(pki.files / "mallory.crt"), "--key",
                str(pki.files / "mallory.key"))[0] == "2 400"


def test_optional_modes_error_page_and_match_cn(stack, pki):
    b = stack.backend("app")
    port = https_port(stack.dataplane)
    stack_with(
        stack, pki, b,
        mtls_ingress("opt", "opt.example.com",
                     {"tidegate.io/auth-tls-secret": "default/client-ca",
                      "tidegate.io/auth-tls-verify-client": "optional"}),
        mtls_ingress("noca", "noca.example.com",
                     {"tidegate.io/auth-tls-secret": "client-ca",
                      "tidegate.io/auth-tls-verify-client": "optional_no_ca"}),
        mtls_ingress("page", "page.example.com",
                     {"tidegate.io/auth-tls-secret": "client-ca",
                      "tidegate.io/auth-tls-verify-depth": "2",
                      "tidegate.io/auth-tls-error-page": "https://login.example.com/cert"}),
        mtls_ingress("cn", "cn.example.com",
                     {"tidegate.io/auth-tls-secret": "client-ca",
                      "tidegate.io/auth-tls-match-cn": "CN=(alice|carol)$"}))
    wait_until(lambda: get(port, pki, None, "cn.example.com").status == 400, 10, "cn host")

    # optional: no certificate goes on (NONE); a certificate must verify.
    r = get(port, pki, None, "opt.example.com")
    assert r.status == 200 and header_values(r.json(), "ssl-client-verify") == ["NONE"]
    assert get(port, pki, "alice", "opt.example.com").status == 200
    assert get(port, pki, "mallory", "opt.example.com").status == 400
    # optional_no_ca: an unknown issuer goes on, and the backend hears why it did not verify.
    r = get(port, pki, "mallory", "noca.example.com")
    assert r.status == 200, r.status
    [verdict] = header_values(r.json(), "ssl-client-verify")
    assert verdict == "FAILED:unable to verify the first certificate", verdict
    assert header_values(r.json(), "ssl-client-subject-dn") == ["CN=mallory"]
    r = get(port, pki, "alice", "noca.example.com")
    assert header_values(r.json(), "ssl-client-verify") == ["SUCCESS"]
    # error page: a failure is a redirect; depth 2 lets two intermediates in.
    r = get(port, pki, None, "page.example.com")
    assert r.status == 302 and r.header("Location") == "https://login.example.com/cert"
    assert get(port, pki, "mallory", "page.example.com").status == 302
    assert get(port, pki, "dave", "page.example.com").status == 200
    assert get(port, pki, "carol", "opt.example.com").status == 200  # one, at the default depth
    # match-cn: a verified certificate of another subject is refused with 403.
    assert get(port, pki, "alice", "cn.example.com").status == 200
    r = get(port, pki, "bob", "cn.example.com")
    assert r.status == 403 and r.text == "client certificate unauthorized\n"


def test_live_changes_fail_closed_and_revocation(stack, pki, tmp_path):
    b = stack.backend("app")
    port = https_port(stack.dataplane)
    # The Secret is missing: the host refuses every request rather than serving unchecked.
    stack.manifests.write(
        "app.yaml", *service_with_backend("svc-app", b),
        tls_secret("server-tls", pki.server.cert_pem, pki.server.key_pem),
        mtls_ingress("mtls", "mtls.example.com", {"tidegate.io/auth-tls-secret": "late-ca"}))
    wait_until(lambda: get(port, pki, "alice", "mtls.example.com").status == 503, 10, "closed")
    assert b.count == 0
    stack.controller.wait_for_log(r"Secret default/late-ca not found", 5)

    # The Secret arrives: served, on the next connection.
    docs = [*service_with_backend("svc-app", b),
            tls_secret("server-tls", pki.server.cert_pem, pki.server.key_pem),
            mtls_ingress("mtls", "mtls.example.com", {"tidegate.io/auth-tls-secret": "late-ca"})]
    stack.manifests.write("app.yaml", *docs, ca_secret("late-ca", pki.client_ca.ca_pem))
    wait_until(lambda: get(port, pki, "alice", "mtls.example.com").status == 200, 10, "opened")
    kept = connect(port, client_context(pki, "alice"), "mtls.example.com")
    assert send(kept, "mtls.example.com").status == 200

    # The CA is replaced: new handshakes need the new CA, and the connection verified under the
    # old one is sent away (421) instead of being trusted further.
    stack.manifests.write("app.yaml", *docs, ca_secret("late-ca", pki.other_ca.ca_pem))
    wait_until(lambda: get(port, pki, "mallory", "mtls.example.com").status == 200, 10, "new CA")
    assert get(port, pki, "alice", "mtls.example.com").status == 400
    assert send(kept, "mtls.example.com").status == 421
    kept.close()

    # A CRL in the Secret: bob is revoked, alice is not.
    folder = pki.client_ca.folder
    (folder / "index.txt").write_text("")
    (folder / "crl.cnf").write_text(
        "[ca]\ndefault_ca=d\n[d]\ndatabase=index.txt\ndefault_md=sha256\ndefault_crl_days=2\n")
    subprocess.run(["openssl", "ca", "-config", "crl.cnf", "-keyfile", "ca.key", "-cert",
                    "ca.crt", "-revoke", "bob.crt"], cwd=folder, check=True, capture_output=True)
    subprocess.run(["openssl", "ca", "-config", "crl.cnf", "-keyfile", "ca.key", "-cert",
                    "ca.crt", "-gencrl", "-out", "ca.crl"], cwd=folder, check=True,
                   capture_output=True)
    crl = (folder / "ca.crl").read_bytes()
    stack.manifests.write("app.yaml", *docs, ca_secret("late-ca", pki.client_ca.ca_pem, crl))
    wait_until(lambda: get(port, pki, "alice", "mtls.example.com").status == 200, 10, "CRL")
    assert get(port, pki, "bob", "mtls.example.com").status == 400

    # A CRL that does not parse: closed again, with the reason reported.
    stack.manifests.write("app.yaml", *docs, ca_secret("late-ca", pki.client_ca.ca_pem, b"junk"))
    wait_until(lambda: get(port, pki, "alice", "mtls.example.com").status == 503, 10, "bad CRL")
    stack.controller.wait_for_log(r"ca.crl holds no PEM CRL", 5)

    # The annotation removed: no certificate needed any more.
    docs[-1] = mtls_ingress("mtls", "mtls.example.com", {})
    stack.manifests.write("app.yaml", *docs)
    wait_until(lambda: get(port, pki, None, "mtls.example.com").status == 200, 10, "open again")


def test_sessions_do_not_resume_across_client_certificate_settings(stack, pki):
    """A TLS session verified under one host's CA must not resume under another's (nor carry a
    host without client certificates into one with them)."""
    b = stack.backend("app")
    port = https_port(stack.dataplane)
    stack.manifests.write(
        "app.yaml", *service_with_backend("svc-app", b),
        tls_secret("server-tls", pki.server.cert_pem, pki.server.key_pem),
        ca_secret("client-ca", pki.client_ca.ca_pem), ca_secret("other-ca", pki.other_ca.ca_pem),
        mtls_ingress("a", "mtls.example.com", {"tidegate.io/auth-tls-secret": "other-ca"}),
        mtls_ingress("b", "b.example.com", {"tidegate.io/auth-tls-secret": "client-ca"}),
        mtls_ingress("open", "open.example.com", {}))
    wait_until(lambda: get(port, pki, None, "b.example.com").status == 400, 10, "b host")
    ctx = client_context(pki, "mallory")  # other-ca's client

    def session_of(sni: str):
        s = connect(port, ctx, sni)
        try:
            assert send(s, sni).status in (200, 400)
            return s.session
        finally:
            s.close()

    # Resumption works within one host (so the test can tell a refused resumption apart).
    sess = session_of("mtls.example.com")
    s = connect(port, ctx, "mtls.example.com", session=sess)
    try:
        assert send(s, "mtls.example.com").status == 200
        assert s.session_reused
    finally:
        s.close()
    # mallory's session from host a (where other-ca verified her) on host b (client-ca): a full
    # handshake, and mallory is refused there.
    s = connect(port, ctx, "b.example.com", session=session_of("mtls.example.com"))
    try:
        assert send(s, "b.example.com").status == 400
        assert not s.session_reused
    finally:
        s.close()
    # A session of the open host on host a: a full handshake that asks for the certificate.
    open_ctx = client_context(pki, None)
    first = connect(port, open_ctx, "open.example.com")
    try:
        assert send(first, "open.example.com").status == 200
        open_session = first.session
    finally:
        first.close()
    s = connect(port, open_ctx, "mtls.example.com", session=open_session)
    try:
        assert send(s, "mtls.example.com").status == 400
        assert not s.session_reused
    finally:
        s.close()


def test_invalid_annotations_are_reported(stack, pki):
    b = stack.backend("app")
    port = https_port(stack.dataplane)
    stack_with(stack, pki, b,
               mtls_ingress("bad", "mtls.example.com",
                            {"tidegate.io/auth-tls-secret": "other-ns/client-ca"}),
               mtls_ingress("mode", "opt.example.com",
                            {"tidegate.io/auth-tls-secret": "client-ca",
                             "tidegate.io/auth-tls-verify-client": "sometimes",
                             "tidegate.io/auth-tls-verify-depth": "99"}),
               mtls_ingress("open", "open.example.com",
                            {"tidegate.io/auth-tls-verify-client": "on"}))
    # Another namespace's Secret: refused, and the host is closed rather than open.
    wait_until(lambda: get(port, pki, "alice", "mtls.example.com").status == 503, 10, "closed")
    stack.controller.wait_for_log(r"auth-tls-secret: invalid value \"other-ns/client-ca\"", 5)
    # A bad mode falls back to "on" (the safe reading), a bad depth to 1: both reported.
    stack.controller.wait_for_log(r"auth-tls-verify-client: invalid value \"sometimes\"", 5)
    stack.controller.wait_for_log(r"auth-tls-verify-depth: invalid value \"99\"", 5)
    assert get(port, pki, None, "opt.example.com").status == 400
    assert get(port, pki, "alice", "opt.example.com").status == 200
    # A refinement without the Secret has no effect, and says so.
    stack.controller.wait_for_log(r"auth-tls-verify-client: has no effect without auth-tls-secret",
                                  5)
    assert get(port, pki, None, "open.example.com").status == 200


def test_a_wildcard_hosts_names_are_checked_as_the_wildcard(stack, pki):
    """Client certificates follow the host a request is routed to: a name the wildcard routes is
    checked even when another Ingress gives it a TLS entry of its own; a host of its own under
    the wildcard is not."""
    b = stack.backend("app")
    port = https_port(stack.dataplane)
    wild = ingress("wild", [rule("*.wild.example.com", path("/", "svc-app"))],
                   annotations={"tidegate.io/auth-tls-secret": "client-ca"})
    with_tls(wild, (["*.wild.example.com"], "server-tls"))
    certs_only = with_tls(ingress("certs", []), (["a.wild.example.com"], "server-tls"))
    own = ingress("own", [rule("own.wild.example.com", path("/", "svc-app"))])
    stack_with(stack, pki, b, wild, certs_only, own)
    wait_until(lambda: get(port, pki, None, "own.wild.example.com").status == 200, 10, "own")
    assert get(port, pki, None, "a.wild.example.com").status == 400
    assert get(port, pki, None, "z.wild.example.com").status == 400
    assert get(port, pki, "alice", "a.wild.example.com").status == 200
