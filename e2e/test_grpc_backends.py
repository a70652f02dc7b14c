"""gRPC and HTTP/2 backends (docs/proxy.md, "HTTP/2 backends"): a real grpcio backend behind
the ingress (backend-protocol GRPC, H2C, or a Service port's appProtocol), a real grpcio client
over cleartext HTTP/2 with prior knowledge. All four call kinds, trailers intact both for a
success and for an error, 100 concurrent streams on one client connection, an HTTP/1.1 client
on an HTTP/2 backend, and a backend that keeps sending GOAWAY under load."""

from __future__ import annotations

import http.client
import struct
import time
from types import SimpleNamespace

import pytest

from grpc_backend import GrpcBackend, channel
from h2_backend import H2Server
import base64

from harness import (CertAuthority, endpoint_slice, h2_request, ingress, path, rule, service,
                     wait_until)

HOST = "grpc.example.com"


def grpc_service(name: str, app_protocol: str | None = None) -> dict:
    svc = service(name)
    if app_protocol:
        svc["spec"]["ports"][0]["appProtocol"] = app_protocol
    return svc


def routes(backend: GrpcBackend, annotations: dict | None = None, svc: str = "svc-grpc",
           app_protocol: str | None = None, host: str = HOST) -> list[dict]:
    return [grpc_service(svc, app_protocol),
            endpoint_slice(f"{svc}-1", svc, [backend.host], backend.port),
            ingress(svc, [rule(host, path("/", svc))],
                    annotations=annotations if annotations is not None
                    else {"tidegate.io/backend-protocol": "GRPC"})]


def unary(port: int, request: bytes = b"ping", method: str = "/test.Echo/Unary",
          authority: str = HOST, timeout: float = 10):
    with channel(port, authority) as ch:
        return ch.unary_unary(method).with_call(request, timeout=timeout)


def wait_grpc(port: int, authority: str = HOST):
    """Until a unary call goes through (the route and endpoints are pushed)."""
    import grpc

    def ok():
        try:
            return unary(port, authority=authority, timeout=2)
        except grpc.RpcError:
            return None
    return wait_until(ok, 15, "a unary call through the ingress")


@pytest.fixture
def grpc_stack(stack):
    b = GrpcBackend("g1")
    stack.manifests.write("routes.yaml", *routes(b))
    wait_grpc(stack.port)
    stack.grpc_backend = b
    yield stack
    b.stop()


def test_unary_carries_the_answer_and_the_trailers(grpc_stack):
    response, call = unary(grpc_stack.port, b"hello")
    assert response == b"g1:hello"
    # x-backend comes in the trailers, after the message: they went through.
    assert ("x-backend", "g1") in call.trailing_metadata()
    import grpc
    assert call.code() == grpc.StatusCode.OK


def test_client_streaming(grpc_stack):
    with channel(grpc_stack.port, HOST) as ch:
        stub = ch.stream_unary("/test.Echo/ClientStream")
        response, call = stub.with_call(iter([b"a", b"b", b"c" * 1000]), timeout=10)
    assert response == b"g1:a,b," + b"c" * 1000
    assert ("x-backend", "g1") in call.trailing_metadata()


def test_server_streaming(grpc_stack):
    with channel(grpc_stack.port, HOST) as ch:
        responses = ch.unary_stream("/test.Echo/ServerStream")(b"200", timeout=10)
        got = list(responses)
        trailers = responses.trailing_metadata()
    assert got == [f"g1:{i}".encode() for i in range(200)]
    assert ("x-backend", "g1") in trailers


def test_bidirectional_streaming(grpc_stack):
    sent = [f"m{i}".encode() * 50 for i in range(20)]
    with channel(grpc_stack.port, HOST) as ch:
        responses = ch.stream_stream("/test.Echo/Bidi")(iter(sent), timeout=10)
        got = list(responses)
        trailers = responses.trailing_metadata()
    assert got == [b"g1:" + m for m in sent]
    assert ("x-backend", "g1") in trailers


def test_bidirectional_ping_pong(grpc_stack):
    """The client sends each message only after the answer to the previous one came back:
    the request and the response must flow side by side (a proxy that waits for the whole
    request before reading the response stalls here until the deadline)."""
    import queue
    answers: queue.Queue = queue.Queue()

    def requests():
        for i in range(5):
            yield f"p{i}".encode()
            answers.get(timeout=5)  # the answer to this one, before the next

    got = []
    with channel(grpc_stack.port, HOST) as ch:
        responses = ch.stream_stream("/test.Echo/Bidi")(requests(), timeout=10)
        for r in responses:
            got.append(r)
            answers.put(r)
    assert got == [f"g1:p{i}".encode() for i in range(5)]


def test_a_long_stream_outlives_configuration_changes(grpc_stack):
    """A server-streaming call that runs while the configuration changes under it (another
    route added, its own route's Ingress deleted): like a tunnel it keeps going to its end;
    new calls see the new configuration."""
    import grpc
    b = grpc_stack.grpc_backend
    with channel(grpc_stack.port, HOST) as ch:
        stream = ch.unary_stream("/test.Echo/SlowStream")(b"30", timeout=20)  # 30 x 100 ms
        got = [next(stream)]
        other = GrpcBackend("g9")
        try:
            grpc_stack.manifests.write("routes.yaml", *routes(b),
                                       *routes(other, svc="svc-other", host="other.example.com"))
            wait_grpc(grpc_stack.port, "other.example.com")
            grpc_stack.manifests.write("routes.yaml",
                                       *routes(other, svc="svc-other", host="other.example.com"))

            def gone():
                try:
                    unary(grpc_stack.port, timeout=2)
                    return None
                except grpc.RpcError as e:
                    return e.code()
            assert wait_until(gone, 10, "the route to go") == grpc.StatusCode.UNIMPLEMENTED
            got += list(stream)
        finally:
            other.stop()
    assert got == [f"g1:{i}".encode() for i in range(30)]
    assert stream.code() == grpc.StatusCode.OK


def test_a_backend_error_reaches_the_client_with_its_status_and_metadata(grpc_stack):
    import grpc
    with pytest.raises(grpc.RpcError) as e:
        unary(grpc_stack.port, method="/test.Echo/Fail")
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert e.value.details() == "nothing here"
    assert ("x-backend", "g1") in e.value.initial_metadata()


def test_a_large_response_crosses_the_stream_windows(grpc_stack):
    """1 MiB in one message: 16 times the 64 KiB stream window the proxy gives the backend."""
    response, _ = unary(grpc_stack.port, str(1 << 20).encode(), "/test.Echo/Big")
    assert response == b"x" * (1 << 20)


def test_100_concurrent_streams_on_one_connection(grpc_stack):
    from harness import scrape_metrics
    b = grpc_stack.grpc_backend
    key = "tidegate_http2_connections_total"
    before = scrape_metrics(grpc_stack.dataplane).get(key, 0)
    with channel(grpc_stack.port, HOST) as ch:
        stub = ch.unary_unary("/test.Echo/Sleep")
        calls = [stub.future(b"1.5", timeout=20) for _ in range(100)]
        results = [c.result() for c in calls]
    assert results == [b"awake"] * 100
    # All of them were at the backend at once: multiplexed, not queued one by one.
    assert b.max_in_flight == 100, b.max_in_flight
    # ... and all came on one client connection.
    assert scrape_metrics(grpc_stack.dataplane).get(key, 0) - before == 1


def test_the_read_timeout_is_deadline_exceeded(stack):
    import grpc
    b = GrpcBackend("g1")
    try:
        stack.manifests.write("routes.yaml", *routes(
            b, {"tidegate.io/backend-protocol": "GRPC", "tidegate.io/proxy-read-timeout": "1"}))
        wait_grpc(stack.port)
        with pytest.raises(grpc.RpcError) as e:
            unary(stack.port, b"3", "/test.Echo/Sleep")
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert e.value.details() == "upstream timed out"
    finally:
        b.stop()


def test_grpc_timeout_caps_the_wait_for_the_backend(stack):
    """grpc-timeout 500m on a route whose proxy-read-timeout is the default 60 s, to a backend
    that never answers (and ignores grpc-timeout): the proxy gives up after half a second and
    answers DEADLINE_EXCEEDED itself (a raw HTTP/2 client, which has no deadline of its own,
    shows that the proxy did it)."""
    b = H2EchoBackend()
    try:
        stack.manifests.write("routes.yaml", *routes(b, {"tidegate.io/backend-protocol": "H2C"},
                                                     svc="svc-h2"))
        wait_until(lambda: h2_request(stack.port, "POST", "/x", HOST, body=b"x").status == 200,
                   15, "the h2c route")
        body = struct.pack(">BI", 0, 1) + b"x"
        started = time.monotonic()
        r = h2_request(stack.port, "POST", "/silent", HOST,
                       headers={"content-type": "application/grpc", "te": "trailers",
                                "grpc-timeout": "500m"}, body=body)
        elapsed = time.monotonic() - started
        assert r.status == 200
        assert r.header("grpc-status") == "4", r.headers  # DEADLINE_EXCEEDED
        assert r.header("grpc-message") == "upstream timed out"
        assert 0.4 < elapsed < 2.5, elapsed
    finally:
        b.stop()


@pytest.mark.parametrize("annotations,app_protocol", [
    ({"tidegate.io/backend-protocol": "H2C"}, None),
    ({}, "kubernetes.io/h2c"),
    ({}, "grpc"),
])
def test_h2c_by_annotation_or_app_protocol(stack, annotations, app_protocol):
    b = GrpcBackend("g2")
    try:
        stack.manifests.write("routes.yaml", *routes(b, annotations, app_protocol=app_protocol))
        response, _ = wait_grpc(stack.port)
        assert response == b"g2:ping"
    finally:
        b.stop()


def test_an_http1_client_reaches_an_http2_backend(grpc_stack):
    """The request goes up as HTTP/2; the response comes back to the HTTP/1.1 client chunked
    (HTTP/2 has no Content-Length for it). The trailers are not forwarded to HTTP/1.1."""
    message = b"over-1.1"
    body = struct.pack(">BI", 0, len(message)) + message
    conn = http.client.HTTPConnection("127.0.0.1", grpc_stack.port, timeout=10)
    try:
        conn.request("POST", "/test.Echo/Unary", body=body,
                     headers={"Host": HOST, "Content-Type": "application/grpc", "TE": "trailers"})
        r = conn.getresponse()
        data = r.read()
    finally:
        conn.close()
    assert r.status == 200
    assert r.getheader("Content-Type") == "application/grpc"
    assert r.getheader("Transfer-Encoding") == "chunked"
    answer = b"g1:" + message
    assert data == struct.pack(">BI", 0, len(answer)) + answer


def test_backend_goaway_under_load_fails_no_call(stack_factory):
    """The backend closes each connection after 300 ms (grpc.max_connection_age_ms sends
    GOAWAY, streams in flight finish): new calls move to fresh connections, none fails."""
    import grpc
    s = stack_factory(dataplane_args=["--log-level", "debug"]).start_ready()
    b = GrpcBackend("g3", options=[("grpc.max_connection_age_ms", 300),
                                   ("grpc.max_connection_age_grace_ms", 5000)])
    try:
        s.manifests.write("routes.yaml", *routes(b))
        wait_grpc(s.port)
        log_start = s.dataplane.log_size()
        failures = []
        done = 0
        deadline = time.monotonic() + 3
        with channel(s.port, HOST) as ch:
            stub = ch.unary_unary("/test.Echo/Unary")
            while time.monotonic() < deadline:
                batch = [stub.future(b"x", timeout=10) for _ in range(20)]
                for f in batch:
                    try:
                        assert f.result() == b"g3:x"
                        done += 1
                    except grpc.RpcError as e:
                        failures.append((e.code(), e.details()))
        assert failures == []
        assert done > 100
        goaways = s.dataplane.log(since=log_start).count("sent GOAWAY")
        assert goaways >= 3, f"the backend sent {goaways} GOAWAY frames"
    finally:
        b.stop()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    ca = CertAuthority(tmp_path_factory.mktemp("grpc-ca"))
    other = CertAuthority(tmp_path_factory.mktemp("grpc-other-ca"))
    leaf = ca.issue("grpc", ["grpc.internal"], "ec")
    return SimpleNamespace(ca=ca, other=other, leaf=leaf)


def ca_secret(name: str, ca_pem: bytes) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"ca.crt": base64.b64encode(ca_pem).decode()}}


def test_grpcs_backend_verified_over_tls_with_alpn_h2(stack, certs):
    """GRPCS: HTTP/2 over TLS (ALPN h2), the certificate verified with proxy-ssl-secret's CA
    and proxy-ssl-name; a backend whose certificate the CA did not sign is never used."""
    import grpc
    b = GrpcBackend("gs", tls=(certs.leaf.key_pem, certs.leaf.cert_pem))
    try:
        annotations = {"tidegate.io/backend-protocol": "GRPCS",
                       "tidegate.io/proxy-ssl-secret": "grpc-ca",
                       "tidegate.io/proxy-ssl-name": "grpc.internal"}
        stack.manifests.write("routes.yaml", *routes(b, annotations),
                              ca_secret("grpc-ca", certs.ca.ca_pem))
        response, call = wait_grpc(stack.port)
        assert response == b"gs:ping"
        assert ("x-backend", "gs") in call.trailing_metadata()
        # Now the Secret holds another CA: the handshake fails, the client is told UNAVAILABLE.
        stack.manifests.write("routes.yaml", *routes(b, annotations),
                              ca_secret("grpc-ca", certs.other.ca_pem))

        def refused():
            try:
                unary(stack.port, timeout=5)
                return None
            except grpc.RpcError as e:
                return e
        e = wait_until(refused, 15, "calls to fail once the CA changed")
        assert e.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        b.stop()


def test_the_access_log_shows_the_backends_grpc_status_from_its_trailers(stack_factory):
    """grpc_status is the backend's code whether it came in the trailers (a call that answered)
    or in a trailers-only response (an error before any message)."""
    import json

    import grpc
    fields = "request_id,status,grpc_service,grpc_method,grpc_status"
    s = stack_factory(dataplane_args=["--access-log-fields", fields]).start_ready()
    b = GrpcBackend("g4")
    try:
        s.manifests.write("routes.yaml", *routes(b))
        wait_grpc(s.port)
        log_start = s.dataplane.log_size()
        with channel(s.port, HOST) as ch:
            ch.unary_unary("/test.Echo/Unary")(b"x", metadata=[("x-request-id", "log-ok")])
            with pytest.raises(grpc.RpcError):
                ch.unary_unary("/test.Echo/Fail")(b"x", metadata=[("x-request-id", "log-fail")])

        def logged():
            records = {}
            for line in s.dataplane.log(since=log_start).splitlines():
                if line.startswith("{") and '"log-' in line:
                    record = json.loads(line)
                    records[record.pop("request_id")] = record
            return records if len(records) == 2 else None
        records = wait_until(logged, 5, "the two access log lines")
        assert records["log-ok"] == {"status": 200, "grpc_service": "test.Echo",
                                     "grpc_method": "Unary", "grpc_status": 0}
        assert records["log-fail"] == {"status": 200, "grpc_service": "test.Echo",
                                       "grpc_method": "Fail", "grpc_status": 5}
    finally:
        b.stop()


@pytest.mark.parametrize("log_args", [[], ["--access-log", "off"]],
                         ids=["default-log", "log-off"])
def test_the_metrics_count_the_backends_grpc_status(stack_factory, log_args):
    """tidegate_grpc_responses_total counts a backend's grpc-status (from its trailers, or a
    trailers-only response) whatever the access log shows: with the default fields (no
    grpc_status) and with the log off."""
    import grpc

    from harness import scrape_metrics
    s = stack_factory(dataplane_args=log_args).start_ready()
    b = GrpcBackend("g6")
    try:
        s.manifests.write("routes.yaml", *routes(b))
        labels = f'ingress="svc-grpc",namespace="default",host="{HOST}",service="svc-grpc"'

        def key(code: str):
            return f'tidegate_grpc_responses_total{{{labels},grpc_status="{code}"}}'
        wait_grpc(s.port)
        # An exchange is counted when it ends, which can be just after its client has read the
        # answer: the baseline is taken once wait_grpc's one OK call is counted (a fresh stack),
        # or that call could be counted in the difference below.
        before = wait_until(lambda: (m := scrape_metrics(s.dataplane)).get(key("0")) == 1 and m,
                            10, "wait_grpc's OK call counted")
        with channel(s.port, HOST) as ch:
            for _ in range(3):
                ch.unary_unary("/test.Echo/Unary")(b"x")
            with pytest.raises(grpc.RpcError):
                ch.unary_unary("/test.Echo/Fail")(b"x")

        def counted(code: str):
            return scrape_metrics(s.dataplane).get(key(code), 0) - before.get(key(code), 0)
        wait_until(lambda: counted("0") == 3 and counted("5") == 1, 10,
                   "3 OK and 1 NOT_FOUND counted")
    finally:
        b.stop()


class H2EchoBackend(H2Server):
    """A cleartext HTTP/2 backend that answers each request, once it ended, with the request's
    trailers named in x-request-trailers and its body as the response body; a request for
    /silent is never answered."""

    def answer(self, conn, stream_id, head, body, trailers):
        if head.get(":path") == "/silent":
            return  # never answered
        named = ";".join(f"{k}={v}" for k, v in trailers)
        conn.send_headers(stream_id, [(":status", "200"), ("x-request-trailers", named or "-")])
        conn.send_data(stream_id, body, end_stream=True)


def test_request_trailers_reach_an_http2_backend(stack):
    """An HTTP/2 client's request trailers go to an HTTP/2 backend after the body."""
    from harness import H2Client
    b = H2EchoBackend()
    try:
        stack.manifests.write("routes.yaml", *routes(b, {"tidegate.io/backend-protocol": "H2C"},
                                                     svc="svc-h2"))
        with H2Client(stack.port) as c:
            def answered():
                r = c.request("POST", "/x", HOST, {}, b"ping")
                return r if r.status == 200 else None
            wait_until(answered, 15, "the h2c route")
            sid = c.open_stream("POST", "/echo", HOST, {"content-type": "application/octet-stream"},
                                end=False)
            c.send_body(sid, b"body-bytes", end=False)
            c.conn.send_headers(sid, [("x-checksum", "abc123"), ("x-count", "2")],
                                end_stream=True)
            c.flush()
            r = c.read_stream(sid)
        assert r.status == 200
        assert r.body == b"body-bytes"
        assert r.header("x-request-trailers") == "x-checksum=abc123;x-count=2"
    finally:
        b.stop()


def test_a_quiet_streaming_call_lives_until_proxy_read_timeout(stack_factory):
    """A bidirectional call whose client is quiet for 2.5 s: longer than --client-body-timeout
    (1 s, which would reset a plain upload), shorter than the route's proxy-read-timeout (4 s),
    the stream's idle limit: it goes on. Quiet for longer than that, the proxy ends it."""
    import grpc
    s = stack_factory(dataplane_args=["--client-body-timeout", "1"]).start_ready()
    b = GrpcBackend("g5")
    try:
        s.manifests.write("routes.yaml", *routes(b, {"tidegate.io/backend-protocol": "GRPC",
                                                     "tidegate.io/proxy-read-timeout": "4"}))
        wait_grpc(s.port)

        def call(pause: float):
            def requests():
                yield b"a"
                time.sleep(pause)
                yield b"b"
            with channel(s.port, HOST) as ch:
                return list(ch.stream_stream("/test.Echo/Bidi")(requests(), timeout=20))
        assert call(2.5) == [b"g5:a", b"g5:b"]
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as e:
            call(6)
        elapsed = time.monotonic() - started
        # The stream's idle limit ends it ~4 s after the last byte (the answer to "a"), before the
        # client's 6 s pause is over and long before the call's own deadline (20 s): the
        # response had begun, so the stream is reset (INTERNAL_ERROR), as Envoy's stream idle
        # timeout does once a response is under way.
        assert e.value.code() == grpc.StatusCode.INTERNAL, (e.value.code(), e.value.details())
        assert "RST_STREAM" in e.value.details()
        assert 3.5 < elapsed < 5.9, elapsed
    finally:
        b.stop()
