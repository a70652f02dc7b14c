"""Issue 6 traffic policy on the wire: annotations become Route::policy, Upstream::policy and
Route::canary, travel over the control socket and are validated by the data plane, which accepts
what the controller sends and refuses (NACKs) what it cannot validate or does not know.

These tests check the wiring, not request behaviour: what the data plane applies is tested where
it is applied (TLS to backends in test_upstream_tls.py, load balancing, affinity and retries on
5xx in test_balancing.py, route policies in test_policies.py, CORS and canaries in
test_cors_canary.py)."""

from __future__ import annotations

from harness import (ControlClient, ingress, path, rule, service_with_backend, wait_until)


def test_annotated_ingresses_and_a_canary_are_accepted_and_keep_routing(stack):
    main = stack.backend("main")
    canary = stack.backend("canary")
    annotated = ingress("main", [rule("app.example.com", path("/", "svc-main"))], annotations={
        "tidegate.io/load-balance": "ewma",
        "tidegate.io/affinity": "cookie",
        "tidegate.io/proxy-read-timeout": "1h",
        "tidegate.io/proxy-body-size": "8m",
        "tidegate.io/proxy-next-upstream": "error timeout http_503",
        "tidegate.io/custom-headers": "X-Frame-Options: DENY",
        "tidegate.io/enable-cors": "true",
        "tidegate.io/whitelist-source-range": "0.0.0.0/0, ::/0",
        "tidegate.io/limit-rps": "1000",
    })
    canary_ing = ingress("canary", [rule("app.example.com", path("/", "svc-canary"))],
                         annotations={"tidegate.io/canary": "true",
                                      "tidegate.io/canary-weight": "30",
                                      "tidegate.io/canary-by-header": "X-Canary",
                                      "tidegate.io/load-balance": "least_conn"})
    stack.manifests.write("app.yaml", *service_with_backend("svc-main", main),
                          *service_with_backend("svc-canary", canary), annotated, canary_ing)
    stack.wait_backend("/", "app.example.com", "main")
    # The configuration carrying the policies and the canary was acknowledged, not refused.
    assert "NACK" not in stack.dataplane.log()
    # The canary is applied: its header sends requests to it.
    for _ in range(10):
        r = stack.get("/", "app.example.com", headers={"X-Canary": "always"})
        assert r.status == 200 and r.header("X-Backend") == "canary"
    assert canary.count >= 10


def test_nginx_spellings_with_the_flag(stack_factory):
    s = stack_factory(controller_args=["--nginx-annotations"])
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    b = s.backend("app")
    ing = ingress("app", [rule("app.example.com", path("/v[0-9]+/", "svc-app"))], annotations={
        "nginx.ingress.kubernetes.io/use-regex": "true",
        "nginx.ingress.kubernetes.io/load-balance": "ewma",
        "nginx.ingress.kubernetes.io/configuration-snippet": "more_set_headers 'X: y';",
    })
    s.manifests.write("app.yaml", *service_with_backend("svc-app", b), ing)
    # use-regex read under its nginx spelling: /v7/x matches the regex route.
    s.wait_backend("/v7/x", "app.example.com", "app")
    assert s.get("/vx/", "app.example.com").status == 404
    s.controller.wait_for_log(
        r"nginx.ingress.kubernetes.io/configuration-snippet: nginx configuration text is never "
        r"interpreted by Tidegate")
    assert "NACK" not in s.dataplane.log()


def test_without_the_flag_nginx_spellings_are_not_read(stack):
    b = stack.backend("app")
    ing = ingress("app", [rule("app.example.com", path("/v[0-9]+/", "svc-app"))], annotations={
        "nginx.ingress.kubernetes.io/use-regex": "true"})
    stack.manifests.write("app.yaml", *service_with_backend("svc-app", b), ing)
    # A literal prefix "/v[0-9]+/", which no request path starts with.
    stack.wait_route("/v[0-9]+/", "app.example.com", lambda r: r.status == 200)
    assert stack.get("/v7/x", "app.example.com").status == 404


def _config(backend, route_extra: dict | None = None, upstream_extra: dict | None = None) -> dict:
    route = {"path": "/", "match": "Prefix", "upstream": "default/svc:80", "ingress": "default/a",
             **(route_extra or {})}
    upstream = {"name": "default/svc:80",
                "endpoints": [{"address": backend.host, "port": backend.port}],
                **(upstream_extra or {})}
    return {"virtual_hosts": [{"host": "direct.example.com", "routes": [route]}],
            "upstreams": [upstream]}


def test_data_plane_validates_policies_it_decodes(stack_factory):
    s = stack_factory()
    s.start_dataplane()
    b = s.backend("direct")
    cc = ControlClient(s.dataplane.socket_path)
    try:
        assert cc.hello()["type"] == "hello_reply"
        ok = _config(b, {"policy": {"read_timeout_ms": 3600000, "max_body_bytes": 1024},
                         "canary": {"upstream": "default/svc:80+c", "weight": 5}},
                     {"policy": {"load_balance": "ewma"}})
        ok["upstreams"].append({"name": "default/svc:80+c", "endpoints": []})
        assert cc.snapshot(10, ok) == {"type": "ack", "version": 10}
        wait_until(lambda: s.get("/", "direct.example.com").status == 200, 5, "route to serve")

        # (route extra, upstream extra, reason contains, refused while decoding): a message that
        # does not decode is NACKed as a bad message (version 0), one that decodes but does not
        # validate with its version.
        cases = {
            "unknown field": ({"policy": {"gzip": True}}, None, 'unknown field "gzip"', True),
            "out of range": ({"policy": {"next_upstream_tries": 0}}, None, "next_upstream_tries",
                             False),
            "canary to a missing upstream": ({"canary": {"upstream": "nope", "weight": 1}}, None,
                                             'canary: unknown upstream "nope"', False),
            "bad upstream policy": (None, {"policy": {"hash_by": "$nope"}}, "hash_by", False),
        }
        version = 11
        for name, (route_extra, upstream_extra, want, at_decode) in cases.items():
            ans = cc.snapshot(version, _config(b, route_extra, upstream_extra))
            assert ans["type"] == "nack", (name, ans)
            assert ans["version"] == (0 if at_decode else version), (name, ans)
            assert want in ans["reason"], (name, ans)
            version += 1
        # The accepted configuration still serves.
        assert s.get("/", "direct.example.com").status == 200
    finally:
        cc.close()
