// server/route_filters and the weighted backend choice (server/canary.h): the Gateway API's
// RequestRedirect Location, URLRewrite paths, header modifiers and backendRef weights.

#include "server/route_filters.h"

#include <map>

#include <gtest/gtest.h>
#include <boost/beast/http/fields.hpp>

#include "server/canary.h"

namespace tidegate::dataplane::server {
namespace {

using model::PathModifier;
using model::RequestRedirect;
using Kind = PathModifier::Kind;

TEST(RouteFilters, ReplacePrefix) {
  struct Case {
    std::string path;
    std::string route_path;  // a Prefix route's path
    std::string value;
    std::string want;
  };
  // The Gateway API's HTTPPathModifier table, and its edges.
  const std::vector<Case> cases = {
      {"/foo/bar", "/foo", "/xyz", "/xyz/bar"},
      {"/foo/bar", "/foo", "/xyz/", "/xyz/bar"},
      {"/foo/bar", "/foo/", "/xyz", "/xyz/bar"},
      {"/foo/bar", "/foo/", "/xyz/", "/xyz/bar"},
      {"/foo", "/foo", "/xyz", "/xyz"},
      {"/foo/", "/foo", "/xyz", "/xyz/"},
      {"/foo/bar", "/foo", "/", "/bar"},
      {"/foo", "/foo", "/", "/"},
      {"/foo/", "/foo", "/", "/"},
      {"/bar", "/", "/xyz", "/xyz/bar"},
      {"/", "/", "/xyz", "/xyz/"},
  };
  for (const auto& c : cases) {
    std::size_t n = c.route_path.size();
    while (n > 0 && c.route_path[n - 1] == '/') --n;
    EXPECT_EQ(replace_path_prefix(c.path, n, c.value), c.want)
        << c.path << " with " << c.route_path << " -> " << c.value;
  }
  EXPECT_EQ(modify_path(PathModifier{Kind::kFull, "/one"}, "/foo/bar", 4), "/one");
  EXPECT_EQ(modify_path(PathModifier{Kind::kPrefix, "/one"}, "/foo/bar", 4), "/one/bar");
}

TEST(RouteFilters, RedirectLocation) {
  struct Case {
    const char* name;
    RequestRedirect redirect;
    bool https;
    std::string host;
    std::string want;
  };
  const PathModifier full{Kind::kFull, "/new"};
  const PathModifier prefix{Kind::kPrefix, "/v2"};
  auto r = [](std::string scheme, std::string host = "", std::optional<PathModifier> path = {},
              uint16_t port = 0, uint16_t code = 302) {
    return RequestRedirect{std::move(scheme), std::move(host), std::move(path), port, code};
  };
  const std::vector<Case> cases = {
      {"nothing changes but the code", r(""), false, "a.com", "http://a.com/v1/x?q=1"},
      {"scheme to https drops port 80", r("https"), false, "a.com", "https://a.com/v1/x?q=1"},
      {"scheme to https from a named port", r("https"), false, "a.com:8080",
       "https://a.com/v1/x?q=1"},
      {"scheme to http", r("http"), true, "a.com", "http://a.com/v1/x?q=1"},
      {"hostname keeps the client's port", r("", "b.com"), false, "a.com:8080",
       "http://b.com:8080/v1/x?q=1"},
      {"hostname over TLS", r("", "b.com"), true, "a.com", "https://b.com/v1/x?q=1"},
      {"port", r("", "", {}, 8443), false, "a.com", "http://a.com:8443/v1/x?q=1"},
      {"well-known port of the new scheme", r("https", "", {}, 443), false, "a.com",
       "https://a.com/v1/x?q=1"},
      {"port 80 on https is named", r("https", "", {}, 80), false, "a.com",
       "https://a.com:80/v1/x?q=1"},
      {"full path", r("", "", full), false, "a.com", "http://a.com/new?q=1"},
      {"prefix path", r("", "", prefix), false, "a.com", "http://a.com/v2/x?q=1"},
      {"IPv6 host with port", r("", "", {}, 0), false, "[::1]:8080", "http://[::1]:8080/v1/x?q=1"},
      {"everything", r("https", "c.com", full, 9443, 301), false, "a.com:81",
       "https://c.com:9443/new?q=1"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(redirect_location(c.redirect, c.https, c.host, "/v1/x", "q=1", 3), c.want) << c.name;
  }
  EXPECT_EQ(redirect_location(r(""), false, "a.com", "/p", "", 0), "http://a.com/p");
}

TEST(RouteFilters, HeaderModifierRemovesThenSetsThenAdds) {
  boost::beast::http::request_header<> req;
  req.insert("X-Keep", "1");
  req.insert("X-Set", "old1");
  req.insert("x-set", "old2");
  req.insert("X-Gone", "1");
  req.insert("X-Add", "first");
  apply_header_modifier(
      model::HeaderModifier{
          {{"X-Set", "new"}, {"X-Fresh", "f"}}, {{"X-Add", "second"}}, {"x-gone", "X-Absent"}},
      req);
  std::multimap<std::string, std::string> got;
  for (const auto& f : req) got.emplace(std::string(f.name_string()), std::string(f.value()));
  EXPECT_EQ(got, (std::multimap<std::string, std::string>{{"X-Keep", "1"},
                                                          {"X-Set", "new"},
                                                          {"X-Fresh", "f"},
                                                          {"X-Add", "first"},
                                                          {"X-Add", "second"}}));
}

TEST(WeightedBackends, SharesFollowTheWeights) {
  const std::vector<model::WeightedBackend> backends = {
      {"a", 70}, {"zero", 0}, {"b", 20}, {"", 10}};
  std::map<std::string, int> counts;
  constexpr int kTurns = 10'000;
  for (uint64_t turn = 0; turn < kTurns; ++turn) {
    const model::WeightedBackend* b = pick_weighted_backend(backends, turn);
    ASSERT_NE(b, nullptr);
    ++counts[b->upstream];
  }
  EXPECT_EQ(counts.count("zero"), 0u);
  EXPECT_NEAR(counts["a"], 7'000, 50);
  EXPECT_NEAR(counts["b"], 2'000, 50);
  EXPECT_NEAR(counts[""], 1'000, 50);
  // Any short run is spread too: 20 turns give each backend its share within two.
  std::map<std::string, int> first;
  for (uint64_t turn = 500; turn < 520; ++turn)
    ++first[pick_weighted_backend(backends, turn)->upstream];
  EXPECT_NEAR(first["a"], 14, 2);
  EXPECT_NEAR(first["b"], 4, 2);
  // All weights zero: no backend.
  EXPECT_EQ(pick_weighted_backend({{"a", 0}, {"b", 0}}, 3), nullptr);
  // One backend takes everything.
  EXPECT_EQ(pick_weighted_backend({{"a", 1}}, 12345)->upstream, "a");
}

}  // namespace
}  // namespace tidegate::dataplane::server
