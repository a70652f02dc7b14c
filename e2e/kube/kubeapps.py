"""Builders shared by the tests against a real API server: backends on 192.0.2.x, Services,
EndpointSlices and Ingresses in a test's namespace. (Not in conftest.py: the e2e folder has a
conftest.py of its own, and `import conftest` would be ambiguous.)"""

from __future__ import annotations

import harness
import kubecluster


def start(stack: harness.Stack) -> harness.Stack:
    stack.start_dataplane()
    stack.start_controller()
    return stack


_next_host = [0]


def backend_address() -> str:
    """A fresh 192.0.2.x address for a backend (x in 1..254, cycling)."""
    _next_host[0] = _next_host[0] % 254 + 1
    return f"{kubecluster.BACKEND_NET}.{_next_host[0]}"


def kube_service(name: str, namespace: str, port: int = 80) -> dict:
    return harness.service(name, port=port, namespace=namespace)


def kube_slice(name: str, service: str, namespace: str, backends: list, not_ready=()) -> dict:
    """An EndpointSlice for backends that share one port (as pods do)."""
    port = backends[0].port
    assert all(b.port == port for b in backends), "backends of one slice share a port"
    return harness.endpoint_slice(name, service, [b.host for b in backends], port,
                                  namespace=namespace, not_ready=[b.host for b in not_ready])


def kube_ingress(name: str, namespace: str, host: str, service: str, path: str = "/",
                 ingress_class: str | None = harness.INGRESS_CLASS, annotations=None) -> dict:
    return harness.ingress(name, [harness.rule(host, harness.path(path, service))],
                           namespace=namespace, ingress_class=ingress_class,
                           annotations=annotations)


def backends(stack: harness.Stack, *names: str) -> list[harness.Backend]:
    """Backends on distinct 192.0.2.x addresses sharing one port, like a Service's pods."""
    first = backend_address()
    port = harness.free_port(first)
    out = [stack.backend(names[0], first, port)]
    for n in names[1:]:
        out.append(stack.backend(n, backend_address(), port))
    return out
