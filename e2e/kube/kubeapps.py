"""Builders shared by the tests against a real API server: backends on 192.0.2.x, Services,
EndpointSlices and Ingresses in a test's namespace. (Not in conftest.py: the e2e folder has a
conftest.py of its own, and `import conftest` would be ambiguous.)"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import harness
import kubecluster

SUBSTITUTION_CRD = harness.REPO / "crds" / "substitutionruleset.yaml"
SUBSTITUTION_CRD_NAME = "substitutionrulesets.tidegate.io"


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


def assert_nothing_refused(log: str) -> None:
    """No call of the controller was refused: no 403 and no "forbidden" in its log (a 403 that
    is a duration, "in 403 ms", or a resource version, "at resourceVersion 403", "open from 403",
    is not one: a fresh API server's versions pass 403 during the tests)."""
    m = re.search(r"forbidden|Forbidden|(?<![\w.])(?<!resourceVersion )(?<!version )(?<!from )"
                  r"403(?! ms)", log)
    assert m is None, log[max(0, m.start() - 2000):m.end() + 2000]


def install_substitution_crd(cluster) -> None:
    """Installs crds/substitutionruleset.yaml and waits until the API server serves it."""
    cluster.kubectl("apply", "-f", str(SUBSTITUTION_CRD))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{SUBSTITUTION_CRD_NAME}",
                    "--timeout=30s")


def rule_set(name: str, namespace: str, rules: list[dict]) -> dict:
    """A SubstitutionRuleSet; rules are {match, replace[, flags]}."""
    return {"apiVersion": "tidegate.io/v1alpha1", "kind": "SubstitutionRuleSet",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"rules": rules}}


def ingress_events(cluster, namespace: str, name: str) -> list[dict]:
    out = cluster.kubectl("get", "events", "-n", namespace, "-o", "json", "--field-selector",
                          f"involvedObject.kind=Ingress,involvedObject.name={name}")
    return json.loads(out)["items"]


def wait_events(cluster, namespace: str, name: str, predicate, timeout: float = 15.0,
                what: str = "events") -> list[dict]:
    """Polls the Ingress's Events until predicate(events) holds; returns them."""
    last: list = []

    def probe():
        last[:] = ingress_events(cluster, namespace, name)
        return last if predicate(last) else None
    try:
        return harness.wait_until(probe, timeout, what, interval=0.3)
    except harness.WaitTimeout as e:
        raise harness.WaitTimeout(f"{e}; events: {json.dumps(last, indent=1)[:3000]}") from None


# An HTML backend for the substitution tests.

PAGE = b"<p>Visit shop.example.com today, own words.</p>"
SET_RULES = [{"match": r"shop\.example\.com", "replace": "shop.clone.test"}]  # for a rule set
OWN_RULES = "- {match: 'own words', replace: 'OWN WORDS'}\n"  # an Ingress's own


def with_set(set_name: str) -> dict:
    """An Ingress's annotations: the rule set `set_name`, then OWN_RULES."""
    return {"tidegate.io/substitution-rule-set": set_name, "tidegate.io/substitutions": OWN_RULES}


class _PageHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        body = self.server.body
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HtmlSite:
    """One HTML page on a 192.0.2.x address (the API server refuses loopback endpoints)."""

    def __init__(self, body: bytes = PAGE):
        self.host = backend_address()
        self.server = ThreadingHTTPServer((self.host, harness.free_port(self.host)), _PageHandler)
        self.server.daemon_threads = True
        self.server.body = body
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def html_app(namespace: str, site: HtmlSite, host: str, annotations: dict,
             name: str = "site") -> list[dict]:
    """A Service, an EndpointSlice for `site` and an Ingress routing `host` to it."""
    return [kube_service(name, namespace),
            harness.endpoint_slice(f"{name}-1", name, [site.host], site.port, namespace=namespace),
            kube_ingress(name, namespace, host, name, annotations=annotations)]


def wait_body(s: harness.Stack, host: str, want: bytes, timeout: float = 15.0,
              what: str | None = None) -> harness.Response:
    """Polls the proxy until `host`/ answers 200 with exactly `want`."""
    return s.wait_route("/", host, lambda r: r.status == 200 and r.body == want, timeout,
                        what or f"{host} to answer {want!r}")


# The Gateway API's standard-channel CRDs, of the version e2e/gateway/go.mod pins: from the folder
# e2e/gateway/build-tools.sh builds and caches (scripts/test runs it before these tests, which
# run where the module proxy cannot be reached). The kinds the controller watches.
GATEWAY_CRDS = ("gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants",
                "backendtlspolicies")


def gateway_crd_dir() -> "Path":
    import subprocess
    from pathlib import Path
    r = subprocess.run([str(harness.REPO / "e2e" / "gateway" / "build-tools.sh")],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise AssertionError(f"e2e/gateway/build-tools.sh failed: {r.stderr[-3000:]}")
    return Path(r.stdout.strip()) / "crd" / "standard"


def install_gateway_crds(cluster) -> None:
    """Installs the Gateway API CRDs the controller watches and waits until they are served.
    Server-side apply: the HTTPRoute CRD is larger than client-side apply's annotation allows."""
    d = gateway_crd_dir()
    for plural in GATEWAY_CRDS:
        cluster.kubectl("apply", "--server-side", "-f",
                        str(d / f"gateway.networking.k8s.io_{plural}.yaml"))
    for plural in GATEWAY_CRDS:
        cluster.kubectl("wait", "--for=condition=Established",
                        f"crd/{plural}.gateway.networking.k8s.io", "--timeout=30s")
