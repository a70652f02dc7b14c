"""The rest of ingress-nginx's common annotations (issue 20), end to end: denylist-source-range
(and allowlist-source-range, the newer nginx spelling of the allow list), limit-rpm,
proxy-next-upstream-timeout, session-cookie-domain/-expires with affinity-mode,
canary-by-header-pattern, default backends (the default-backend annotation and the controller's
--default-backend-service) and custom-http-errors."""

from __future__ import annotations

import email.utils
import re
import time

from harness import (endpoint_slice, h2_request, header_values, ingress, path, request, rule,
                     service, service_with_backend, wait_until)
from test_balancing import Pods, deploy

HOST = "common.example.com"


def one(stack, name: str, annotations: dict, nginx: bool = False):
    b = stack.backend(name)
    stack.manifests.write(f"{name}.yaml", *service_with_backend(f"svc-{name}", b),
                          ingress(name, [rule(f"{name}.{HOST}", path("/", f"svc-{name}"))],
                                  annotations=annotations))
    return b


def status(stack, name: str, source: str | None = None, headers: dict | None = None) -> int:
    return request(stack.port, "GET", "/", f"{name}.{HOST}", headers=headers,
                   source=source).status


def test_denylist_and_allowlist_source_ranges(stack_factory):
    s = stack_factory(controller_args=["--nginx-annotations"])
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    one(s, "deny", {"tidegate.io/denylist-source-range": "127.0.0.5/32, 127.0.0.6"})
    # Denied wins over allowed: 127.0.0.7 is in both.
    one(s, "both", {"tidegate.io/denylist-source-range": "127.0.0.7",
                    "tidegate.io/whitelist-source-range": "127.0.0.0/24"})
    one(s, "nginx", {"nginx.ingress.kubernetes.io/allowlist-source-range": "127.0.0.9/32",
                     "nginx.ingress.kubernetes.io/denylist-source-range": "127.0.0.10"})
    one(s, "broken", {"tidegate.io/denylist-source-range": "127.0.0.5, bogus"})
    one(s, "ready", {})
    wait_until(lambda: status(s, "ready") == 200, 10, "routes")
    assert status(s, "deny", "127.0.0.1") == 200
    assert status(s, "deny", "127.0.0.5") == 403
    assert status(s, "deny", "127.0.0.6") == 403
    assert status(s, "both", "127.0.0.8") == 200
    assert status(s, "both", "127.0.0.7") == 403
    assert status(s, "nginx", "127.0.0.9") == 200
    assert status(s, "nginx", "127.0.0.1") == 403
    # A deny list that cannot be read denies everyone (never lets the listed in).
    assert status(s, "broken", "127.0.0.1") == 403
    assert "denylist-source-range: invalid value" in s.controller.log()


def test_limit_rpm_with_its_burst(stack):
    # 30 per minute with multiplier 1: a bucket of 30 requests refilling one every 2 s, slow
    # enough that the count below is nearly exact.
    one(stack, "rpm", {"tidegate.io/limit-rpm": "30", "tidegate.io/limit-burst-multiplier": "1"})
    wait_until(lambda: status(stack, "rpm") in (200, 429), 10, "route")
    time.sleep(2.1)  # the probe took a token; let one come back (the bucket holds 30)
    statuses = [status(stack, "rpm") for _ in range(40)]
    allowed = statuses.count(200)
    # 30 tokens (the probes above may have taken one or two, and one may refill meanwhile).
    assert 27 <= allowed <= 31, statuses
    assert statuses[-1] == 429
    r = request(stack.port, "GET", "/", f"rpm.{HOST}")
    assert r.status == 429 and 1 <= int(r.header("Retry-After")) <= 3, r.header("Retry-After")


def test_proxy_next_upstream_timeout_stops_moving_on(stack):
    pods = Pods()
    slow_sick, well = pods.backend(stack, "slow-sick"), pods.backend(stack, "well")
    slow_sick.answer_with(503)
    slow_sick.slow_down(0.4)
    # Picks alternate (round robin), so within a few requests each Ingress reaches slow_sick
    # first. Without a time limit the 503 moves on to `well`; with 200 ms it is past the limit
    # by then and the 503 is the answer.
    on_503 = {"tidegate.io/proxy-next-upstream": "error timeout http_503"}
    deploy(stack, "unlimited", "unlimited.example.com", [slow_sick, well], on_503)
    deploy(stack, "limited", "limited.example.com", [slow_sick, well],
           {**on_503, "tidegate.io/proxy-next-upstream-timeout": "200ms"})
    deploy(stack, "ready", "ready.example.com", [well])
    wait_until(lambda: request(stack.port, "GET", "/", "ready.example.com").status == 200, 10,
               "routes")

    def statuses(host: str) -> list[int]:
        return [request(stack.port, "GET", "/", host).status for _ in range(6)]
    assert statuses("unlimited.example.com") == [200] * 6
    limited = statuses("limited.example.com")
    assert 503 in limited, limited


def test_session_cookie_domain_expires_and_affinity_mode(stack):
    pods = Pods()
    bs = [pods.backend(stack, f"a{i}") for i in range(2)]
    deploy(stack, "sticky", "sticky.example.com", bs,
           {"tidegate.io/affinity": "cookie", "tidegate.io/affinity-mode": "persistent",
            "tidegate.io/session-cookie-domain": ".example.com",
            "tidegate.io/session-cookie-expires": "7200",
            "tidegate.io/session-cookie-name": "route"})
    wait_until(lambda: request(stack.port, "GET", "/", "sticky.example.com").status == 200, 10,
               "route")
    before = time.time()
    r = request(stack.port, "GET", "/", "sticky.example.com")
    m = re.fullmatch(r"route=([0-9a-f]{16}); Path=/; Domain=\.example\.com; Expires=([^;]+); "
                     r"HttpOnly", r.header("Set-Cookie") or "")
    assert m, r.header("Set-Cookie")
    expires = email.utils.parsedate_to_datetime(m.group(2)).timestamp()
    assert before + 7200 - 2 <= expires <= time.time() + 7200 + 1, (expires - before)
    pinned = r.header("X-Backend")
    cookie = {"Cookie": f"route={m.group(1)}"}
    for _ in range(10):
        r = request(stack.port, "GET", "/", "sticky.example.com", headers=cookie)
        assert r.header("X-Backend") == pinned and r.header("Set-Cookie") is None


def test_canary_by_header_pattern(stack):
    main, canary = stack.backend("pat-main"), stack.backend("pat-canary")
    host = f"pat.{HOST}"
    stack.manifests.write(
        "pat.yaml", *service_with_backend("svc-pat-main", main),
        *service_with_backend("svc-pat-canary", canary),
        ingress("pat-main", [rule(host, path("/", "svc-pat-main"))]),
        ingress("pat-canary", [rule(host, path("/", "svc-pat-canary"))],
                annotations={"tidegate.io/canary": "true",
                             "tidegate.io/canary-by-header": "X-Region",
                             "tidegate.io/canary-by-header-pattern": "^(eu|us)-west-[0-9]+$"}))

    def backend(region: str | None) -> str:
        headers = {"X-Region": region} if region is not None else None
        return request(stack.port, "GET", "/", host, headers=headers).header("X-Backend")
    wait_until(lambda: backend("eu-west-1") == "pat-canary", 10, "canary configured")
    assert {backend("us-west-2") for _ in range(5)} == {"pat-canary"}
    assert {backend("ap-west-1") for _ in range(5)} == {"pat-main"}
    assert {backend("always") for _ in range(5)} == {"pat-main"}  # no special value
    assert {backend(None) for _ in range(5)} == {"pat-main"}  # weight 0


def test_default_backend_service_and_annotation(stack_factory):
    s = stack_factory(controller_args=["--default-backend-service", "default/svc-errors"])
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    errors, pages, app = s.backend("errors"), s.backend("pages"), s.backend("app")

    def write(app_ready: bool):
        slices = [endpoint_slice("svc-app-1", "svc-app", [app.host] if app_ready else [],
                                 app.port)]
        s.manifests.write(
            "all.yaml", *service_with_backend("svc-errors", errors),
            *service_with_backend("svc-pages", pages), service("svc-app"), *slices,
            ingress("plain", [rule(f"plain.{HOST}", path("/", "svc-app"))]),
            ingress("own", [rule(f"own.{HOST}", path("/", "svc-app"))],
                    annotations={"tidegate.io/default-backend": "svc-pages"}))

    def backend(host: str) -> tuple[int, str | None]:
        r = request(s.port, "GET", "/x", host)
        return r.status, r.header("X-Backend")
    write(app_ready=False)
    # No route takes the host: the flag's Service answers instead of a 404.
    wait_until(lambda: backend("unknown.example.com") == (200, "errors"), 10, "default backend")
    # The route's backend has no endpoints: the flag's Service, or the Ingress's own.
    assert backend(f"plain.{HOST}") == (200, "errors")
    assert backend(f"own.{HOST}") == (200, "pages")
    # Endpoints arrive: the application serves again.
    write(app_ready=True)
    wait_until(lambda: backend(f"plain.{HOST}") == (200, "app"), 10, "app endpoints")
    assert backend(f"own.{HOST}") == (200, "app")
    assert backend("unknown.example.com") == (200, "errors")


def test_custom_http_errors_are_served_by_the_default_backend(stack):
    app, pages = stack.backend("app"), stack.backend("pages")
    app.answer_with(404)
    stack.manifests.write(
        "errs.yaml", *service_with_backend("svc-app", app),
        *service_with_backend("svc-pages", pages),
        ingress("errs", [rule(f"errs.{HOST}", path("/", "svc-app"))],
                annotations={"tidegate.io/default-backend": "svc-pages",
                             "tidegate.io/custom-http-errors": "404,503"}),
        ingress("plain", [rule(f"plain.{HOST}", path("/", "svc-app"))]))
    wait_until(lambda: request(stack.port, "GET", "/", f"errs.{HOST}").status == 200, 10,
               "error pages")
    before = app.count
    for send in (request, h2_request):
        r = send(stack.port, "POST", "/some/path?q=1", f"errs.{HOST}",
                 headers={"Accept": "application/json"}, body=b"x" * 1000)
        # The page server's answer (its status, here 200) replaces the backend's 404.
        assert r.status == 200 and r.header("X-Backend") == "pages", (send, r.status, r.body)
        seen = r.json()
        assert seen["method"] == "GET" and seen["path"] == "/some/path?q=1"
        assert header_values(seen, "X-Code") == ["404"]
        assert header_values(seen, "X-Format") == ["application/json"]
        assert header_values(seen, "X-Original-URI") == ["/some/path?q=1"]
        assert header_values(seen, "X-Namespace") == ["default"]
        assert header_values(seen, "X-Ingress-Name") == ["errs"]
        assert header_values(seen, "X-Service-Name") == ["svc-app"]
        assert header_values(seen, "X-Service-Port") == ["80"]
        assert header_values(seen, "Content-Length") in ([], ["0"])
    assert app.count == before + 2  # the backend was asked; its answer was replaced
    # A status not listed passes as it is; so does every status of an Ingress without the list.
    app.answer_with(500)
    r = request(stack.port, "GET", "/", f"errs.{HOST}")
    assert r.status == 500 and r.header("X-Backend") == "app"
    app.answer_with(404)
    r = request(stack.port, "GET", "/", f"plain.{HOST}")
    assert r.status == 404 and r.header("X-Backend") == "app"
    # The page server's own error is the answer (never asked again: no loop).
    pages.answer_with(503)
    app.answer_with(503)
    r = request(stack.port, "GET", "/", f"errs.{HOST}")
    assert r.status == 503 and r.header("X-Backend") == "pages"
    # HEAD stays HEAD.
    pages.answer_with(None)
    app.answer_with(404)
    r = request(stack.port, "HEAD", "/h", f"errs.{HOST}")
    assert r.status == 200 and r.header("X-Backend") == "pages" and r.body == b""


def test_custom_http_errors_replace_the_proxys_own_502_and_504(stack):
    app, slow, pages = stack.backend("app"), stack.backend("slow"), stack.backend("pages")
    slow.slow_down(2.0)
    stack.manifests.write(
        "errs.yaml", *service_with_backend("svc-app", app),
        *service_with_backend("svc-slow", slow), *service_with_backend("svc-pages", pages),
        ingress("errs", [rule(f"errs.{HOST}", path("/", "svc-app")),
                         rule(f"slow.{HOST}", path("/", "svc-slow"))],
                annotations={"tidegate.io/default-backend": "svc-pages",
                             "tidegate.io/custom-http-errors": "502,504",
                             "tidegate.io/proxy-read-timeout": "300ms"}),
        ingress("plain", [rule(f"plain.{HOST}", path("/", "svc-app"))]))
    wait_until(lambda: request(stack.port, "GET", "/", f"errs.{HOST}").status == 200, 10,
               "the route")
    # The backend times out: the page server answers instead of the proxy's 504.
    for send in (request, h2_request):
        r = send(stack.port, "GET", "/t", f"slow.{HOST}")
        assert r.status == 200 and r.header("X-Backend") == "pages", (send, r.status, r.body)
        assert header_values(r.json(), "X-Code") == ["504"]
    # The backend is gone (connection refused): the page server answers instead of the 502.
    app.stop()
    for send in (request, h2_request):
        r = send(stack.port, "GET", "/down?x=1", f"errs.{HOST}")
        assert r.status == 200 and r.header("X-Backend") == "pages", (send, r.status, r.body)
        seen = r.json()
        assert header_values(seen, "X-Code") == ["502"]
        assert header_values(seen, "X-Original-URI") == ["/down?x=1"]
    # Without the list the proxy's own answer stands.
    assert request(stack.port, "GET", "/", f"plain.{HOST}").status == 502


def test_service_upstream_sends_to_the_cluster_ip(stack):
    """service-upstream: the Service's ClusterIP and port are the one endpoint (here a loopback
    address where the "ClusterIP" backend listens), whatever the EndpointSlices name."""
    cluster_ip, pod = stack.backend("cluster-ip"), stack.backend("pod")
    svc = service("svc-app", port=cluster_ip.port)
    svc["spec"]["clusterIP"] = "127.0.0.1"
    slice_ = endpoint_slice("svc-app-1", "svc-app", ["127.0.0.1"], pod.port)

    def write(value: str | None):
        annotations = {} if value is None else {"tidegate.io/service-upstream": value}
        stack.manifests.write("su.yaml", svc, slice_,
                              ingress("su", [rule(f"su.{HOST}", path("/", "svc-app",
                                                                     port=cluster_ip.port))],
                                      annotations=annotations))

    def backend() -> str | None:
        return request(stack.port, "GET", "/?respond=name", f"su.{HOST}").body.decode()

    write("true")
    wait_until(lambda: backend() == "cluster-ip", 10, "the ClusterIP")
    for send in (request, h2_request):
        r = send(stack.port, "GET", "/?respond=name", f"su.{HOST}")
        assert r.status == 200 and r.body == b"cluster-ip", (send, r.status)
    # The slices change: the ClusterIP still serves (the fast path leaves it alone).
    slice_ = endpoint_slice("svc-app-1", "svc-app", ["127.0.0.1", "127.0.0.2"], pod.port)
    write("true")
    time.sleep(0.3)
    assert all(backend() == "cluster-ip" for _ in range(5))
    # Without the annotation: the endpoints.
    write(None)
    wait_until(lambda: backend() == "pod", 10, "the endpoints")
