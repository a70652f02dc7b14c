"""HTTPS termination: certificate selection by SNI, TLS versions and ALPN, ssl-redirect,
certificate rotation without a failed handshake, bad and expired certificates, and the data
plane's own certificate checks on the control socket (issue 3).

Certificates are made once per module with the openssl CLI (a CA, ECDSA P-256 and RSA-2048
leaves, an expired one); the clients do not verify them but compare the DER the server sent."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from types import SimpleNamespace

import pytest

from harness import (CertAuthority, ControlClient, free_port, header_values, https_port,
                     ingress, path, report, request, rule, service_with_backend, tls_connect,
                     tls_request, tls_secret, wait_until, with_tls)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    ca = CertAuthority(tmp_path_factory.mktemp("certs"))
    c = SimpleNamespace(ca=ca)
    c.exact = ca.issue("exact", ["exact.foo.com"], "ec")
    c.wild = ca.issue("wild", ["*.foo.com"], "rsa")
    c.good = ca.issue("good", ["good.example.com"], "ec")
    c.mm = ca.issue("mm", ["mm.example.com"], "ec")
    c.rot1 = ca.issue("rot1", ["rot.example.com"], "ec")
    c.rot2 = ca.issue("rot2", ["rot.example.com"], "rsa")
    c.default = ca.issue("default", ["default.invalid"], "ec")
    c.expired = ca.issue("expired", ["exp.example.com"], "ec", days=0)
    time.sleep(1.1)  # notAfter == issue time: make sure it is in the past
    return c


def is_default_cert(der: bytes) -> bool:
    """The data plane's self-signed default certificate (CN=tidegate-default)."""
    return b"tidegate-default" in der


def which(certs, der: bytes) -> str:
    for name, c in vars(certs).items():
        if name != "ca" and c.der == der:
            return name
    return "default" if is_default_cert(der) else "unknown"


def wait_cert(port: int, name: str, want: str, certs, timeout: float = 10.0) -> None:
    def ok():
        _, der = tls_request(port, name)
        return which(certs, der) == want
    wait_until(ok, timeout, f"{name} to be served certificate {want}", interval=0.05)


def app_stack(stack, certs):
    """exact.foo.com (ECDSA), *.foo.com (RSA wildcard), a.b.foo.com and plain.example.com (no
    TLS), all routed to one backend."""
    b = stack.backend("app")
    ing = with_tls(ingress("app", [rule("exact.foo.com", path("/", "svc-app")),
                                   rule("*.foo.com", path("/", "svc-app")),
                                   rule("a.b.foo.com", path("/", "svc-app")),
                                   rule("plain.example.com", path("/", "svc-app"))]),
                   (["exact.foo.com"], "exact-tls"), (["*.foo.com"], "wild-tls"))
    stack.manifests.write("app.yaml", *service_with_backend("svc-app", b),
                          tls_secret("exact-tls", certs.exact.cert_pem, certs.exact.key_pem),
                          tls_secret("wild-tls", certs.wild.cert_pem, certs.wild.key_pem), ing)
    port = https_port(stack.dataplane)
    wait_cert(port, "exact.foo.com", "exact", certs)
    wait_cert(port, "a.foo.com", "wild", certs)
    return b, port


def test_sni_selects_exact_wildcard_and_default_certificates(stack, certs):
    _, port = app_stack(stack, certs)
    cases = {
        "exact.foo.com": "exact",
        "a.foo.com": "wild",            # one label under the wildcard
        "zz-9.foo.com": "wild",
        "a.b.foo.com": "default",       # two labels: the wildcard does not match
        "foo.com": "default",           # the wildcard's own suffix does not match either
        "unknown.example.com": "default",
        "exact.foo.com.": "exact",      # a trailing dot names the same host
        "EXACT.Foo.COM": "exact",       # names are case-insensitive
        "A.FOO.COM": "wild",
    }
    got = {}
    for name, _ in cases.items():
        s = tls_connect(port, name)
        try:
            got[name] = which(certs, s.getpeercert(binary_form=True))
        finally:
            s.close()
    s = tls_connect(port, None)  # no SNI at all
    try:
        got[None] = which(certs, s.getpeercert(binary_form=True))
    finally:
        s.close()
    assert got == {**cases, None: "default"}


def test_https_routes_and_backend_sees_forwarded_proto_https(stack, certs):
    b, port = app_stack(stack, certs)
    for name in ("exact.foo.com", "a.foo.com", "a.b.foo.com"):
        r, _ = tls_request(port, name, target=f"/x?from={name}")
        assert r.status == 200, (name, r.status, r.body[:200])
        rec = r.json()
        assert rec["path"] == f"/x?from={name}"
        assert header_values(rec, "X-Forwarded-Proto") == ["https"], rec["headers"]
        assert header_values(rec, "Host") == [name]
    # Several requests on one TLS connection (keep-alive over TLS), this time with a verifying
    # client: the chain from the CA and the name in the certificate.
    import http.client
    ctx = ssl.create_default_context(cafile=str(certs.ca.ca_file))
    conn = http.client.HTTPSConnection("exact.foo.com", port, context=ctx, timeout=5)
    conn._create_connection = lambda *a, **k: socket.create_connection(("127.0.0.1", port), 5)
    try:
        ports = set()
        for i in range(3):
            conn.request("GET", f"/keepalive/{i}")
            r = conn.getresponse()
            body = json.loads(r.read())
            assert r.status == 200 and body["path"] == f"/keepalive/{i}"
            ports.add(conn.sock.getsockname()[1])
        assert len(ports) == 1  # one client connection
        assert conn.sock.version() in ("TLSv1.2", "TLSv1.3")
    finally:
        conn.close()
    # Plain HTTP on a host without TLS says http.
    r = request(stack.port, "GET", "/p", "plain.example.com")
    assert r.status == 200 and header_values(r.json(), "X-Forwarded-Proto") == ["http"]


def _legacy_server_accepts(version) -> bool:
    """Control: this client really offers `version` (a local Python server that allows it)."""
    import tempfile
    from pathlib import Path
    ca = CertAuthority(Path(tempfile.mkdtemp(prefix="tg-legacy-")))
    leaf = ca.issue("legacy", ["legacy.test"], "rsa")
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    sctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    (ca.folder / "both.pem").write_bytes(leaf.cert_pem + leaf.key_pem)
    sctx.load_cert_chain(ca.folder / "both.pem")
    lsock = socket.create_server(("127.0.0.1", 0))
    result = {}

    def serve():
        c, _ = lsock.accept()
        try:
            with sctx.wrap_socket(c, server_side=True) as s:
                result["version"] = s.version()
        except Exception as e:  # noqa: BLE001
            result["error"] = repr(e)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        s = tls_connect(lsock.getsockname()[1], "legacy.test", min_version=version,
                        max_version=version, ciphers="DEFAULT:@SECLEVEL=0")
        s.close()
    except ssl.SSLError:
        return False
    finally:
        t.join(5)
        lsock.close()
    return True


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
def test_tls_versions_1_0_and_1_1_refused_1_2_and_1_3_accepted(stack, certs):
    _, port = app_stack(stack, certs)
    for version in (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1):
        with pytest.raises(ssl.SSLError) as e:
            s = tls_connect(port, "exact.foo.com", min_version=version, max_version=version,
                            ciphers="DEFAULT:@SECLEVEL=0")
            s.close()
        # The server refused (an alert), not our own client configuration.
        assert "PROTOCOL_VERSION" in str(e.value).upper() or "UNSUPPORTED" in str(e.value).upper(), e.value
    # Control: the same client completes TLS 1.0 with a permissive server, so the refusal above
    # was the data plane's.
    assert _legacy_server_accepts(ssl.TLSVersion.TLSv1)
    # Plain HTTP on the HTTPS port: refused (an alert or a close), and the port keeps working.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        raw.sendall(b"GET / HTTP/1.1\r\nHost: exact.foo.com\r\n\r\n")
        data = b""
        try:
            while chunk := raw.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
        assert data == b"" or data[0] == 0x15, data[:100]  # 0x15: a TLS alert record
    for version, text in ((ssl.TLSVersion.TLSv1_2, "TLSv1.2"), (ssl.TLSVersion.TLSv1_3, "TLSv1.3")):
        s = tls_connect(port, "exact.foo.com", min_version=version, max_version=version)
        try:
            assert s.version() == text
            s.sendall(b"GET /v HTTP/1.1\r\nHost: exact.foo.com\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
            assert data.startswith(b"HTTP/1.1 200"), data[:200]
        finally:
            s.close()


def test_session_resumption_with_tickets(stack, certs):
    _, port = app_stack(stack, certs)
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        for name in ("exact.foo.com", "a.foo.com", None):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            ctx.minimum_version = ctx.maximum_version = version
            sessions = []
            for i in range(2):
                raw = socket.create_connection(("127.0.0.1", port), timeout=5)
                with ctx.wrap_socket(raw, server_hostname=name,
                                     session=sessions[-1] if sessions else None) as s:
                    s.sendall(b"GET / HTTP/1.1\r\nHost: exact.foo.com\r\n"
                              b"Connection: close\r\n\r\n")
                    while s.recv(65536):  # reading lets a TLS 1.3 client take its ticket
                        pass
                    if i == 1:
                        assert s.session_reused, (version, name)
                    sessions.append(s.session)


def test_certificate_chain_is_sent(stack, certs, tmp_path):
    """tls.crt holding leaf + intermediate: a client trusting only the root verifies it."""
    sub = certs.ca.sub_ca(tmp_path / "sub")
    leaf = sub.issue("chained", ["chain.example.com"], "ec")
    b = stack.backend("app")
    stack.manifests.write("chain.yaml", *service_with_backend("svc-app", b),
                          tls_secret("chain-tls", leaf.cert_pem + sub.ca_pem, leaf.key_pem),
                          with_tls(ingress("chain", [rule("chain.example.com",
                                                          path("/", "svc-app"))]),
                                   (["chain.example.com"], "chain-tls")))
    port = https_port(stack.dataplane)
    wait_cert(port, "chain.example.com", "chained", SimpleNamespace(ca=None, chained=leaf))
    ctx = ssl.create_default_context(cafile=str(certs.ca.ca_file))
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    with ctx.wrap_socket(raw, server_hostname="chain.example.com") as s:  # verifies chain + name
        s.sendall(b"GET /c HTTP/1.1\r\nHost: chain.example.com\r\nConnection: close\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200")


def test_alpn_prefers_h2_then_http11(stack, certs):
    _, port = app_stack(stack, certs)
    for offered, chosen in ((["h2", "http/1.1"], "h2"), (["http/1.1", "h2"], "h2"),
                            (["http/1.1"], "http/1.1"), (["h2"], "h2")):
        s = tls_connect(port, "exact.foo.com", alpn=offered)
        try:
            assert s.selected_alpn_protocol() == chosen, offered
        finally:
            s.close()
    # A client offering only protocols we do not speak still gets a connection (no ALPN).
    s = tls_connect(port, "a.foo.com", alpn=["spdy/3"])
    try:
        assert s.selected_alpn_protocol() is None
        assert s.version() == "TLSv1.3"
    finally:
        s.close()


def test_alpn_without_http2(stack_factory, certs):
    s = stack_factory(dataplane_args=["--http2", "off"])
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    _, port = app_stack(s, certs)
    c = tls_connect(port, "exact.foo.com", alpn=["h2", "http/1.1"])
    try:
        assert c.selected_alpn_protocol() == "http/1.1"
    finally:
        c.close()
    c = tls_connect(port, "exact.foo.com", alpn=["h2"])
    try:
        assert c.selected_alpn_protocol() is None
    finally:
        c.close()


def test_plain_http_to_tls_host_gets_308_unless_disabled(stack, certs):
    b, port = app_stack(stack, certs)
    nr = with_tls(ingress("noredirect", [rule("nr.example.com", path("/", "svc-app"))],
                          annotations={"tidegate.io/ssl-redirect": "false"}),
                  (["nr.example.com"], "good-tls"))
    stack.manifests.write("nr.yaml", tls_secret("good-tls", certs.good.cert_pem,
                                                certs.good.key_pem), nr)
    wait_cert(port, "nr.example.com", "good", certs)
    before = b.count
    r = request(stack.port, "GET", "/some/path?q=1&x=%20", "exact.foo.com:8080")
    assert r.status == 308, (r.status, r.body)
    assert r.header("Location") == "https://exact.foo.com/some/path?q=1&x=%20"
    r = request(stack.port, "POST", "/form", "a.foo.com", body=b"data=1")
    assert r.status == 308 and r.header("Location") == "https://a.foo.com/form"
    assert b.count == before  # redirected requests never reach the backend
    # No TLS for the host: served over plain HTTP.
    r = request(stack.port, "GET", "/", "a.b.foo.com")
    assert r.status == 200 and r.header("X-Backend") == "app"
    # tidegate.io/ssl-redirect: "false": plain HTTP is proxied, and HTTPS works too.
    r = request(stack.port, "GET", "/plain", "nr.example.com")
    assert r.status == 200 and r.json()["path"] == "/plain"
    r, der = tls_request(port, "nr.example.com", target="/tls")
    assert r.status == 200 and which(certs, der) == "good"


def test_hsts_on_https_responses_only(stack, certs):
    """tidegate.io/hsts: Strict-Transport-Security on the route's HTTPS responses, replacing
    the backend's; never over plain HTTP, never on routes without it."""
    b = stack.backend("app")
    hsts = certs.ca.issue("hsts", ["hsts.example.com", "nohsts.example.com"], "ec")
    on = with_tls(ingress("hsts", [rule("hsts.example.com", path("/", "svc-app"))],
                          annotations={"tidegate.io/hsts": "true",
                                       "tidegate.io/hsts-max-age": "600",
                                       "tidegate.io/ssl-redirect": "false"}),
                  (["hsts.example.com"], "hsts-tls"))
    off = with_tls(ingress("nohsts", [rule("nohsts.example.com", path("/", "svc-app"))],
                           annotations={"tidegate.io/ssl-redirect": "false"}),
                   (["nohsts.example.com"], "hsts-tls"))
    stack.manifests.write("hsts.yaml", *service_with_backend("svc-app", b),
                          tls_secret("hsts-tls", hsts.cert_pem, hsts.key_pem), on, off)
    port = https_port(stack.dataplane)
    wait_cert(port, "hsts.example.com", "hsts", SimpleNamespace(ca=None, hsts=hsts))
    r, _ = tls_request(port, "hsts.example.com")
    assert r.status == 200
    assert r.header("Strict-Transport-Security") == "max-age=600; includeSubDomains"
    # The backend's own value is replaced, not doubled.
    r, _ = tls_request(port, "hsts.example.com", target="/?respond=hsts")
    assert r.status == 200
    assert [v for k, v in r.headers if k.lower() == "strict-transport-security"] == [
        "max-age=600; includeSubDomains"]
    # Plain HTTP: never (RFC 6797 section 7.2).
    r = request(stack.port, "GET", "/", "hsts.example.com")
    assert r.status == 200 and r.header("Strict-Transport-Security") is None
    # A route without the annotation: the backend's header passes, none is added.
    r, _ = tls_request(port, "nohsts.example.com")
    assert r.status == 200 and r.header("Strict-Transport-Security") is None
    r, _ = tls_request(port, "nohsts.example.com", target="/?respond=hsts")
    assert r.header("Strict-Transport-Security") == "max-age=5"


def test_ssl_redirect_keeps_the_path_of_an_absolute_form_request(stack, certs):
    """RFC 9112 section 3.2.2: a server MUST accept the absolute-form. The data plane routes on
    it (the host comes from the URI); the redirect must keep its path and query too."""
    b, _ = app_stack(stack, certs)
    # Routing on the absolute-form works (a host without TLS: proxied).
    r = request(stack.port, "GET", "http://a.b.foo.com/abs/path?x=1", "a.b.foo.com")
    assert r.status == 200 and r.json()["path"] in ("/abs/path?x=1",
                                                    "http://a.b.foo.com/abs/path?x=1")
    r = request(stack.port, "GET", "http://exact.foo.com/some/path?q=1", "exact.foo.com")
    assert r.status == 308
    assert r.header("Location") == "https://exact.foo.com/some/path?q=1"


def test_certificate_rotation_without_failed_handshakes(stack, certs):
    b = stack.backend("rot", record=False)
    ing = with_tls(ingress("rot", [rule("rot.example.com", path("/", "svc-rot"))]),
                   (["rot.example.com"], "rot-tls"))
    stack.manifests.write("rot.yaml", *service_with_backend("svc-rot", b), ing)
    stack.manifests.write("secret.yaml", tls_secret("rot-tls", certs.rot1.cert_pem,
                                                    certs.rot1.key_pem))
    port = https_port(stack.dataplane)
    wait_cert(port, "rot.example.com", "rot1", certs)

    results: list[tuple[float, float, str, int]] = []
    failures: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()

    def client():
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                r, der = tls_request(port, "rot.example.com", target="/?respond=name")
                with lock:
                    results.append((t0, time.monotonic(), which(certs, der), r.status))
            except Exception as e:  # noqa: BLE001
                with lock:
                    failures.append(f"{time.monotonic() - start:.3f}s: {e!r}")

    start = time.monotonic()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    t_write = time.monotonic()
    stack.manifests.write("secret.yaml", tls_secret("rot-tls", certs.rot2.cert_pem,
                                                    certs.rot2.key_pem))

    def first_new():
        with lock:
            return min((r[0] for r in results if r[2] == "rot2"), default=None)
    try:
        t_new = wait_until(first_new, 5.0, "a handshake with the new certificate")
        time.sleep(1.5)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    with lock:
        res = list(results)
    kinds = {k for _, _, k, _ in res}
    old_late = [r for r in res if r[2] == "rot1" and r[0] > t_new + 0.5]
    report(f"certificate rotation: {len(res)} handshakes in {time.monotonic() - start:.1f} s, "
           f"{len(failures)} failed; new certificate seen {t_new - t_write:.2f} s after the "
           f"Secret changed")
    assert failures == []
    assert all(s == 200 for _, _, _, s in res)
    assert kinds <= {"rot1", "rot2"}, kinds  # never the default certificate in between
    assert len([r for r in res if r[0] > t_new]) >= 20
    assert t_new - t_write < 3.0
    assert old_late == [], f"{len(old_late)} handshakes got the old certificate after the new one"


def test_bad_pem_and_mismatched_key_fall_back_to_default(stack, certs):
    b = stack.backend("app")
    good = with_tls(ingress("good", [rule("good.example.com", path("/", "svc-app"))]),
                    (["good.example.com"], "good-tls"))
    mm = with_tls(ingress("mismatch", [rule("mm.example.com", path("/", "svc-app"))]),
                  (["mm.example.com"], "mm-tls"))
    bad = with_tls(ingress("bad-pem", [rule("bad.example.com", path("/", "svc-app"))]),
                   (["bad.example.com"], "bad-pem-tls"))
    garbage = (b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n"
               b"-----END CERTIFICATE-----\n")
    since = stack.controller.log_size()
    stack.manifests.write("app.yaml", *service_with_backend("svc-app", b), good, mm, bad,
                          tls_secret("good-tls", certs.good.cert_pem, certs.good.key_pem),
                          tls_secret("bad-pem-tls", garbage, certs.good.key_pem))
    stack.manifests.write("mm.yaml", tls_secret("mm-tls", certs.mm.cert_pem, certs.mm.key_pem))
    port = https_port(stack.dataplane)
    wait_cert(port, "good.example.com", "good", certs)
    wait_cert(port, "mm.example.com", "mm", certs)
    line = stack.controller.wait_for_log(r".*Ingress default/bad-pem.*", since=since).group(0)
    assert "Secret default/bad-pem-tls" in line, line
    r, der = tls_request(port, "bad.example.com")
    assert is_default_cert(der) and r.status == 200  # routed all the same, default certificate

    # Replace mm's key with one that does not match its certificate.
    since = stack.controller.log_size()
    stack.manifests.write("mm.yaml", tls_secret("mm-tls", certs.mm.cert_pem, certs.good.key_pem))
    line = stack.controller.wait_for_log(r".*Ingress default/mismatch.*", since=since).group(0)
    assert "Secret default/mm-tls" in line and "does not match" in line, line
    wait_cert(port, "mm.example.com", "default", certs)
    # The other TLS host is unaffected.
    r, der = tls_request(port, "good.example.com")
    assert which(certs, der) == "good" and r.status == 200
    log = stack.controller.log()
    assert "PRIVATE KEY" not in log and "BEGIN CERTIFICATE" not in log  # never key material


def test_expired_certificate_is_served_and_logged(stack, certs):
    b = stack.backend("app")
    ing = with_tls(ingress("exp", [rule("exp.example.com", path("/", "svc-app"))]),
                   (["exp.example.com"], "exp-tls"))
    stack.manifests.write("exp.yaml", *service_with_backend("svc-app", b), ing,
                          tls_secret("exp-tls", certs.expired.cert_pem, certs.expired.key_pem))
    port = https_port(stack.dataplane)
    wait_cert(port, "exp.example.com", "expired", certs)
    line = stack.dataplane.wait_for_log(r".*default/exp-tls.*expired.*").group(0)
    assert "serving it anyway" in line, line
    r, _ = tls_request(port, "exp.example.com", target="/e")
    assert r.status == 200


def _config(certs, backend, cert) -> dict:
    up = "default/svc:80"
    return {"virtual_hosts": [{"host": "direct.example.com",
                               "routes": [{"path": "/", "match": "Prefix", "upstream": up,
                                           "ingress": "default/direct"}]}],
            "upstreams": [{"name": up, "endpoints": [{"address": backend.host,
                                                      "port": backend.port}]}],
            "certificates": [{"name": "default/direct-tls", "cert_pem": cert[0],
                              "key_pem": cert[1]}],
            "tls_hosts": [{"host": "direct.example.com", "certificate": "default/direct-tls"}]}


def test_control_socket_bad_certificate_is_nacked_and_previous_config_serves(stack_factory,
                                                                            certs, tmp_path):
    s = stack_factory()
    # A default certificate from the flags this time.
    (tmp_path / "d.crt").write_bytes(certs.default.cert_pem)
    (tmp_path / "d.key").write_bytes(certs.default.key_pem)
    s.dataplane.argv += ["--default-ssl-certificate", str(tmp_path / "d.crt"),
                         "--default-ssl-key", str(tmp_path / "d.key")]
    s.start_dataplane()
    b = s.backend("direct")
    port = https_port(s.dataplane)
    cc = ControlClient(s.dataplane.socket_path)
    try:
        assert cc.hello() == {"type": "hello_reply", "protocol": 1, "version": 0}
        good = (certs.good.cert_pem.decode(), certs.good.key_pem.decode())
        assert cc.snapshot(10, _config(certs, b, good)) == {"type": "ack", "version": 10}
        r, der = tls_request(port, "direct.example.com")
        assert r.status == 200 and which(certs, der) == "good"
        _, der = tls_request(port, None)
        assert which(certs, der) == "default"  # --default-ssl-certificate, no SNI

        bad_pem = ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", good[1])
        ans = cc.snapshot(11, _config(certs, b, bad_pem))
        assert ans["type"] == "nack" and ans["version"] == 11, ans
        assert "default/direct-tls" in ans["reason"] and "parse" in ans["reason"], ans
        assert "BEGIN" not in ans["reason"]

        mismatched = {"upsert_certificates": [{"name": "default/direct-tls",
                                               "cert_pem": certs.mm.cert_pem.decode(),
                                               "key_pem": good[1]}]}
        ans = cc.delta(12, 10, mismatched)
        assert ans["type"] == "nack" and ans["version"] == 12, ans
        assert "does not match" in ans["reason"], ans

        no_key = {"upsert_certificates": [{"name": "default/other", "cert_pem": good[0],
                                           "key_pem": "not a key"}],
                  "upsert_tls_hosts": [{"host": "other.example.com",
                                        "certificate": "default/other"}]}
        ans = cc.delta(13, 10, no_key)
        assert ans["type"] == "nack" and "private key" in ans["reason"], ans

        # Still serving version 10: its certificate, its route.
        assert s.dataplane.version() == 10
        r, der = tls_request(port, "direct.example.com", target="/after")
        assert r.status == 200 and which(certs, der) == "good" and r.json()["path"] == "/after"
        s.dataplane.wait_for_log(r"NACK version 12: .*does not match")

        # An expired certificate is accepted (logged), against the unchanged base.
        expired = {"upsert_certificates": [{"name": "default/old",
                                            "cert_pem": certs.expired.cert_pem.decode(),
                                            "key_pem": certs.expired.key_pem.decode()}],
                   "upsert_tls_hosts": [{"host": "old.example.com",
                                         "certificate": "default/old"}]}
        assert cc.delta(14, 10, expired) == {"type": "ack", "version": 14}
        s.dataplane.wait_for_log(r"certificate default/old is expired")
        _, der = tls_request(port, "old.example.com")
        assert which(certs, der) == "expired"
        _, der = tls_request(port, "direct.example.com")
        assert which(certs, der) == "good"
    finally:
        cc.close()
