"""TLS to backends (issue 3): tidegate.io/backend-protocol: HTTPS, tidegate.io/proxy-ssl-secret
(the Secret's ca.crt verifies the backend) and tidegate.io/proxy-ssl-name (SNI and the verified
name; default <service>.<namespace>.svc), through real processes against Python TLS backends on
loopback. A verification that cannot be done fails closed (503), a failed one answers 502."""

from __future__ import annotations

import base64
from types import SimpleNamespace

import pytest

from harness import (CertAuthority, RawConnection, TlsBackend, endpoint_slice, ingress, path,
                     rule, service, service_with_backend, wait_until)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    ca = CertAuthority(tmp_path_factory.mktemp("upstream-ca"))
    other = CertAuthority(tmp_path_factory.mktemp("other-ca"))
    leaf = ca.issue("backend", ["backend.internal", "svc-tls.default.svc"], "ec")
    return SimpleNamespace(ca=ca, other=other, leaf=leaf)


def tls_backend(stack, certs, name: str = "tls") -> TlsBackend:
    b = TlsBackend(name, certs.ca.folder / "backend.crt", certs.ca.folder / "backend.key")
    stack.backends.append(b)
    return b


def ca_secret(name: str, ca_pem: bytes) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"ca.crt": base64.b64encode(ca_pem).decode()}}


def https_ingress(name: str, host: str, service_name: str, **annotations: str) -> dict:
    ann = {"tidegate.io/backend-protocol": "HTTPS"}
    ann.update({f"tidegate.io/{k.replace('_', '-')}": v for k, v in annotations.items()})
    return ingress(name, [rule(host, path("/", service_name))], annotations=ann)


def tls_service(name: str, backend: TlsBackend) -> list[dict]:
    return [service(name, port_name="https"),
            endpoint_slice(f"{name}-1", name, [backend.host], backend.port, port_name="https")]


def test_https_backend_without_ca_is_encrypted_with_the_default_server_name(stack, certs):
    b = tls_backend(stack, certs)
    stack.manifests.write("app.yaml", *tls_service("svc-tls", b),
                          https_ingress("app", "tls.example.com", "svc-tls"))
    r = stack.wait_backend("/hello", "tls.example.com", "tls")
    assert r.json()["path"] == "/hello"
    assert b.handshakes >= 1
    assert b.server_names and set(b.server_names) == {"svc-tls.default.svc"}
    assert b.protocol_errors == []


def test_verified_with_the_right_ca_and_name_and_sni_is_sent(stack, certs):
    b = tls_backend(stack, certs)
    stack.manifests.write("app.yaml", *tls_service("svc-tls", b),
                          ca_secret("backend-ca", certs.ca.ca_pem),
                          https_ingress("app", "tls.example.com", "svc-tls",
                                        proxy_ssl_secret="backend-ca",
                                        proxy_ssl_name="backend.internal"))
    stack.wait_backend("/", "tls.example.com", "tls")
    assert set(b.server_names) == {"backend.internal"}
    assert b.handshake_errors == []


def test_wrong_ca_or_wrong_name_answers_502(stack, certs):
    wrong_ca = tls_backend(stack, certs, "wrong-ca")
    wrong_name = tls_backend(stack, certs, "wrong-name")
    stack.manifests.write("app.yaml", *tls_service("svc-a", wrong_ca),
                          *tls_service("svc-b", wrong_name),
                          ca_secret("other-ca", certs.other.ca_pem),
                          ca_secret("right-ca", certs.ca.ca_pem),
                          https_ingress("a", "a.example.com", "svc-a",
                                        proxy_ssl_secret="other-ca",
                                        proxy_ssl_name="backend.internal"),
                          https_ingress("b", "b.example.com", "svc-b",
                                        proxy_ssl_secret="right-ca",
                                        proxy_ssl_name="not-in-the-cert.internal"))
    stack.wait_status("/", "a.example.com", 502)
    stack.wait_status("/", "b.example.com", 502)
    # The handshakes were attempted and refused by the proxy; no request reached the backends.
    assert wrong_ca.count == 0 and wrong_name.count == 0
    wait_until(lambda: wrong_ca.handshake_errors and wrong_name.handshake_errors, 5,
               "the backends to see the aborted handshakes")


def test_missing_ca_secret_fails_closed_with_503(stack, certs):
    b = tls_backend(stack, certs)
    stack.manifests.write("app.yaml", *tls_service("svc-tls", b),
                          https_ingress("app", "tls.example.com", "svc-tls",
                                        proxy_ssl_secret="does-not-exist"))
    stack.wait_status("/", "tls.example.com", 503)
    stack.controller.wait_for_log(r"proxy-ssl-secret: Secret default/does-not-exist not found")
    assert b.count == 0 and b.handshakes == 0
    # Adding the Secret makes the route work, verified.
    stack.manifests.write("ca.yaml", ca_secret("does-not-exist", certs.ca.ca_pem))
    stack.wait_backend("/", "tls.example.com", "tls")


def test_plain_and_https_ingresses_for_one_service_port_do_not_clash(stack, certs):
    tls = tls_backend(stack, certs)
    plain = stack.backend("plain")
    stack.manifests.write("app.yaml", *tls_service("svc-tls", tls),
                          *service_with_backend("svc-plain", plain),
                          https_ingress("secure", "tls.example.com", "svc-tls"),
                          ingress("plain", [rule("plain.example.com", path("/", "svc-plain"))]),
                          # The same Service port over plain HTTP: its own upstream, which fails
                          # (the backend speaks TLS), while the HTTPS one keeps working.
                          ingress("mixed", [rule("mixed.example.com", path("/", "svc-tls"))]))
    stack.wait_backend("/", "tls.example.com", "tls")
    stack.wait_backend("/", "plain.example.com", "plain")
    r = stack.get("/", "mixed.example.com")
    assert r.status == 502
    assert stack.get("/", "tls.example.com").status == 200


def test_keep_alive_reuses_one_tls_connection_to_the_backend(stack_factory, certs):
    stack = stack_factory(workers=1)  # one worker: one upstream pool
    stack.start_dataplane()
    stack.start_controller()
    stack.dataplane.wait_ready()
    b = tls_backend(stack, certs)
    stack.manifests.write("app.yaml", *tls_service("svc-tls", b),
                          https_ingress("app", "tls.example.com", "svc-tls"))
    stack.wait_backend("/", "tls.example.com", "tls")
    before = b.count
    # Separate client connections, one after the other: the upstream connection goes back to
    # the pool after each response and is taken again.
    for i in range(10):
        r = stack.get(f"/n{i}", "tls.example.com")
        assert r.status == 200 and r.json()["path"] == f"/n{i}"
    # And several requests on one client keep-alive connection.
    with RawConnection(stack.port) as c:
        for i in range(10):
            c.send(f"GET /k{i} HTTP/1.1\r\nHost: tls.example.com\r\n\r\n".encode())
            assert c.read_response().status == 200
    assert b.count == before + 20
    assert b.handshakes == 1, f"{b.handshakes} TLS handshakes for {b.count} requests"
    assert b.connections_accepted == 1
