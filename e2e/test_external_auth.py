"""External authentication (docs/annotations.md, "External authentication"): tidegate.io/auth-url
names an authentication Service; every request asks it first, as ingress-nginx's auth_request
does. Through the real data plane and controller, over HTTP/1.1 and HTTP/2, with the harness's
auth backend (respond=auth: "Bearer good" 200 with X-User, "Bearer forbidden" 403, "Bearer
broken" 502, anything else 401 with a WWW-Authenticate of its own)."""

from __future__ import annotations

import threading

import pytest

from harness import (header_values, ingress, path, proto_request, rule, scrape_metrics,
                     service_with_backend, wait_until)

pytestmark = pytest.mark.usefixtures("over_both_protocols")

HOST = "app.example.com"
GOOD = {"Authorization": "Bearer good"}


def protected(annotations: dict | None = None, url: str = "http://svc-auth/verify?respond=auth"):
    ann = {"tidegate.io/auth-url": url}
    ann.update(annotations or {})
    return ingress("app", [rule(HOST, path("/", "svc-app"))], annotations=ann)


def setup(stack, annotations: dict | None = None, wait: int = 401, **kw):
    app, auth = stack.backend("app"), stack.backend("auth")
    stack.manifests.write("app.yaml", *service_with_backend("svc-app", app),
                          *service_with_backend("svc-auth", auth), protected(annotations, **kw))
    stack.wait_status("/", HOST, wait)
    return app, auth


def test_the_service_decides_and_the_backend_hears_who(stack):
    app, auth = setup(stack, {"tidegate.io/auth-response-headers": "X-User, X-Email"})
    r = stack.get("/", host=HOST)
    assert r.status == 401
    assert r.header("WWW-Authenticate") == 'Bearer realm="sso"'  # the service's challenge
    assert stack.get("/", host=HOST, headers={"Authorization": "Bearer forbidden"}).status == 403
    assert app.count == 0  # nothing refused reached the application
    # Allowed: the request goes on, with the service's answer headers and not the client's own.
    r = stack.get("/shop/cart?id=7", host=HOST,
                  headers={**GOOD, "X-User": "mallory", "X-Email": "spoofed"})
    assert r.status == 200, r.body
    seen = r.json()
    assert header_values(seen, "X-User") == ["ann"]
    assert header_values(seen, "X-Email") == ["ann@example.com"]
    assert seen["path"] == "/shop/cart?id=7"
    # What the service was asked: GET with the original headers and where the request went.
    asked = auth.requests[-1]
    assert asked["method"] == "GET" and asked["path"] == "/verify?respond=auth"
    assert header_values(asked, "Host") == ["svc-auth"]
    assert header_values(asked, "Authorization") == ["Bearer good"]
    assert header_values(asked, "X-Original-URL") == [f"http://{HOST}/shop/cart?id=7"]
    assert header_values(asked, "X-Original-Method") == ["GET"]
    assert header_values(asked, "X-Auth-Request-Redirect") == ["/shop/cart?id=7"]
    assert header_values(asked, "X-Sent-From") == ["tidegate"]
    assert header_values(asked, "X-Forwarded-For") == ["127.0.0.1"]
    # One request id for both.
    assert header_values(asked, "X-Request-ID") == header_values(seen, "X-Request-ID")


def test_a_body_goes_to_the_backend_only(stack):
    app, auth = setup(stack, {"tidegate.io/auth-method": "POST"})
    body = b"x" * 100_000
    r = stack.get("/upload", host=HOST, headers=GOOD)
    assert r.status == 200
    r = proto_request(stack.port, "PUT", "/upload", HOST, headers=GOOD, body=body)
    assert r.status == 200, r.body
    assert r.json()["body_len"] == len(body) and r.json()["method"] == "PUT"
    asked = auth.requests[-1]
    assert asked["method"] == "POST" and asked["body_len"] == 0
    assert header_values(asked, "X-Original-Method") == ["PUT"]


def test_signin_redirect_and_cookies(stack):
    app, auth = setup(stack, {"tidegate.io/auth-signin": "https://login.example/start",
                              "tidegate.io/auth-url": "http://svc-auth/v?respond=auth&cookie=1"},
                      wait=302)
    r = stack.get("/a/b?c=d", host=HOST)
    assert r.status == 302
    assert r.header("Location") == (
        f"https://login.example/start?rd=http://{HOST}%2Fa%2Fb%3Fc%3Dd")
    # The service's cookie reaches the client with the application's answer.
    r = stack.get("/", host=HOST, headers=GOOD)
    assert r.status == 200
    assert r.header("Set-Cookie") == "sso=refreshed; Path=/"


def test_failures_never_let_a_request_through(stack):
    app, auth = setup(stack)
    # The service answers what it should not (502): 500, counted.
    r = stack.get("/", host=HOST, headers={"Authorization": "Bearer broken"})
    assert r.status == 500 and b"authentication failed" in r.body
    # The service is down: 500.
    auth.stop()
    assert stack.get("/", host=HOST, headers=GOOD).status == 500
    assert app.count == 0
    metrics = scrape_metrics(stack.dataplane)
    errors = sum(v for k, v in metrics.items()
                 if k.startswith("tidegate_external_auth_errors_total") and 'ingress="app"' in k)
    assert errors == 2, {k: v for k, v in metrics.items() if "auth" in k}
    # A Service that does not exist: the route fails closed (503) and the controller says why.
    stack.manifests.write("app.yaml", *service_with_backend("svc-app", app),
                          protected(url="http://svc-gone/verify"))
    r = stack.wait_status("/", HOST, 503)
    assert b"authentication is not configured" in r.body
    assert stack.get("/", host=HOST, headers=GOOD).status == 503
    stack.controller.wait_for_log(r'auth-url: service "svc-gone" not found')
    assert app.count == 0


def test_answers_are_cached_by_key(stack):
    app, auth = setup(stack, {"tidegate.io/auth-cache-key": "$http_authorization",
                              "tidegate.io/auth-cache-duration": "200 1m"})
    wait_until(lambda: stack.get("/", host=HOST, headers=GOOD).status == 200, 10, "good to pass")
    asked = auth.count
    for _ in range(5):
        assert stack.get("/", host=HOST, headers=GOOD).status == 200
    # Each of the two workers asks at most once for the key; 401s are not kept ("200 1m").
    assert auth.count - asked <= 1
    before = auth.count
    for _ in range(3):
        assert stack.get("/", host=HOST).status == 401
    assert auth.count - before == 3


def test_a_configuration_change_while_the_service_thinks_keeps_the_request_whole(stack):
    """The request keeps the configuration it started with, its authentication settings
    included: a change that rebuilds the routing table while the service is still answering
    (here, a new Ingress) loses neither the answer headers, the cache nor the sign-in redirect,
    and lets nothing through unchecked. (The settings live in the routing table: an exchange
    that kept only a pointer into the table read freed memory once every worker had moved on.)"""
    app, auth = setup(stack, {"tidegate.io/auth-response-headers": "X-User",
                              "tidegate.io/auth-cache-key": "$http_authorization",
                              "tidegate.io/auth-cache-duration": "200 1m",
                              "tidegate.io/auth-signin": "https://login.example/start"}, wait=302)
    auth.slow_down(2.0)
    results = {}

    def ask(name, headers):
        results[name] = stack.get("/", host=HOST, headers=headers)
    threads = [threading.Thread(target=ask, args=(name, headers)) for name, headers in
               (("good", GOOD), ("anonymous", {}), ("forbidden", {"Authorization":
                                                                   "Bearer forbidden"}))]
    asked = auth.count
    for t in threads:
        t.start()
    wait_until(lambda: auth.count - asked >= 3 or None, 5, "the three requests at the service")
    other = stack.backend("other")
    stack.manifests.write("other.yaml", *service_with_backend("svc-other", other),
                          ingress("other", [rule("other.example.com", path("/", "svc-other"))]))
    stack.wait_backend("/", "other.example.com", "other")  # the workers serve the new table
    assert not results, "the change was served while the service was still answering"
    for t in threads:
        t.join(10)
    assert results["good"].status == 200, results["good"].body
    assert header_values(results["good"].json(), "X-User") == ["ann"]
    assert results["anonymous"].status == 302
    assert results["anonymous"].header("Location").startswith("https://login.example/start?rd=")
    assert results["forbidden"].status == 403
    assert app.count == 1
