"""One address per Gateway on loopback (docs/gateway-api.md, "One address per Gateway"): with
--gateway-listener-ports each Gateway port becomes a data plane listener of its own, opened and
closed as Gateways come and go (never a restart), routed with that Gateway's routes only, with
its own certificates by SNI. Real controller, data plane, backends and clients."""

from __future__ import annotations

import ssl

import pytest

from harness import (CertAuthority, RawConnection, endpoint_slice, free_port_range, wait_until,
                     request, service, tls_request, tls_secret)

GATEWAY_CLASS = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "GatewayClass",
    "metadata": {"name": "tidegate"},
    "spec": {"controllerName": "tidegate.io/gateway-controller"},
}


def gateway(name: str, listeners: list[dict]) -> dict:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"gatewayClassName": "tidegate", "listeners": listeners}}


def http_route(name: str, gw: str, svc: str, hostnames: list[str] | None = None) -> dict:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"parentRefs": [{"name": gw}], "hostnames": hostnames or [],
                     "rules": [{"backendRefs": [{"name": svc, "port": 80}]}]}}


def backend_at(port: int, host: str = "example.com") -> str | int:
    try:
        r = request(port, "GET", "/", host, timeout=3.0)
    except OSError:
        return "refused"
    return r.header("X-Backend") if r.status == 200 else r.status


@pytest.fixture
def gateways(stack_factory):
    first, last = free_port_range(3)
    s = stack_factory(controller_args=["--gateway-listener-ports", f"{first}-{last}"])
    s.ports = list(range(first, last + 1))
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    b = {n: s.backend(n) for n in ("a", "b", "c")}
    s.manifests.write("services.yaml", *[service(f"svc-{n}") for n in b])
    s.manifests.write(
        "slices.yaml",
        *[endpoint_slice(f"svc-{n}-1", f"svc-{n}", [x.host], x.port) for n, x in b.items()])
    return s


def serving(s, want: dict[str, str]) -> dict[str, int]:
    """Waits until each backend in `want` (backend -> host) answers on one of the range's ports;
    returns backend -> port."""
    found: dict[str, int] = {}

    def probe():
        found.clear()
        for p in s.ports:
            for name, host in want.items():
                if backend_at(p, host) == name:
                    found[name] = p
        return len(found) == len(want)

    wait_until(probe, timeout=15.0, interval=0.2, what=f"listeners serving {want}")
    return dict(found)


def test_each_gateway_has_its_own_listener_and_routes(gateways):
    s = gateways
    # Two Gateways on the same port 80, routes without hostnames: only separate listeners can
    # send the same request to different backends (the conformance suite's
    # HTTPRouteMultipleGateways). The Gateways come first: their listeners open (404: no route
    # yet) before any route names them, as when a Gateway is created before its routes.
    s.manifests.write("gateways.yaml", GATEWAY_CLASS,
                      gateway("gw-a", [{"name": "http", "port": 80, "protocol": "HTTP"}]),
                      gateway("gw-b", [{"name": "http", "port": 80, "protocol": "HTTP"}]))
    wait_until(lambda: [backend_at(p) for p in s.ports].count(404) == 2, timeout=15.0,
               interval=0.2, what="two empty listeners")
    s.manifests.write("gateways.yaml", GATEWAY_CLASS,
                      gateway("gw-a", [{"name": "http", "port": 80, "protocol": "HTTP"}]),
                      gateway("gw-b", [{"name": "http", "port": 80, "protocol": "HTTP"}]),
                      http_route("ra", "gw-a", "svc-a"), http_route("rb", "gw-b", "svc-b"))
    at = serving(s, {"a": "example.com", "b": "example.com"})
    assert at["a"] != at["b"]
    # Any host, the same backend: each listener takes only its own Gateway's routes.
    assert backend_at(at["a"], "other.test") == "a"
    assert backend_at(at["b"], "other.test") == "b"
    # The shared port has no Gateway routes (no Ingress here either).
    assert s.get("/", "example.com").status == 404
    # The third port of the range is not opened.
    (unused,) = set(s.ports) - set(at.values())
    assert backend_at(unused) == "refused"

    # A connection kept open on gw-b's listener, then gw-b goes away: its listener closes at
    # once, gw-a's keeps serving, and the open connection is not cut (it answers 404: its
    # listener has no routes any more).
    kept = RawConnection(at["b"])
    kept.send(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
    assert kept.read_response().header("X-Backend") == "b"
    s.manifests.write("gateways.yaml", GATEWAY_CLASS,
                      gateway("gw-a", [{"name": "http", "port": 80, "protocol": "HTTP"}]),
                      http_route("ra", "gw-a", "svc-a"), http_route("rb", "gw-b", "svc-b"))
    wait_until(lambda: backend_at(at["b"]) == "refused", timeout=15.0,
               what="gw-b's listener closed")
    assert backend_at(at["a"]) == "a"
    kept.send(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
    assert kept.read_response().status == 404
    kept.close()

    # It comes back: the same name gets the same port (a hash of the name, not an order).
    s.manifests.write("gateways.yaml", GATEWAY_CLASS,
                      gateway("gw-a", [{"name": "http", "port": 80, "protocol": "HTTP"}]),
                      gateway("gw-b", [{"name": "http", "port": 80, "protocol": "HTTP"}]),
                      http_route("ra", "gw-a", "svc-a"), http_route("rb", "gw-b", "svc-b"))
    assert serving(s, {"a": "example.com", "b": "example.com"}) == at


def test_listener_hostnames_and_certificates_stay_with_their_gateway(gateways, tmp_path):
    s = gateways
    ca = CertAuthority(tmp_path / "ca")
    cert_a = ca.issue("a", ["shop.example.com"])
    cert_c = ca.issue("c", ["shop.example.com"])
    tls = {"mode": "Terminate", "certificateRefs": [{"name": "cert-a"}]}
    s.manifests.write("secrets.yaml", tls_secret("cert-a", cert_a.cert_pem, cert_a.key_pem),
                      tls_secret("cert-c", cert_c.cert_pem, cert_c.key_pem))
    s.manifests.write(
        "gateways.yaml", GATEWAY_CLASS,
        gateway("gw-a", [{"name": "https", "port": 443, "protocol": "HTTPS",
                          "hostname": "shop.example.com", "tls": tls}]),
        gateway("gw-c", [{"name": "https", "port": 443, "protocol": "HTTPS",
                          "hostname": "shop.example.com",
                          "tls": {**tls, "certificateRefs": [{"name": "cert-c"}]}}]),
        http_route("ra", "gw-a", "svc-a"), http_route("rc", "gw-c", "svc-c"))

    def tls_backends():
        out = {}
        for p in s.ports:
            try:
                r, der = tls_request(p, "shop.example.com")
            except (OSError, ssl.SSLError):
                continue
            if r.status == 200:
                out[r.header("X-Backend")] = (p, der)
        return out

    wait_until(lambda: set(tls_backends()) == {"a", "c"}, timeout=15.0,
               what="both HTTPS listeners serving")
    got = tls_backends()
    # The same name on two Gateways: each listener presents its own Gateway's certificate.
    assert got["a"][1] == ssl.PEM_cert_to_DER_cert(cert_a.cert_pem.decode())
    assert got["c"][1] == ssl.PEM_cert_to_DER_cert(cert_c.cert_pem.decode())
    # Another name on gw-a's listener: no route there (its hostname is shop.example.com).
    r, _ = tls_request(got["a"][0], "other.example.com")
    assert r.status == 404
    # A plain-HTTP request to an HTTPS listener is not served as HTTP.
    assert backend_at(got["a"][0], "shop.example.com") != "a"


def test_without_the_flag_gateways_share_the_data_plane_ports(stack):
    """The default: no listener of its own; a port other than the shared one is not accepted."""
    s = stack
    b = s.backend("a")
    s.manifests.write("services.yaml", service("svc-a"))
    s.manifests.write("slices.yaml", endpoint_slice("svc-a-1", "svc-a", [b.host], b.port))
    s.manifests.write("gateways.yaml", GATEWAY_CLASS,
                      gateway("gw-a", [{"name": "http", "port": 80, "protocol": "HTTP"}]),
                      gateway("gw-x", [{"name": "alt", "port": 8080, "protocol": "HTTP"}]),
                      http_route("ra", "gw-a", "svc-a", ["a.example.com"]),
                      http_route("rx", "gw-x", "svc-a", ["x.example.com"]))
    s.wait_backend("/", "a.example.com", "a")
    assert s.get("/", "x.example.com").status == 404
