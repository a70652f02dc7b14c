"""A real gRPC backend for the e2e tests (Debian's python3-grpcio): generic handlers on raw bytes,
so no generated code is needed. Methods of the service test.Echo:

- Unary: answers b"<name>:" + the request; trailing metadata x-backend: <name>.
- ClientStream: answers b"<name>:" + the requests joined with b",".
- ServerStream: the request is a count n; answers n messages b"<name>:<i>".
- SlowStream: as ServerStream, one message every 100 ms.
- Bidi: answers each request as it arrives with b"<name>:" + the request.
- Fail: aborts with NOT_FOUND "nothing here" after sending initial metadata.
- Sleep: the request is seconds to sleep (text), then answers b"awake".
- Big: the request is a size; answers one message of that many bytes b"x"...
"""

from __future__ import annotations

import time
from concurrent import futures


def _identity(b: bytes) -> bytes:
    return b


class GrpcBackend:
    def __init__(self, name: str, host: str = "127.0.0.1", workers: int = 128,
                 options: list[tuple[str, int]] | None = None,
                 tls: tuple[bytes, bytes] | None = None):
        """`tls`: (key PEM, certificate PEM) to serve over TLS (ALPN h2) instead of h2c."""
        import threading

        import grpc

        self.name = name
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        lock = threading.Lock()
        prefix = name.encode() + b":"
        backend = self

        def unary(request, context):
            backend.calls += 1
            context.set_trailing_metadata((("x-backend", name),))
            return prefix + request

        def client_stream(requests, context):
            backend.calls += 1
            context.set_trailing_metadata((("x-backend", name),))
            return prefix + b",".join(requests)

        def server_stream(request, context):
            backend.calls += 1
            context.set_trailing_metadata((("x-backend", name),))
            for i in range(int(request)):
                yield prefix + str(i).encode()

        def slow_stream(request, context):
            backend.calls += 1
            for i in range(int(request)):
                time.sleep(0.1)
                yield prefix + str(i).encode()

        def bidi(requests, context):
            backend.calls += 1
            context.set_trailing_metadata((("x-backend", name),))
            for r in requests:
                yield prefix + r

        def fail(request, context):
            backend.calls += 1
            context.send_initial_metadata((("x-backend", name),))
            context.abort(grpc.StatusCode.NOT_FOUND, "nothing here")

        def sleep(request, context):
            with lock:
                backend.calls += 1
                backend.in_flight += 1
                backend.max_in_flight = max(backend.max_in_flight, backend.in_flight)
            try:
                time.sleep(float(request))
            finally:
                with lock:
                    backend.in_flight -= 1
            return b"awake"

        def big(request, context):
            backend.calls += 1
            return b"x" * int(request)

        def h(kind, fn):
            return kind(fn, request_deserializer=_identity, response_serializer=_identity)

        handlers = {
            "Unary": h(grpc.unary_unary_rpc_method_handler, unary),
            "ClientStream": h(grpc.stream_unary_rpc_method_handler, client_stream),
            "ServerStream": h(grpc.unary_stream_rpc_method_handler, server_stream),
            "SlowStream": h(grpc.unary_stream_rpc_method_handler, slow_stream),
            "Bidi": h(grpc.stream_stream_rpc_method_handler, bidi),
            "Fail": h(grpc.unary_unary_rpc_method_handler, fail),
            "Sleep": h(grpc.unary_unary_rpc_method_handler, sleep),
            "Big": h(grpc.unary_unary_rpc_method_handler, big),
        }
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
                                  handlers=[grpc.method_handlers_generic_handler("test.Echo",
                                                                                 handlers)],
                                  options=options or [], maximum_concurrent_rpcs=None)
        self.host = host
        if tls:
            creds = grpc.ssl_server_credentials([tls])
            self.port = self.server.add_secure_port(f"{host}:0", creds)
        else:
            self.port = self.server.add_insecure_port(f"{host}:0")
        self.server.start()

    def stop(self, grace: float | None = None) -> None:
        self.server.stop(grace).wait()


def channel(port: int, authority: str):
    import grpc
    return grpc.insecure_channel(f"127.0.0.1:{port}",
                                 options=[("grpc.default_authority", authority),
                                          ("grpc.enable_retries", 0)])
