"""Host-level annotations (issue 20): force-ssl-redirect, from-to-www-redirect and server-alias,
and the scheme a trusted proxy reports in X-Forwarded-Proto (what a TLS-terminating load balancer
in front of Tidegate sends). Each changes live, like every other route change."""

from __future__ import annotations

import pytest

from harness import (CertAuthority, header_values, https_port, ingress, path, request, rule,
                     service_with_backend, tls_request, tls_secret, wait_until, with_tls)


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return CertAuthority(tmp_path_factory.mktemp("certs"))


def trusted_stack(stack_factory):
    s = stack_factory(dataplane_args=["--trusted-proxies", "127.0.0.1/32"])
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    return s


def served(stack, host: str, status: int = 200, target: str = "/") -> None:
    wait_until(lambda: request(stack.port, "GET", target, host).status == status, 10,
               f"{host} to answer {status}")


def forced_and_plain(stack):
    """forced.example.com with force-ssl-redirect and plain.example.com without, on one backend;
    returns (backend, forced Ingress, plain Ingress) once both are served."""
    b = stack.backend("app")
    forced = ingress("forced", [rule("forced.example.com", path("/", "svc-app"))],
                     annotations={"tidegate.io/force-ssl-redirect": "true"})
    plain = ingress("plain", [rule("plain.example.com", path("/", "svc-app"))])
    stack.manifests.write("app.yaml", *service_with_backend("svc-app", b), forced, plain)
    served(stack, "plain.example.com")
    return b, forced, plain


def test_force_ssl_redirect_without_tls_and_behind_a_tls_terminating_proxy(stack_factory):
    s = trusted_stack(stack_factory)
    b, forced, plain = forced_and_plain(s)
    before = b.count
    # No TLS section, yet plain HTTP is redirected (ingress-nginx's force-ssl-redirect).
    r = request(s.port, "GET", "/a/b?c=1", "forced.example.com")
    assert r.status == 308, (r.status, r.body)
    assert r.header("Location") == "https://forced.example.com/a/b?c=1"
    assert b.count == before
    # From a trusted proxy that terminated TLS: the client's scheme was https, so no redirect,
    # and the backend hears https.
    r = request(s.port, "GET", "/lb", "forced.example.com", headers={"X-Forwarded-Proto": "https"})
    assert r.status == 200, (r.status, r.body)
    assert header_values(r.json(), "X-Forwarded-Proto") == ["https"]
    # The proxy saying http: redirected.
    r = request(s.port, "GET", "/lb", "forced.example.com", headers={"X-Forwarded-Proto": "http"})
    assert r.status == 308
    # A host without the annotation: proxied, and the backend hears what the trusted proxy said.
    r = request(s.port, "GET", "/", "plain.example.com", headers={"X-Forwarded-Proto": "https"})
    assert r.status == 200 and header_values(r.json(), "X-Forwarded-Proto") == ["https"]
    # Removed live: proxied again.
    forced["metadata"]["annotations"] = {}
    s.manifests.write("app.yaml", *service_with_backend("svc-app", b), forced, plain)
    served(s, "forced.example.com")


def test_x_forwarded_proto_is_ours_unless_the_peer_is_trusted(stack):
    forced_and_plain(stack)
    # Any client could send the header: without --trusted-proxies it changes nothing.
    r = request(stack.port, "GET", "/", "forced.example.com",
                headers={"X-Forwarded-Proto": "https"})
    assert r.status == 308
    r = request(stack.port, "GET", "/", "plain.example.com",
                headers={"X-Forwarded-Proto": "https"})
    assert r.status == 200 and header_values(r.json(), "X-Forwarded-Proto") == ["http"]


def test_from_to_www_redirect_both_ways(stack, ca):
    b = stack.backend("app")
    cert = ca.issue("www", ["www.shop.example.com", "shop.example.com", "blog.example.com",
                            "www.blog.example.com"], "ec")
    # A www host: its bare name redirects to it. A bare host: its www name redirects to it.
    shop = with_tls(ingress("shop", [rule("www.shop.example.com", path("/", "svc-app"))],
                            annotations={"tidegate.io/from-to-www-redirect": "true",
                                         "tidegate.io/ssl-redirect": "false"}),
                    (["www.shop.example.com", "shop.example.com"], "www-tls"))
    blog = ingress("blog", [rule("blog.example.com", path("/", "svc-app"))],
                   annotations={"tidegate.io/from-to-www-redirect": "true"})
    # A www name that is a host of its own keeps its routes.
    own = ingress("own", [rule("www.own.example.com", path("/", "svc-app"))])
    ownbare = ingress("ownbare", [rule("own.example.com", path("/", "svc-app"))],
                      annotations={"tidegate.io/from-to-www-redirect": "true"})
    stack.manifests.write("www.yaml", *service_with_backend("svc-app", b),
                          tls_secret("www-tls", cert.cert_pem, cert.key_pem), shop, blog, own,
                          ownbare)
    served(stack, "shop.example.com", 308)
    before = b.count
    r = request(stack.port, "GET", "/cart?id=7", "shop.example.com")
    assert r.status == 308 and r.header("Location") == "http://www.shop.example.com/cart?id=7"
    # The port the client named is kept.
    r = request(stack.port, "GET", "/p", f"shop.example.com:{stack.port}")
    assert r.header("Location") == f"http://www.shop.example.com:{stack.port}/p"
    # The other way round.
    r = request(stack.port, "POST", "/post", "www.blog.example.com", body=b"x")
    assert r.status == 308 and r.header("Location") == "http://blog.example.com/post"
    assert b.count == before  # redirects never reach the backend
    # Over HTTPS the scheme stays https.
    port = https_port(stack.dataplane)
    r, _ = tls_request(port, "shop.example.com", target="/s")
    assert r.status == 308 and r.header("Location") == "https://www.shop.example.com/s"
    r, _ = tls_request(port, "www.shop.example.com", target="/s")
    assert r.status == 200 and r.json()["path"] == "/s"
    # The hosts themselves are served.
    assert request(stack.port, "GET", "/", "www.shop.example.com").status == 200
    assert request(stack.port, "GET", "/", "blog.example.com").status == 200
    # A host of its own is not redirected (the Ingress gets a warning).
    r = request(stack.port, "GET", "/", "www.own.example.com")
    assert r.status == 200
    # Turned off live: the bare name is a host nobody routes.
    blog["metadata"]["annotations"] = {}
    stack.manifests.write("www.yaml", *service_with_backend("svc-app", b),
                          tls_secret("www-tls", cert.cert_pem, cert.key_pem), shop, blog, own,
                          ownbare)
    served(stack, "www.blog.example.com", 404)


def test_server_alias_shares_routes_and_certificate(stack, ca):
    a, other = stack.backend("a"), stack.backend("other")
    cert = ca.issue("alias", ["main.example.com", "alias.example.com"], "ec")
    main = with_tls(ingress("main", [rule("main.example.com", path("/", "svc-a"))],
                            annotations={"tidegate.io/server-alias":
                                         "alias.example.com, *.alias.example.com,"
                                         "taken.example.com"}),
                    (["main.example.com"], "main-tls"))
    # A second Ingress for the same host: the alias gets its routes too (an alias names the
    # host, as nginx's server_name names the server).
    api = ingress("api", [rule("main.example.com", path("/api", "svc-other"))])
    taken = ingress("taken", [rule("taken.example.com", path("/", "svc-other"))])
    stack.manifests.write("alias.yaml", *service_with_backend("svc-a", a),
                          *service_with_backend("svc-other", other),
                          tls_secret("main-tls", cert.cert_pem, cert.key_pem), main, api, taken)
    port = https_port(stack.dataplane)
    wait_until(lambda: tls_request(port, "alias.example.com")[0].status == 200, 10, "alias")
    for host in ("main.example.com", "alias.example.com", "x.alias.example.com"):
        r, _ = tls_request(port, host, target="/p")
        assert r.status == 200 and r.header("X-Backend") == "a", (host, r.status)
        r, _ = tls_request(port, host, target="/api/v")
        assert r.status == 200 and r.header("X-Backend") == "other", (host, r.status)
    # The alias is served the host's certificate (SNI), and the host's ssl-redirect.
    _, der = tls_request(port, "alias.example.com")
    assert der == cert.der
    r = request(stack.port, "GET", "/q", "alias.example.com")
    assert r.status == 308 and r.header("Location") == "https://alias.example.com/q"
    # An alias that is a host of its own keeps its own routes.
    r = request(stack.port, "GET", "/", "taken.example.com")
    assert r.status == 200 and r.header("X-Backend") == "other"
    # Removed live.
    main["metadata"]["annotations"] = {}
    stack.manifests.write("alias.yaml", *service_with_backend("svc-a", a),
                          *service_with_backend("svc-other", other),
                          tls_secret("main-tls", cert.cert_pem, cert.key_pem), main, api, taken)
    served(stack, "alias.example.com", 404)


def test_invalid_host_annotations_change_nothing_else(stack):
    b = stack.backend("app")
    bad = ingress("bad", [rule("bad.example.com", path("/", "svc-app"))],
                  annotations={"tidegate.io/server-alias": "ok.example.com,bad_name",
                               "tidegate.io/force-ssl-redirect": "yes",
                               "tidegate.io/from-to-www-redirect": "maybe"})
    stack.manifests.write("bad.yaml", *service_with_backend("svc-app", b), bad)
    served(stack, "bad.example.com")
    assert request(stack.port, "GET", "/", "ok.example.com").status == 404
    assert request(stack.port, "GET", "/", "www.bad.example.com").status == 404
    log = stack.controller.log()
    for what in ("tidegate.io/server-alias: invalid value", "tidegate.io/force-ssl-redirect: "
                 "invalid value", "tidegate.io/from-to-www-redirect: invalid value"):
        assert what in log, log[-3000:]
