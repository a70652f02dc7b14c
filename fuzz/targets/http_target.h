#pragma once
// Fuzz target: a request target and Host header as a client sends them, through split_target and
// the router of a small fixed configuration.
//
// Input: the Host header value up to the first '\n', then the request target. Without a '\n' the
// whole input is the target and the Host header is "foo.com".
//
// Invariants:
//   - split_target gives a non-empty path without '?', viewing the target (or "/"), and a host
//     viewing the Host header or the target's authority;
//   - the route found is null or one of the config's routes; a default route is flagged as such;
//   - the router ignores what it documents as insignificant: a query string, the case of ASCII
//     letters in the host, a ":port" suffix and one trailing dot;
//   - for the exact host "foo.com" the route equals the one a reference matcher written from the
//     Ingress v1 rules in router/router.h picks.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <re2/re2.h>

#include "common.h"
#include "model/model.h"
#include "router/router.h"
#include "server/headers.h"

namespace tidegate::fuzz {

namespace detail {

inline model::Config http_target_config() {
  using model::PathMatch;
  auto r = [](PathMatch m, std::string path, std::string upstream) {
    return model::Route{std::move(path), m, std::move(upstream), "default/fuzz"};
  };
  model::Config c;
  c.virtual_hosts["foo.com"] = {
      "foo.com",
      {r(PathMatch::kExact, "/login", "exact-login"), r(PathMatch::kPrefix, "/api/", "prefix-api"),
       r(PathMatch::kPrefix, "/api/v1", "prefix-api-v1"), r(PathMatch::kExact, "/api", "exact-api"),
       r(PathMatch::kRegex, "/v[0-9]+/items", "regex-items"),
       r(PathMatch::kRegex, "/files/.*\\.png$", "regex-png"),
       r(PathMatch::kPrefix, "/a/b", "prefix-ab"), r(PathMatch::kExact, "/", "exact-root")}};
  c.virtual_hosts["*.foo.com"] = {"*.foo.com", {r(PathMatch::kPrefix, "/w", "wildcard-w")}};
  c.virtual_hosts["*"] = {"*", {r(PathMatch::kPrefix, "/any", "any")}};
  c.virtual_hosts["10.0.0.1"] = {"10.0.0.1", {r(PathMatch::kExact, "/ip", "ip")}};
  c.default_route = r(PathMatch::kPrefix, "/", "default");
  for (const auto& [_, vh] : c.virtual_hosts) {
    for (const auto& route : vh.routes) c.upstreams[route.upstream] = {route.upstream, {}};
  }
  c.upstreams["default"] = {"default", {}};
  return c;
}

struct HttpTargetFixture {
  model::Config config = http_target_config();
  std::unique_ptr<const dataplane::router::Router> router;
  std::vector<model::Route> foo_routes;  // foo.com's routes in precedence order
  HttpTargetFixture() {
    std::string error;
    router = dataplane::router::Router::build(config, &error);
    foo_routes = config.virtual_hosts.at("foo.com").routes;
    model::sort_routes(foo_routes);
  }
};

inline const HttpTargetFixture& http_target_fixture() {
  static const HttpTargetFixture fixture;
  return fixture;
}

inline bool within(std::string_view inner, std::string_view outer) {
  return inner.data() >= outer.data() && inner.data() + inner.size() <= outer.data() + outer.size();
}

// Ingress v1 path matching, written from the rules in router/router.h.
inline bool reference_path_match(const model::Route& r, std::string_view path) {
  switch (r.match) {
    case model::PathMatch::kExact:
      return path == r.path;
    case model::PathMatch::kPrefix: {
      std::string_view p = r.path;
      while (!p.empty() && p.back() == '/') p.remove_suffix(1);
      if (p.empty()) return true;
      return path == p || (path.starts_with(p) && path[p.size()] == '/');
    }
    case model::PathMatch::kRegex: {
      RE2 re(r.path);
      return re.ok() && re.Match(path, 0, path.size(), RE2::ANCHOR_START, nullptr, 0);
    }
  }
  return false;
}

inline std::string upstream_of(const dataplane::router::Match& m) {
  return m.route ? m.route->upstream : "404";
}

inline bool plain_host(std::string_view host) {
  if (host.empty()) return false;
  for (char c : host) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) return false;
  }
  return true;
}

}  // namespace detail

inline std::string run_http_target(const uint8_t* data, size_t size) {
  const detail::HttpTargetFixture& fx = detail::http_target_fixture();
  TIDEGATE_FUZZ_CHECK(fx.router != nullptr, "the fixed router did not build");
  const std::string_view input = as_text(data, size);
  std::string_view host_header = "foo.com";
  std::string_view target = input;
  if (auto nl = input.find('\n'); nl != std::string_view::npos) {
    host_header = input.substr(0, nl);
    target = input.substr(nl + 1);
  }

  const auto t = dataplane::server::split_target(target, host_header);
  TIDEGATE_FUZZ_CHECK(!t.path.empty(), "empty path for " << escape(target));
  TIDEGATE_FUZZ_CHECK(t.path.find('?') == std::string_view::npos,
                      "query left in path " << escape(t.path));
  TIDEGATE_FUZZ_CHECK(t.path == "/" || detail::within(t.path, target),
                      "path " << escape(t.path) << " not from the target");
  TIDEGATE_FUZZ_CHECK(detail::within(t.host, host_header) || detail::within(t.host, target),
                      "host " << escape(t.host) << " from nowhere");
  if (target.starts_with('/')) {
    TIDEGATE_FUZZ_CHECK(t.host.data() == host_header.data() && t.host == host_header,
                        "origin-form target did not use the Host header");
    TIDEGATE_FUZZ_CHECK(t.path == target.substr(0, target.find('?')) || t.path == "/",
                        "origin-form path " << escape(t.path) << " for " << escape(target));
  }

  const auto m = fx.router->match(t.host, t.path);
  if (m.route != nullptr) {
    TIDEGATE_FUZZ_CHECK(fx.config.upstreams.contains(m.route->upstream),
                        "route to an unknown upstream " << m.route->upstream);
  }
  TIDEGATE_FUZZ_CHECK(m.is_default == (m.route != nullptr && m.route->upstream == "default"),
                      "is_default is " << m.is_default << " for " << detail::upstream_of(m));
  TIDEGATE_FUZZ_CHECK(m.is_default || m.route == nullptr || !m.virtual_host.empty(),
                      "a virtual host's route without the virtual host");

  const std::string path(t.path);
  const std::string want = detail::upstream_of(m);
  auto check_same = [&](std::string_view host, std::string_view p, const char* what) {
    std::string got = detail::upstream_of(fx.router->match(host, p));
    return got == want ? std::string()
                       : std::string(what) + ": " + escape(host) + " " + escape(p) + " -> " + got +
                             ", but " + escape(t.host) + " " + escape(path) + " -> " + want;
  };
  if (auto e = check_same(t.host, path + "?q=1", "query"); !e.empty()) return e;
  std::string upper(t.host);
  for (char& c : upper) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  if (auto e = check_same(upper, path, "upper case"); !e.empty()) return e;
  if (detail::plain_host(t.host)) {
    if (auto e = check_same(std::string(t.host) + ":8080", path, "port"); !e.empty()) return e;
    if (!t.host.ends_with('.')) {
      if (auto e = check_same(std::string(t.host) + ".", path, "trailing dot"); !e.empty()) {
        return e;
      }
    }
  }

  if (t.host == "foo.com") {
    std::string ref = "default";
    for (const auto& r : fx.foo_routes) {
      if (detail::reference_path_match(r, t.path)) {
        ref = r.upstream;
        break;
      }
    }
    TIDEGATE_FUZZ_CHECK(want == ref, "router says " << want << ", reference says " << ref
                                                    << " for foo.com " << escape(t.path));
  }
  return {};
}

}  // namespace tidegate::fuzz
