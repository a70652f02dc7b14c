"""The Secrets annotations name, through the Kubernetes API source: the controller keeps only
the Secrets an Ingress names, so those of auth-secret (basic authentication's users) and
auth-tls-secret (the client certificates' CA) must be kept and fetched too (they were dropped
before: basic authentication worked from a folder of manifests, not from a cluster). Until they
exist the hosts and routes fail closed; once they do, the checks they carry apply."""

from __future__ import annotations

import base64
import socket
import ssl

import harness
from harness import CertAuthority, RawConnection, https_port, tls_secret
from kubeapps import backends, kube_ingress, kube_service, kube_slice, start

APR1 = "$apr1$saltsalt$HIDXe7D36X22w1CH4M1cQ."  # "open sesame", openssl passwd -apr1


def opaque_secret(name: str, namespace: str, data: dict[str, bytes]) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}


def https_get(port: int, host: str, cert=None) -> int:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert is not None:
        ctx.load_cert_chain(*cert)
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5),
                        server_hostname=host)
    try:
        s.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        raw = RawConnection.__new__(RawConnection)
        raw.timeout, raw.sock, raw.buf = 5, s, b""
        return raw.read_response("GET").status
    finally:
        s.close()


def test_auth_secrets_are_fetched_and_fail_closed_until_they_exist(cluster, namespace,
                                                                  kube_stack_factory, tmp_path):
    server_ca = CertAuthority(tmp_path / "server")
    client_ca = CertAuthority(tmp_path / "client")
    server = server_ca.issue("server", ["mtls.example", "basic.example"])
    alice = client_ca.issue("alice", ["alice"])
    alice_files = (str(client_ca.folder / "alice.crt"), str(client_ca.folder / "alice.key"))
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace]))
    s.controller.wait_for_log(r"initial lists complete", timeout=15)
    s.dataplane.wait_ready()
    port = https_port(s.dataplane)
    [b] = backends(s, "app")
    mtls = kube_ingress("mtls", namespace, "mtls.example", "svc",
                        annotations={"tidegate.io/auth-tls-secret": "client-ca"})
    mtls["spec"]["tls"] = [{"hosts": ["mtls.example"], "secretName": "site-tls"}]
    basic = kube_ingress("basic", namespace, "basic.example", "svc",
                         annotations={"tidegate.io/auth-type": "basic",
                                      "tidegate.io/auth-secret": "users"})
    site = tls_secret("site-tls", server.cert_pem, server.key_pem, namespace=namespace)
    cluster.apply(kube_service("svc", namespace), kube_slice("svc-1", "svc", namespace, [b]),
                  site, mtls, basic)
    # Neither Secret exists: both fail closed (503), nothing reaches the backend.
    harness.wait_until(lambda: https_get(port, "mtls.example", alice_files) == 503, 15,
                       "the mTLS host to fail closed")
    s.wait_status("/", "basic.example", 503)
    assert b.count == 0

    # The Secrets appear: the controller fetches them (they are named by the annotations).
    cluster.apply(opaque_secret("client-ca", namespace, {"ca.crt": client_ca.ca_pem}),
                  opaque_secret("users", namespace, {"auth": f"alice:{APR1}\n".encode()}))
    harness.wait_until(lambda: https_get(port, "mtls.example", alice_files) == 200, 15,
                       "the mTLS host to take alice")
    assert https_get(port, "mtls.example") == 400
    s.wait_status("/", "basic.example", 401)
    r = s.get("/", "basic.example",
              headers={"Authorization": "Basic " + base64.b64encode(b"alice:open sesame").decode()})
    assert r.status == 200
