"""The response cache (docs/annotations.md, "Response cache"): tidegate.io/enable-cache through
the real data plane, over HTTP/1.1 and HTTP/2: hits without the backend, Age, HEAD and 304 from
the cache; what is never stored (Set-Cookie, private, no-store, no-cache, no freshness,
Vary: *, too large) and what is never looked up (Authorization, a reload); expiry; Vary; the
purge when the Ingress changes; concurrent misses collapsed into one backend request."""

from __future__ import annotations

import gzip
import threading
import time

import pytest

import harness
from harness import ingress, path, rule, wait_until
from test_substitution import Site, backend_objects

pytestmark = pytest.mark.usefixtures("over_both_protocols")

HOST = "cache.example.com"
PAGE = b"<html>" + b"<p>cached page</p>\n" * 200 + b"</html>"


def backend_hits(site: Site, target: str) -> int:
    return sum(1 for _, t, _ in site.requests() if t == target)


def write_site(stack, site, annotations=None):
    stack.manifests.write(
        "site.yaml", *backend_objects("site", site.host, site.port),
        ingress("cache", [rule(HOST, path("/", "site"))],
                annotations={"tidegate.io/enable-cache": "true", **(annotations or {})}))


@pytest.fixture
def cached(stack_factory):
    s = stack_factory(workers=1)  # one shard: every request meets the same cache
    s.dataplane.argv += ["--cache-max-item-kb", "64"]
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    site = Site()
    fresh = {"Cache_Control": "public, max-age=60"}
    site.page("/ready", b"ok")
    site.page("/page", PAGE, ETag='"v1"', Last_Modified="Sun, 06 Nov 1994 08:49:37 GMT", **fresh)
    site.page("/s-maxage", b"shared", Cache_Control="max-age=0, s-maxage=60")
    site.page("/expires", b"expires", Expires="Fri, 01 Jan 2100 00:00:00 GMT",
              Date="Thu, 03 Dec 2026 00:00:00 GMT")
    site.page("/short", b"short", Cache_Control="max-age=1")
    site.page("/cookie", b"cookie", Set_Cookie="s=1", **fresh)
    site.page("/private", b"private", Cache_Control="private, max-age=60")
    site.page("/no-store", b"no-store", Cache_Control="no-store")
    site.page("/no-cache", b"no-cache", Cache_Control="no-cache, max-age=60")
    site.page("/silent", b"says nothing about freshness")
    site.page("/vary-star", b"vary star", Vary="*", **fresh)
    site.page("/large", b"x" * (100 * 1024), **fresh)
    site.page("/lang", b"by language", Vary="Accept-Language", **fresh)
    site.page("/slow", b"slow page", **fresh)
    site.page("/error", b"oops", status=500, **fresh)
    site.delay("/slow", 1.0)
    write_site(s, site)
    wait_until(lambda: s.get("/ready", host=HOST).status == 200, 10, "the route")
    s.site = site
    yield s
    site.stop()


def test_a_fresh_answer_is_served_from_the_cache(cached):
    r1 = cached.get("/page", host=HOST)
    assert r1.status == 200 and r1.body == PAGE and r1.header("X-Cache") == "MISS"
    r2 = cached.get("/page", host=HOST)
    assert r2.status == 200 and r2.body == PAGE and r2.header("X-Cache") == "HIT"
    assert r2.header("ETag") == '"v1"' and r2.header("Content-Length") == str(len(PAGE))
    assert r2.header("Age") is not None and int(r2.header("Age")) <= 2
    assert backend_hits(cached.site, "/page") == 1
    # HEAD from the GET's entry; conditional requests answered from its validators.
    r = harness.proto_request(cached.port, "HEAD", "/page", HOST)
    assert r.status == 200 and r.header("X-Cache") == "HIT" and r.body == b""
    assert r.header("Content-Length") == str(len(PAGE))
    r = cached.get("/page", host=HOST, headers={"If-None-Match": '"v1"'})
    assert r.status == 304 and r.header("X-Cache") == "HIT" and r.body == b""
    r = cached.get("/page", host=HOST,
                   headers={"If-Modified-Since": "Sun, 06 Nov 1994 08:49:37 GMT"})
    assert r.status == 304
    assert backend_hits(cached.site, "/page") == 1
    # s-maxage and Expires give freshness too.
    for target in ("/s-maxage", "/expires"):
        assert cached.get(target, host=HOST).header("X-Cache") == "MISS", target
        assert cached.get(target, host=HOST).header("X-Cache") == "HIT", target
    # The query is part of the key, and so is the Host's port (a backend may build links from it).
    assert cached.get("/page?a=1", host=HOST).header("X-Cache") == "MISS"
    assert cached.get("/page", host=HOST + ":8080").header("X-Cache") == "MISS"


@pytest.mark.parametrize("target", ["/cookie", "/private", "/no-store", "/no-cache", "/silent",
                                    "/vary-star", "/large", "/error"])
def test_what_is_never_stored(cached, target):
    for _ in range(2):
        r = cached.get(target, host=HOST)
        assert r.header("X-Cache") == "MISS", (target, r.headers)
    assert backend_hits(cached.site, target) == 2
    if target == "/large":
        assert len(r.body) == 100 * 1024


def test_requests_that_bypass_the_cache(cached):
    cached.get("/page", host=HOST)
    for headers in ({"Authorization": "Bearer x"}, {"Cache-Control": "no-cache"},
                    {"Cache-Control": "max-age=0"}, {"Pragma": "no-cache"},
                    {"Range": "bytes=0-1"}):
        before = backend_hits(cached.site, "/page")
        r = cached.get("/page", host=HOST, headers=headers)
        assert r.header("X-Cache") == "BYPASS", headers
        assert backend_hits(cached.site, "/page") == before + 1, headers
    assert cached.get("/page", host=HOST).header("X-Cache") == "HIT"


def test_a_successful_unsafe_request_invalidates(cached):
    cached.get("/page", host=HOST)
    assert cached.get("/page", host=HOST).header("X-Cache") == "HIT"
    r = harness.proto_request(cached.port, "POST", "/page", HOST, body=b"x=1")
    assert r.status == 200 and r.header("X-Cache") == "BYPASS"
    assert cached.get("/page", host=HOST).header("X-Cache") == "MISS"


def test_expiry_and_vary(cached):
    assert cached.get("/short", host=HOST).header("X-Cache") == "MISS"
    assert cached.get("/short", host=HOST).header("X-Cache") == "HIT"
    time.sleep(1.2)
    assert cached.get("/short", host=HOST).header("X-Cache") == "MISS"
    en = {"Accept-Language": "en"}
    assert cached.get("/lang", host=HOST, headers=en).header("X-Cache") == "MISS"
    assert cached.get("/lang", host=HOST, headers=en).header("X-Cache") == "HIT"
    de = {"Accept-Language": "de"}
    assert cached.get("/lang", host=HOST, headers=de).header("X-Cache") == "MISS"
    assert cached.get("/lang", host=HOST, headers=de).header("X-Cache") == "HIT"


def test_a_change_of_the_ingress_purges_its_entries(cached):
    cached.get("/page", host=HOST)
    assert cached.get("/page", host=HOST).header("X-Cache") == "HIT"
    write_site(cached, cached.site, {"tidegate.io/custom-headers": "X-Version: 2"})
    wait_until(lambda: cached.get("/ready", host=HOST).header("X-Version") == "2", 10,
               "the change")
    r = cached.get("/page", host=HOST)
    assert r.header("X-Cache") == "MISS" and r.header("X-Version") == "2"
    assert cached.get("/page", host=HOST).header("X-Cache") == "HIT"
    # A backend setting (load balancing is the upstream's, not the route's): purged too.
    write_site(cached, cached.site, {"tidegate.io/custom-headers": "X-Version: 2",
                                     "tidegate.io/load-balance": "ewma"})
    wait_until(lambda: cached.get("/page", host=HOST).header("X-Cache") == "MISS", 10,
               "the purge after the backend's change")
    assert cached.get("/page", host=HOST).header("X-Cache") == "HIT"
    # A change elsewhere keeps the entries.
    cached.manifests.write("other.yaml", ingress("other", [rule("other.example.com",
                                                                path("/", "site"))]))
    wait_until(lambda: cached.get("/page", host="other.example.com").status == 200, 10,
               "the other Ingress")
    assert cached.get("/page", host=HOST).header("X-Cache") == "HIT"


def test_concurrent_misses_ask_the_backend_once(cached):
    results = []
    lock = threading.Lock()

    def fetch():
        r = cached.get("/slow", host=HOST, timeout=10)
        with lock:
            results.append(r)

    threads = [threading.Thread(target=fetch) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status for r in results] == [200] * 5
    assert all(r.body == b"slow page" for r in results)
    assert sorted(r.header("X-Cache") for r in results) == ["HIT"] * 4 + ["MISS"]
    assert backend_hits(cached.site, "/slow") == 1


def test_compressed_variants_are_kept_apart(stack_factory):
    s = stack_factory(workers=1)
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    site = Site()
    try:
        site.page("/page", PAGE, Cache_Control="max-age=60")
        write_site(s, site, {"tidegate.io/enable-compression": "true"})
        wait_until(lambda: s.get("/page", host=HOST).status == 200, 10, "the route")
        gz = {"Accept-Encoding": "gzip"}
        assert s.get("/page", host=HOST, headers=gz).header("X-Cache") == "MISS"
        r = s.get("/page", host=HOST, headers=gz)
        assert r.header("X-Cache") == "HIT" and r.header("Content-Encoding") == "gzip"
        assert gzip.decompress(r.body) == PAGE
        # The identity answer is another variant (Vary: Accept-Encoding), never the gzip one.
        r = s.get("/page", host=HOST)
        assert r.header("Content-Encoding") is None and r.body == PAGE
    finally:
        site.stop()
