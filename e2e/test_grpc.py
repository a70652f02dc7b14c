"""gRPC clients (docs/proxy.md, "gRPC clients"): the answers of the proxy's own reach a real gRPC
client (Debian's python3-grpcio, over cleartext HTTP/2 with prior knowledge) as trailers-only
responses with the gRPC code they stand for. Real gRPC backends: test_grpc_backends.py."""

from __future__ import annotations

import json

import pytest

from harness import (endpoint_slice, free_port, ingress, path, rule, scrape_metrics, service,
                     service_with_backend, wait_until)

HOST = "grpc.example.com"


def call(port: int, authority: str, method: str = "/test.Echo/Unary", timeout: float = 10,
         request_id: str | None = None):
    import grpc
    with grpc.insecure_channel(f"127.0.0.1:{port}",
                               options=[("grpc.default_authority", authority),
                                        ("grpc.enable_retries", 0)]) as ch:
        stub = ch.unary_unary(method)  # raw bytes both ways: no generated code needed
        metadata = [("x-request-id", request_id)] if request_id else None
        with pytest.raises(grpc.RpcError) as e:
            stub(b"ping", timeout=timeout, metadata=metadata)
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


def test_a_refused_connect_is_unavailable(stack):
    """An endpoint nobody listens on: the connect is refused, the proxy's 502 reaches a gRPC
    client as UNAVAILABLE (the gRPC HTTP status mapping)."""
    import grpc
    dead = free_port()  # nothing listens there
    stack.manifests.write("dead.yaml", service("svc-dead"),
                          endpoint_slice("svc-dead-1", "svc-dead", ["127.0.0.1"], dead),
                          ingress("dead", [rule(HOST, path("/dead.Service/", "svc-dead"))]))
    stack.wait_status("/dead.Service/x", HOST, 502)
    code, _ = call(stack.port, HOST, "/dead.Service/Call")
    assert code == grpc.StatusCode.UNAVAILABLE


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


def test_the_access_log_names_the_grpc_service_method_and_status(stack_factory):
    """grpc_service, grpc_method and grpc_status (docs/observability.md): from the path and the
    code the client was given; null for a request that is not gRPC."""
    import grpc
    fields = "request_id,status,protocol,grpc_service,grpc_method,grpc_status"
    s = stack_factory(dataplane_args=["--access-log-fields", fields])
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    b = s.backend("b")
    s.manifests.write("routes.yaml", *service_with_backend("svc-b", b), service("svc-empty"),
                      ingress("plain", [rule(HOST, path("/plain", "svc-b"))]),
                      ingress("empty", [rule(HOST, path("/shop.v1.Cart/", "svc-empty"))]))
    s.wait_backend("/plain", HOST, "b")
    log_start = s.dataplane.log_size()
    assert call(s.port, HOST, "/shop.v1.Cart/AddItem", request_id="grpc-log-empty")[0] == \
        grpc.StatusCode.UNAVAILABLE
    assert call(s.port, "nowhere.example.com", "/pkg.Echo/Say",
                request_id="grpc-log-none")[0] == grpc.StatusCode.UNIMPLEMENTED
    assert s.get("/plain", host=HOST, headers={"X-Request-ID": "grpc-log-plain"}).status == 200

    def logged():
        records = {}
        for line in s.dataplane.log(since=log_start).splitlines():
            if line.startswith("{") and '"grpc-log-' in line:
                record = json.loads(line)
                records[record.pop("request_id")] = record
        return records if len(records) == 3 else None
    records = wait_until(logged, 5, "the three access log lines")
    assert records["grpc-log-empty"] == {"status": 503, "protocol": "HTTP/2.0",
                                         "grpc_service": "shop.v1.Cart",
                                         "grpc_method": "AddItem", "grpc_status": 14}
    assert records["grpc-log-none"] == {"status": 404, "protocol": "HTTP/2.0",
                                        "grpc_service": "pkg.Echo", "grpc_method": "Say",
                                        "grpc_status": 12}
    assert records["grpc-log-plain"] == {"status": 200, "protocol": "HTTP/1.1",
                                         "grpc_service": None, "grpc_method": None,
                                         "grpc_status": None}
    # The same in the metrics: the protocol per route, and the grpc-status of each gRPC call
    # (docs/observability.md).
    m = scrape_metrics(s.dataplane)
    empty = f'ingress="empty",namespace="default",host="{HOST}",service="svc-empty"'
    plain = f'ingress="plain",namespace="default",host="{HOST}",service="svc-b"'
    none = 'ingress="",namespace="",host="",service=""'
    assert m[f'tidegate_grpc_responses_total{{{empty},grpc_status="14"}}'] == 1
    assert m[f'tidegate_grpc_responses_total{{{none},grpc_status="12"}}'] == 1
    assert m[f'tidegate_protocol_requests_total{{{empty},protocol="h2"}}'] == 1
    assert m[f'tidegate_protocol_requests_total{{{plain},protocol="http/1.1"}}'] >= 2
    assert f'tidegate_protocol_requests_total{{{plain},protocol="h2"}}' not in m
    assert not [k for k in m if k.startswith("tidegate_grpc_responses_total") and plain in k]
