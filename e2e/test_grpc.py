"""gRPC clients (docs/proxy.md, "gRPC clients"): the answers of the proxy's own reach a real gRPC
client (Debian's python3-grpcio, over cleartext HTTP/2 with prior knowledge) as trailers-only
responses with the gRPC code they stand for. (gRPC backends need HTTP/2 upstreams: next step.)"""

from __future__ import annotations

import pytest

from harness import ingress, path, rule, service, service_with_backend

HOST = "grpc.example.com"


def call(port: int, authority: str, method: str = "/test.Echo/Unary", timeout: float = 10):
    import grpc
    with grpc.insecure_channel(f"127.0.0.1:{port}",
                               options=[("grpc.default_authority", authority),
                                        ("grpc.enable_retries", 0)]) as ch:
        stub = ch.unary_unary(method)  # raw bytes both ways: no generated code needed
        with pytest.raises(grpc.RpcError) as e:
            stub(b"ping", timeout=timeout)
        return e.value.code(), e.value.details()


@pytest.fixture
def grpcs(stack):
    b = stack.backend("b")
    stack.manifests.write(
        "routes.yaml", *service_with_backend("svc-b", b),
        service("svc-empty"),  # no EndpointSlice: no endpoint
        ingress("slow", [rule(HOST, path("/slow.Service/", "svc-b"))],
                annotations={"tidegate.io/proxy-read-timeout": "1"}),
        ingress("limited", [rule(HOST, path("/limited.Service/", "svc-b"))],
                annotations={"tidegate.io/limit-rps": "1",
                             "tidegate.io/limit-burst-multiplier": "1",
                             "tidegate.io/limit-status-code": "503"}),
        ingress("empty", [rule(HOST, path("/empty.Service/", "svc-empty"))]))
    stack.wait_backend("/slow.Service/x", HOST, "b")
    stack.backend_b = b
    return stack


def test_no_route_is_unimplemented(grpcs):
    import grpc
    code, details = call(grpcs.port, "nowhere.example.com")
    assert code == grpc.StatusCode.UNIMPLEMENTED
    assert details == "no route"


def test_no_endpoint_is_unavailable(grpcs):
    import grpc
    code, details = call(grpcs.port, HOST, "/empty.Service/Call")
    assert code == grpc.StatusCode.UNAVAILABLE
    assert details == "no endpoints available"


def test_upstream_timeout_is_deadline_exceeded(grpcs):
    import grpc
    grpcs.backend_b.slow_down(3)
    code, details = call(grpcs.port, HOST, "/slow.Service/Call")
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert details == "upstream timed out"


def test_rate_limit_is_resource_exhausted_whatever_its_http_status(grpcs):
    """limit-status-code 503 would read as UNAVAILABLE (retry now); a rate limit is
    RESOURCE_EXHAUSTED (back off)."""
    import grpc
    codes = [call(grpcs.port, HOST, "/limited.Service/Call")[0] for _ in range(4)]
    assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes, codes
    assert grpc.StatusCode.UNAVAILABLE not in codes, codes
