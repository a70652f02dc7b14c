"""Routing end to end: manifests in a folder → controller → data plane → the right backend."""

from __future__ import annotations

import pytest

from harness import (backend_ref, endpoint_slice, ingress, path, rule, service,
                     service_with_backend)


@pytest.fixture
def routed(stack):
    """Five backends behind five Services; two Ingresses (shop, blog) that both add rules for
    shop.example.com; a wildcard host; no default backend yet."""
    b = {n: stack.backend(n) for n in ("a", "b", "c", "d", "e")}
    # Services in a JSON List (the loader reads *.json too), slices in YAML.
    stack.manifests.write("services.json", *[service(f"svc-{n}") for n in b])
    stack.manifests.write(
        "slices.yaml",
        *[endpoint_slice(f"svc-{n}-1", f"svc-{n}", [x.host], x.port) for n, x in b.items()])
    stack.manifests.write("shop.yaml", ingress("shop", [
        rule("shop.example.com",
             path("/api", "svc-a"),
             path("/api/admin", "svc-c"),
             path("/exact", "svc-b", "Exact")),
    ]))
    stack.manifests.write("blog.yaml", ingress("blog", [
        rule("blog.example.com", path("/", "svc-c")),
        # A second Ingress adding a path to a host the first one already has.
        rule("shop.example.com", path("/cart", "svc-d")),
        rule("*.wild.example.com", path("/", "svc-e")),
    ]))
    stack.wait_backend("/", "blog.example.com", "c")
    stack.wait_backend("/cart", "shop.example.com", "d")
    return stack


def routes_to(stack, host, target):
    r = stack.get(target, host)
    return r.header("X-Backend") if r.status == 200 else r.status


def test_prefix_and_exact_paths(routed):
    s = routed
    cases = {
        "/api": "a",
        "/api/": "a",
        "/api/v1/items": "a",
        "/api?x=1": "a",
        "/apiv2": 404,  # Prefix matches whole path elements only
        "/api/admin": "c",  # the longest prefix wins
        "/api/admin/users": "c",
        "/api/administrator": "a",
        "/exact": "b",
        "/exact?q=1": "b",  # the query string is not part of the path
        "/exact/": 404,  # Exact means exact
        "/exact/sub": 404,
        "/": 404,
    }
    got = {t: routes_to(s, "shop.example.com", t) for t in cases}
    assert got == cases


def test_backend_sees_original_target(routed):
    r = routed.get("/api/v1/items?q=1&r=%20x", "shop.example.com")
    assert r.status == 200
    assert r.json()["path"] == "/api/v1/items?q=1&r=%20x"
    assert r.json()["method"] == "GET"


def test_host_matching_is_case_insensitive_and_ignores_port(routed):
    assert routes_to(routed, "SHOP.Example.COM", "/api") == "a"
    assert routes_to(routed, "shop.example.com:80", "/api") == "a"
    assert routes_to(routed, "shop.example.com.", "/api") == "a"


def test_absolute_form_target_uses_its_host(routed):
    r = routed.get("http://shop.example.com/exact", "blog.example.com")
    assert r.status == 200 and r.header("X-Backend") == "b"


def test_unknown_host_and_path_give_404(routed):
    r = routed.get("/", "nothing.example.com")
    assert r.status == 404
    assert r.text == "no route\n"
    assert r.header("Content-Type").startswith("text/plain")


def test_rules_for_one_host_from_two_ingresses_merge(routed):
    assert routes_to(routed, "shop.example.com", "/cart") == "d"
    assert routes_to(routed, "shop.example.com", "/cart/items/1") == "d"
    assert routes_to(routed, "shop.example.com", "/api") == "a"
    assert routes_to(routed, "blog.example.com", "/anything") == "c"


def test_wildcard_host(routed):
    assert routes_to(routed, "foo.wild.example.com", "/x") == "e"
    assert routes_to(routed, "BAR.wild.example.com", "/") == "e"
    # A wildcard stands for exactly one label.
    assert routes_to(routed, "wild.example.com", "/") == 404
    assert routes_to(routed, "a.b.wild.example.com", "/") == 404


def test_default_backend_takes_unmatched_requests(routed):
    s = routed
    default = s.backend("default")
    s.manifests.write("default.yaml", *service_with_backend("svc-default", default),
                      ingress("fallback", default_backend=backend_ref("svc-default")))
    s.wait_backend("/", "nothing.example.com", "default")
    assert routes_to(s, "nothing.example.com", "/some/path") == "default"
    assert routes_to(s, "shop.example.com", "/apiv2") == "default"  # known host, no path
    assert routes_to(s, "a.b.wild.example.com", "/") == "default"
    # Rules still win over the default backend.
    assert routes_to(s, "shop.example.com", "/api") == "a"
    assert routes_to(s, "foo.wild.example.com", "/") == "e"


def test_catch_all_rule_without_host(routed):
    s = routed
    s.manifests.write("any.yaml", ingress("any-host", [rule(None, path("/any", "svc-b"))]))
    s.wait_backend("/any", "whatever.example.org", "b")
    assert routes_to(s, "127.0.0.1", "/any/x") == "b"
    # A host with its own virtual host does not fall through to the catch-all's paths.
    assert routes_to(s, "shop.example.com", "/any") == 404


def test_ingress_of_another_class_is_ignored(routed):
    s = routed
    s.manifests.write("other.yaml", ingress("other", [rule("other.example.com", path("/", "svc-a"))],
                                             ingress_class="nginx"))
    # Written after it, so once "late" routes the controller has read "other.yaml" too.
    s.manifests.write("late.yaml", ingress("late", [rule("late.example.com", path("/", "svc-b"))]))
    s.wait_backend("/", "late.example.com", "b")
    assert routes_to(s, "other.example.com", "/") == 404


def test_route_changes_and_removal_follow_the_folder(routed):
    s = routed
    # Repoint blog.example.com from svc-c to svc-a by rewriting the Ingress.
    s.manifests.write("blog.yaml", ingress("blog", [
        rule("blog.example.com", path("/", "svc-a")),
        rule("shop.example.com", path("/cart", "svc-d")),
    ]))
    s.wait_backend("/", "blog.example.com", "a")
    assert routes_to(s, "foo.wild.example.com", "/") == 404  # the wildcard rule left with it
    s.manifests.remove("blog.yaml")
    s.wait_status("/", "blog.example.com", 404)
    assert routes_to(s, "shop.example.com", "/cart") == 404
    assert routes_to(s, "shop.example.com", "/api") == "a"


def test_two_endpoints_share_the_load(stack):
    # One slice, one port for all its endpoints (as for pods): two loopback addresses.
    x = stack.backend("x")
    y = stack.backend("y", host="127.0.0.2", port=x.port)
    stack.manifests.write("lb.yaml", service("svc-lb"),
                          endpoint_slice("svc-lb-1", "svc-lb", [x.host, y.host], x.port),
                          ingress("lb", [rule("lb.example.com", path("/", "svc-lb"))]))
    stack.wait_backend("/", "lb.example.com", "x")
    seen: dict[str, int] = {}
    for _ in range(40):
        r = stack.get("/", "lb.example.com")
        assert r.status == 200
        seen[r.header("X-Backend")] = seen.get(r.header("X-Backend"), 0) + 1
    assert set(seen) == {"x", "y"}, seen
    assert min(seen.values()) >= 10, seen


def test_ingress_class_flag_selects_the_class(stack_factory):
    s = stack_factory(controller_args=["--ingress-class", "custom"]).start_ready()
    b = s.backend("b")
    s.manifests.write("app.yaml", *service_with_backend("svc-b", b),
                      ingress("mine", [rule("mine.example.com", path("/", "svc-b"))],
                              ingress_class="custom"),
                      ingress("default-class", [rule("tg.example.com", path("/", "svc-b"))]))
    s.wait_backend("/", "mine.example.com", "b")
    assert routes_to(s, "tg.example.com", "/") == 404


def test_default_ingress_class_takes_ingresses_without_class(stack):
    b = stack.backend("b")
    stack.manifests.write("app.yaml", *service_with_backend("svc-b", b),
                          ingress("classless", [rule("classless.example.com", path("/", "svc-b"))],
                                  ingress_class=None))
    stack.manifests.write("marker.yaml", ingress("marker", [rule("m.example.com",
                                                                 path("/", "svc-b"))]))
    stack.wait_backend("/", "m.example.com", "b")
    assert routes_to(stack, "classless.example.com", "/") == 404  # no default class yet
    stack.manifests.write("class.yaml", {
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": "tidegate",
                     "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
        "spec": {"controller": "tidegate.io/ingress-controller"}})
    stack.wait_backend("/", "classless.example.com", "b")
