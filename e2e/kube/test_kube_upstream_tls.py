"""TLS to backends through the Kubernetes API source: the Secret named by
tidegate.io/proxy-ssl-secret is kept (and fetched) by the controller although it is no spec.tls
Secret; until it exists the route fails closed (503), with it the backend is verified, and a
wrong CA in it turns the route into 502."""

from __future__ import annotations

import base64

import harness
from harness import CertAuthority, TlsBackend
from kubeapps import backend_address, kube_ingress, kube_service, start


def ca_secret(name: str, namespace: str, ca_pem: bytes) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"ca.crt": base64.b64encode(ca_pem).decode()}}


def test_proxy_ssl_secret_is_watched_and_verification_fails_closed(cluster, namespace,
                                                                   kube_stack_factory, tmp_path):
    ca = CertAuthority(tmp_path / "ca")
    other = CertAuthority(tmp_path / "other")
    ca.issue("backend", ["backend.internal"], "ec")
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace]))
    s.controller.wait_for_log(r"initial lists complete", timeout=15)
    s.dataplane.wait_ready()

    host = backend_address()
    b = TlsBackend("tls", ca.folder / "backend.crt", ca.folder / "backend.key", host,
                   harness.free_port(host))
    s.backends.append(b)
    ing = kube_ingress("app", namespace, "tls.example", "svc", annotations={
        "tidegate.io/backend-protocol": "HTTPS",
        "tidegate.io/proxy-ssl-secret": "backend-ca",
        "tidegate.io/proxy-ssl-name": "backend.internal"})
    cluster.apply(kube_service("svc", namespace),
                  harness.endpoint_slice("svc-1", "svc", [b.host], b.port, namespace=namespace),
                  ing)
    # No Secret yet: the HTTPS upstream has no endpoints rather than an unverified connection.
    s.wait_status("/", "tls.example", 503)
    s.controller.wait_for_log(rf"Secret {namespace}/backend-ca not found")
    assert b.count == 0 and b.handshakes == 0

    # The Secret appears: the controller keeps it (it is named by the annotation) and the route
    # works, verified against its ca.crt, with the configured SNI.
    cluster.apply(ca_secret("backend-ca", namespace, ca.ca_pem))
    s.wait_backend("/", "tls.example", "tls")
    assert set(b.server_names) == {"backend.internal"}

    # The Secret changes to another CA: the backend no longer verifies.
    cluster.apply(ca_secret("backend-ca", namespace, other.ca_pem))
    s.wait_status("/", "tls.example", 502)
