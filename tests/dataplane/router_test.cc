#include "router/router.h"

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "model/model.h"

namespace tidegate::dataplane::router {
namespace {

using model::PathMatch;

// A route whose upstream names it ("Prefix /aaa"), so that tests can say which route won.
model::Route route(PathMatch match, const std::string& path) {
  model::Route r;
  r.path = path;
  r.match = match;
  r.upstream = std::string(model::to_string(match)) + " " + path;
  r.ingress = "default/test";
  return r;
}

model::Route exact(const std::string& path) { return route(PathMatch::kExact, path); }
model::Route prefix(const std::string& path) { return route(PathMatch::kPrefix, path); }
model::Route regex(const std::string& path) { return route(PathMatch::kRegex, path); }

model::Route default_route() {
  model::Route r = prefix("/");
  r.upstream = "default";
  return r;
}

// Routes are sorted the way the translator hands them over.
model::VirtualHost virtual_host(const std::string& host, std::vector<model::Route> routes) {
  model::sort_routes(routes);
  return {host, std::move(routes)};
}

model::Config config(std::vector<model::VirtualHost> hosts,
                     std::optional<model::Route> fallback = std::nullopt) {
  model::Config c;
  for (auto& vh : hosts) c.virtual_hosts[vh.host] = std::move(vh);
  c.default_route = std::move(fallback);
  return c;
}

std::unique_ptr<const Router> build_or_die(const model::Config& c) {
  std::string error;
  auto router = Router::build(c, &error);
  EXPECT_NE(router, nullptr) << error;
  EXPECT_EQ(error, "");
  return router;
}

// The upstream of the route that takes the request, or "404".
std::string resolve(const Router& router, std::string_view host, std::string_view path) {
  const Match m = router.match(host, path);
  return m.route == nullptr ? "404" : m.route->upstream;
}

// --- Path matching: the "Examples" table of the Kubernetes Ingress documentation -------------
// https://kubernetes.io/docs/concepts/services-networking/ingress/#examples, one row each.
// A "No" row answers 404 because these rows configure no default route, except the row that
// says "uses default backend".

struct PathCase {
  std::string name;
  std::vector<model::Route> routes;
  std::vector<std::string> request_paths;
  std::string want;  // upstream of the winning route, "default" or "404"
  bool with_default_route = false;
};

TEST(RouterPathTest, KubernetesIngressExamples) {
  const std::vector<PathCase> cases = {
      {"Prefix / matches all paths",
       {prefix("/")},
       {"/", "/foo", "/foo/", "/foo/bar", "/aaa/bbb/ccc", "/FOO"},
       "Prefix /"},
      {"Exact /foo matches /foo", {exact("/foo")}, {"/foo"}, "Exact /foo"},
      {"Exact /foo does not match /bar", {exact("/foo")}, {"/bar"}, "404"},
      {"Exact /foo does not match /foo/", {exact("/foo")}, {"/foo/"}, "404"},
      {"Exact /foo/ does not match /foo", {exact("/foo/")}, {"/foo"}, "404"},
      {"Prefix /foo matches /foo and /foo/", {prefix("/foo")}, {"/foo", "/foo/"}, "Prefix /foo"},
      {"Prefix /foo/ matches /foo and /foo/", {prefix("/foo/")}, {"/foo", "/foo/"}, "Prefix /foo/"},
      {"Prefix /aaa/bb does not match /aaa/bbb", {prefix("/aaa/bb")}, {"/aaa/bbb"}, "404"},
      {"Prefix /aaa/bbb matches /aaa/bbb", {prefix("/aaa/bbb")}, {"/aaa/bbb"}, "Prefix /aaa/bbb"},
      {"Prefix /aaa/bbb/ matches /aaa/bbb, ignores trailing slash",
       {prefix("/aaa/bbb/")},
       {"/aaa/bbb"},
       "Prefix /aaa/bbb/"},
      {"Prefix /aaa/bbb matches /aaa/bbb/, matches trailing slash",
       {prefix("/aaa/bbb")},
       {"/aaa/bbb/"},
       "Prefix /aaa/bbb"},
      {"Prefix /aaa/bbb matches /aaa/bbb/ccc, matches subpath",
       {prefix("/aaa/bbb")},
       {"/aaa/bbb/ccc"},
       "Prefix /aaa/bbb"},
      {"Prefix /aaa/bbb does not match /aaa/bbbxyz, not a string prefix",
       {prefix("/aaa/bbb")},
       {"/aaa/bbbxyz"},
       "404"},
      {"Prefix / and /aaa: /aaa/ccc matches /aaa",
       {prefix("/"), prefix("/aaa")},
       {"/aaa/ccc"},
       "Prefix /aaa"},
      {"Prefix /, /aaa and /aaa/bbb: /aaa/bbb matches /aaa/bbb",
       {prefix("/"), prefix("/aaa"), prefix("/aaa/bbb")},
       {"/aaa/bbb"},
       "Prefix /aaa/bbb"},
      {"Prefix /, /aaa and /aaa/bbb: /ccc matches /",
       {prefix("/"), prefix("/aaa"), prefix("/aaa/bbb")},
       {"/ccc"},
       "Prefix /"},
      {"Prefix /aaa does not match /ccc, uses default backend",
       {prefix("/aaa")},
       {"/ccc"},
       "default",
       true},
      {"Mixed Prefix /foo and Exact /foo: /foo prefers Exact",
       {prefix("/foo"), exact("/foo")},
       {"/foo"},
       "Exact /foo"},
  };

  for (const PathCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto fallback = c.with_default_route ? std::optional(default_route()) : std::nullopt;
    auto router = build_or_die(config({virtual_host("*", c.routes)}, fallback));
    ASSERT_NE(router, nullptr);
    for (const std::string& path : c.request_paths) {
      EXPECT_EQ(resolve(*router, "example.com", path), c.want) << "request path " << path;
    }
  }
}

TEST(RouterPathTest, MatchingIsCaseSensitive) {
  auto router = build_or_die(config({virtual_host("*", {exact("/Foo"), prefix("/bar")})}));
  EXPECT_EQ(resolve(*router, "a.com", "/Foo"), "Exact /Foo");
  EXPECT_EQ(resolve(*router, "a.com", "/foo"), "404");
  EXPECT_EQ(resolve(*router, "a.com", "/bar/x"), "Prefix /bar");
  EXPECT_EQ(resolve(*router, "a.com", "/BAR/x"), "404");
}

TEST(RouterPathTest, MixedExactAndPrefixOnOtherPaths) {
  auto router = build_or_die(config({virtual_host("*", {prefix("/foo"), exact("/foo")})}));
  EXPECT_EQ(resolve(*router, "a.com", "/foo"), "Exact /foo");
  EXPECT_EQ(resolve(*router, "a.com", "/foo/"), "Prefix /foo");
  EXPECT_EQ(resolve(*router, "a.com", "/foo/bar"), "Prefix /foo");
  EXPECT_EQ(resolve(*router, "a.com", "/foobar"), "404");
}

TEST(RouterPathTest, StopsAtQueryString) {
  auto router = build_or_die(config({virtual_host("*", {exact("/foo"), prefix("/bar")})}));
  EXPECT_EQ(resolve(*router, "a.com", "/foo?x=1"), "Exact /foo");
  EXPECT_EQ(resolve(*router, "a.com", "/foo?"), "Exact /foo");
  EXPECT_EQ(resolve(*router, "a.com", "/bar?next=/x"), "Prefix /bar");
  EXPECT_EQ(resolve(*router, "a.com", "/barx?/y"), "404");
}

TEST(RouterPathTest, RootPrefixTakesEmptyPath) {
  auto router = build_or_die(config({virtual_host("*", {prefix("/")})}));
  EXPECT_EQ(resolve(*router, "a.com", ""), "Prefix /");
  EXPECT_EQ(resolve(*router, "a.com", "?x=1"), "Prefix /");
  // "OPTIONS *" has no path to route.
  EXPECT_EQ(resolve(*router, "a.com", "*"), "404");
}

// --- Hosts -------------------------------------------------------------------------------------

TEST(RouterHostTest, ExactHost) {
  auto router = build_or_die(config({virtual_host("foo.com", {prefix("/")})}));
  const Match m = router->match("foo.com", "/x");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->upstream, "Prefix /");
  EXPECT_EQ(m.virtual_host, "foo.com");
  EXPECT_FALSE(m.is_default);
  EXPECT_EQ(resolve(*router, "bar.com", "/x"), "404");
  EXPECT_EQ(resolve(*router, "www.foo.com", "/x"), "404");
}

TEST(RouterHostTest, WildcardMatchesExactlyOneLabel) {
  auto router = build_or_die(config({virtual_host("*.foo.com", {prefix("/")})}));
  const Match m = router->match("bar.foo.com", "/");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.virtual_host, "*.foo.com");
  EXPECT_EQ(resolve(*router, "foo.com", "/"), "404");
  EXPECT_EQ(resolve(*router, "baz.bar.foo.com", "/"), "404");
  EXPECT_EQ(resolve(*router, ".foo.com", "/"), "404");
  EXPECT_EQ(resolve(*router, "barfoo.com", "/"), "404");
}

TEST(RouterHostTest, GatewayWildcardMatchesOneOrMoreLabelsMostSpecificFirst) {
  // The Gateway API's "*.bar.com" is the model's "**.bar.com"; an Ingress's one-label
  // "*.x.bar.com" and exact hosts come first, then the longest "**." suffix.
  model::Route deep = prefix("/");
  deep.upstream = "deep bar.com";
  model::Route deeper = prefix("/");
  deeper.upstream = "deep x.bar.com";
  model::Route one = prefix("/");
  one.upstream = "one-label x.bar.com";
  model::Route exact_host = prefix("/");
  exact_host.upstream = "exact";
  auto router = build_or_die(
      config({virtual_host("**.bar.com", {deep}), virtual_host("**.x.bar.com", {deeper}),
              virtual_host("*.x.bar.com", {one}), virtual_host("e.x.bar.com", {exact_host})}));
  EXPECT_EQ(resolve(*router, "a.bar.com", "/"), "deep bar.com");
  EXPECT_EQ(resolve(*router, "multiple.prefixes.bar.com", "/"), "deep bar.com");
  EXPECT_EQ(resolve(*router, "x.bar.com", "/"), "deep bar.com");
  EXPECT_EQ(resolve(*router, "y.x.bar.com", "/"), "one-label x.bar.com");
  EXPECT_EQ(resolve(*router, "e.x.bar.com", "/"), "exact");
  EXPECT_EQ(resolve(*router, "z.y.x.bar.com", "/"), "deep x.bar.com");
  EXPECT_EQ(router->match("z.y.x.bar.com", "/").virtual_host, "**.x.bar.com");
  EXPECT_EQ(resolve(*router, "bar.com", "/"), "404");  // not the suffix itself
  EXPECT_EQ(resolve(*router, "foo.com", "/"), "404");
  EXPECT_EQ(resolve(*router, ".bar.com", "/"), "404");
  EXPECT_EQ(resolve(*router, "a..bar.com", "/"), "404");  // an empty label
  EXPECT_TRUE(model::is_valid_host("**.bar.com"));
  EXPECT_FALSE(model::is_valid_host("**"));
  EXPECT_FALSE(model::is_valid_host("***.bar.com"));
  EXPECT_FALSE(model::is_valid_host("**.*.bar.com"));
}

TEST(RouterHostTest, ExactHostBeatsWildcard) {
  auto router = build_or_die(config(
      {virtual_host("*.foo.com", {prefix("/")}), virtual_host("bar.foo.com", {prefix("/bar")})}));
  EXPECT_EQ(router->match("bar.foo.com", "/bar").virtual_host, "bar.foo.com");
  EXPECT_EQ(resolve(*router, "bar.foo.com", "/bar"), "Prefix /bar");
  EXPECT_EQ(router->match("qux.foo.com", "/bar").virtual_host, "*.foo.com");
  EXPECT_EQ(resolve(*router, "qux.foo.com", "/bar"), "Prefix /");
}

TEST(RouterHostTest, PortIsStripped) {
  auto router = build_or_die(
      config({virtual_host("foo.com", {prefix("/")}), virtual_host("*.bar.com", {exact("/")})}));
  EXPECT_EQ(resolve(*router, "foo.com:8080", "/"), "Prefix /");
  EXPECT_EQ(resolve(*router, "foo.com:", "/"), "Prefix /");
  EXPECT_EQ(resolve(*router, "x.bar.com:443", "/"), "Exact /");
}

TEST(RouterHostTest, HostIsLowerCased) {
  auto router = build_or_die(
      config({virtual_host("foo.com", {prefix("/")}), virtual_host("*.bar.com", {exact("/")})}));
  EXPECT_EQ(resolve(*router, "FOO.Com", "/"), "Prefix /");
  EXPECT_EQ(resolve(*router, "WWW.BAR.COM:80", "/"), "Exact /");
}

TEST(RouterHostTest, OneTrailingDotIsStripped) {
  auto router = build_or_die(
      config({virtual_host("foo.com", {prefix("/")}), virtual_host("*.bar.com", {exact("/")})}));
  EXPECT_EQ(resolve(*router, "foo.com.", "/"), "Prefix /");
  EXPECT_EQ(resolve(*router, "Foo.Com.:8080", "/"), "Prefix /");
  EXPECT_EQ(resolve(*router, "x.bar.com.", "/"), "Exact /");
  EXPECT_EQ(resolve(*router, "foo.com..", "/"), "404");
}

TEST(RouterHostTest, Ipv6LiteralGoesToCatchAll) {
  auto router = build_or_die(
      config({virtual_host("*", {prefix("/")}), virtual_host("foo.com", {exact("/")})}));
  for (const char* host :
       {"[::1]", "[::1]:8080", "[2001:DB8::1]:443", "[::ffff:10.0.0.1]", "[::1", "[::1]x"}) {
    const Match m = router->match(host, "/x");
    EXPECT_EQ(m.virtual_host, "*") << host;
    ASSERT_NE(m.route, nullptr) << host;
    EXPECT_EQ(m.route->upstream, "Prefix /") << host;
  }
}

TEST(RouterHostTest, Ipv4LiteralIsLookedUpAsExactHostOnly) {
  auto router = build_or_die(
      config({virtual_host("10.0.0.1", {prefix("/")}), virtual_host("*.0.0.2", {prefix("/")})}));
  EXPECT_EQ(router->match("10.0.0.1:80", "/").virtual_host, "10.0.0.1");
  EXPECT_EQ(resolve(*router, "10.0.0.2", "/"), "404");
}

TEST(RouterHostTest, CatchAllTakesOtherHosts) {
  auto router = build_or_die(
      config({virtual_host("*", {prefix("/")}), virtual_host("foo.com", {exact("/foo")})}));
  EXPECT_EQ(router->match("bar.com", "/x").virtual_host, "*");
  EXPECT_EQ(resolve(*router, "bar.com", "/x"), "Prefix /");
  EXPECT_EQ(resolve(*router, "", "/x"), "Prefix /");  // HTTP/1.0 without Host
  EXPECT_EQ(resolve(*router, "foo.com", "/foo"), "Exact /foo");
}

TEST(RouterHostTest, MatchedHostDoesNotFallThrough) {
  auto router = build_or_die(config(
      {virtual_host("*", {prefix("/")}), virtual_host("*.foo.com", {exact("/wild")}),
       virtual_host("foo.com", {exact("/foo")}), virtual_host("bar.foo.com", {exact("/bar")})}));
  // Exact host without a matching route: not "*".
  Match m = router->match("foo.com", "/other");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.virtual_host, "foo.com");
  // Exact host without a matching route: not the wildcard either.
  EXPECT_EQ(resolve(*router, "bar.foo.com", "/wild"), "404");
  // Wildcard host without a matching route: not "*".
  m = router->match("baz.foo.com", "/other");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.virtual_host, "*.foo.com");
}

TEST(RouterHostTest, GatewayHostsFallThroughToLessSpecificOnes) {
  auto falling = [](model::VirtualHost vh) {
    vh.falls_through = true;
    return vh;
  };
  auto router = build_or_die(config({virtual_host("*", {prefix("/")}),
                                     falling(virtual_host("**.foo.com", {exact("/wild")})),
                                     falling(virtual_host("**.b.foo.com", {exact("/deep")})),
                                     falling(virtual_host("a.b.foo.com", {exact("/a")})),
                                     virtual_host("owner.foo.com", {exact("/own")})}));
  // The most specific host first, then each less specific one: exact, the longest "**" suffix,
  // the next, "*".
  EXPECT_EQ(resolve(*router, "a.b.foo.com", "/a"), "Exact /a");
  EXPECT_EQ(resolve(*router, "a.b.foo.com", "/deep"), "Exact /deep");
  EXPECT_EQ(resolve(*router, "a.b.foo.com", "/wild"), "Exact /wild");
  EXPECT_EQ(resolve(*router, "a.b.foo.com", "/other"), "Prefix /");
  // The host that took the request is the one reported.
  Match m = router->match("a.b.foo.com", "/wild");
  EXPECT_EQ(m.virtual_host, "**.foo.com");
  // A host that does not fall through owns its requests (the chain stops there).
  EXPECT_EQ(resolve(*router, "owner.foo.com", "/wild"), "404");
  m = router->match("owner.foo.com", "/other");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.virtual_host, "owner.foo.com");
}

TEST(RouterHostTest, DefaultRouteWhenNothingMatches) {
  auto router = build_or_die(config({virtual_host("foo.com", {exact("/foo")})}, default_route()));
  // No virtual host takes the host.
  Match m = router->match("bar.com", "/foo");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->upstream, "default");
  EXPECT_TRUE(m.is_default);
  EXPECT_EQ(m.virtual_host, "");
  // The virtual host has no matching route.
  m = router->match("foo.com", "/bar");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->upstream, "default");
  EXPECT_TRUE(m.is_default);
  EXPECT_EQ(m.virtual_host, "foo.com");
}

TEST(RouterHostTest, NothingMatchesIsNullptr) {
  auto router = build_or_die(config({virtual_host("foo.com", {exact("/foo")})}));
  Match m = router->match("bar.com", "/foo");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_FALSE(m.is_default);
  EXPECT_EQ(m.virtual_host, "");

  auto empty = build_or_die(model::Config{});
  EXPECT_EQ(empty->match("foo.com", "/").route, nullptr);
}

TEST(RouterHostTest, HostLongerThanStackBuffer) {
  // Labels of 60 bytes: a wildcard suffix of 4 labels plus one more label is over 255 bytes.
  // (Built with append() rather than operator+: GCC 12 warns falsely on the latter at -O2.)
  std::string suffix;
  for (int i = 0; i < 4; ++i) suffix.append(i == 0 ? "" : ".").append(60, 'a');
  std::string wildcard = "*.";
  wildcard.append(suffix);
  auto router = build_or_die(config({virtual_host(wildcard, {prefix("/")})}));

  std::string host(60, 'B');
  host.append(".").append(suffix);
  for (char& c : host) c = static_cast<char>(c == 'a' ? 'A' : c);
  ASSERT_GT(host.size(), kMaxStackHostLength);
  std::string with_port = host;
  with_port.append(":443");
  EXPECT_EQ(resolve(*router, with_port, "/"), "Prefix /");
  std::string one_label_too_many = "x.";
  one_label_too_many.append(host);
  EXPECT_EQ(resolve(*router, one_label_too_many, "/"), "404");
}

// --- Regex -------------------------------------------------------------------------------------

TEST(RouterRegexTest, AnchoredAtStartNotAtEnd) {
  auto router = build_or_die(config({virtual_host("*", {regex("/api/v[0-9]+")})}));
  EXPECT_EQ(resolve(*router, "a.com", "/api/v1"), "Regex /api/v[0-9]+");
  EXPECT_EQ(resolve(*router, "a.com", "/api/v2/users"), "Regex /api/v[0-9]+");
  EXPECT_EQ(resolve(*router, "a.com", "/api/v12x"), "Regex /api/v[0-9]+");
  EXPECT_EQ(resolve(*router, "a.com", "/x/api/v1"), "404");
  EXPECT_EQ(resolve(*router, "a.com", "/api/vx"), "404");
}

TEST(RouterRegexTest, AlternativesAreAllAnchored) {
  auto router = build_or_die(config({virtual_host("*", {regex("/a|/b")})}));
  EXPECT_EQ(resolve(*router, "a.com", "/a"), "Regex /a|/b");
  EXPECT_EQ(resolve(*router, "a.com", "/b/c"), "Regex /a|/b");
  EXPECT_EQ(resolve(*router, "a.com", "/x/b"), "404");
}

TEST(RouterRegexTest, DollarAnchorsTheEnd) {
  auto router = build_or_die(config({virtual_host("*", {regex("/api/v[0-9]+$")})}));
  EXPECT_EQ(resolve(*router, "a.com", "/api/v1"), "Regex /api/v[0-9]+$");
  EXPECT_EQ(resolve(*router, "a.com", "/api/v1/users"), "404");
}

TEST(RouterRegexTest, DoesNotSeeTheQueryString) {
  auto router = build_or_die(config({virtual_host("*", {regex("/search.*q=")})}));
  EXPECT_EQ(resolve(*router, "a.com", "/search?q=1"), "404");
  EXPECT_EQ(resolve(*router, "a.com", "/search/q=1"), "Regex /search.*q=");
}

TEST(RouterRegexTest, InvalidRegexFailsBuild) {
  std::string error;
  auto router =
      Router::build(config({virtual_host("foo.com", {prefix("/"), regex("/api/(v1")})}), &error);
  EXPECT_EQ(router, nullptr);
  EXPECT_NE(error.find("foo.com"), std::string::npos) << error;
  EXPECT_NE(error.find("invalid regex \"/api/(v1\""), std::string::npos) << error;

  // A null error pointer is allowed.
  EXPECT_EQ(Router::build(config({virtual_host("*", {regex("[")})}), nullptr), nullptr);
}

// --- Precedence --------------------------------------------------------------------------------

TEST(RouterPrecedenceTest, LongestPathFirst) {
  auto router =
      build_or_die(config({virtual_host("*", {prefix("/"), prefix("/aaa"), prefix("/aaa/bbb")})}));
  EXPECT_EQ(resolve(*router, "a.com", "/aaa/bbb/ccc"), "Prefix /aaa/bbb");
  EXPECT_EQ(resolve(*router, "a.com", "/aaa/ccc"), "Prefix /aaa");
  EXPECT_EQ(resolve(*router, "a.com", "/aaa/bbbccc"), "Prefix /aaa");
  EXPECT_EQ(resolve(*router, "a.com", "/ccc"), "Prefix /");
}

TEST(RouterPrecedenceTest, ExactBeforePrefixBeforeRegexOnTies) {
  // All three are 4 bytes long and all three match "/foo".
  auto router =
      build_or_die(config({virtual_host("*", {regex("/fo+"), prefix("/foo"), exact("/foo")})}));
  EXPECT_EQ(resolve(*router, "a.com", "/foo"), "Exact /foo");
  EXPECT_EQ(resolve(*router, "a.com", "/foo/x"), "Prefix /foo");
  EXPECT_EQ(resolve(*router, "a.com", "/fooo"), "Regex /fo+");
}

TEST(RouterPrecedenceTest, LongerPathTextWinsAcrossKinds) {
  auto router = build_or_die(
      config({virtual_host("*", {prefix("/api"), regex("/api/.*"), prefix("/api/users")})}));
  EXPECT_EQ(resolve(*router, "a.com", "/api/users/1"), "Prefix /api/users");
  EXPECT_EQ(resolve(*router, "a.com", "/api/orders"), "Regex /api/.*");
  EXPECT_EQ(resolve(*router, "a.com", "/api"), "Prefix /api");
}

TEST(RouterPrecedenceTest, PrefixTrailingSlashDoesNotBeatExact) {
  // Prefix "/foo/" is the same prefix as "/foo" (its trailing slash does not count), so on the
  // tie Exact "/foo" wins, as Kubernetes says; longer requests still go to the prefix.
  auto router = build_or_die(config({virtual_host("*", {exact("/foo"), prefix("/foo/")})}));
  EXPECT_EQ(resolve(*router, "a.com", "/foo"), "Exact /foo");
  EXPECT_EQ(resolve(*router, "a.com", "/foo/x"), "Prefix /foo/");
}

TEST(RouterPrecedenceTest, InputOrderDoesNotMatter) {
  model::Config c;
  c.virtual_hosts["*"] = {"*", {prefix("/"), exact("/aaa"), prefix("/aaa"), prefix("/aaa/bbb")}};
  auto router = build_or_die(c);
  EXPECT_EQ(resolve(*router, "a.com", "/aaa"), "Exact /aaa");
  EXPECT_EQ(resolve(*router, "a.com", "/aaa/bbb/c"), "Prefix /aaa/bbb");
  EXPECT_EQ(resolve(*router, "a.com", "/aaa/c"), "Prefix /aaa");
  EXPECT_EQ(resolve(*router, "a.com", "/c"), "Prefix /");
}

// --- Concurrency -------------------------------------------------------------------------------

TEST(RouterConcurrencyTest, ConcurrentMatchesOnOneRouter) {
  auto router = build_or_die(config({virtual_host("*.foo.com", {prefix("/"), regex("/r[0-9]+")}),
                                     virtual_host("foo.com", {exact("/x")})}));
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        if (resolve(*router, "A.foo.com", "/r" + std::to_string(i)) != "Regex /r[0-9]+") {
          ++failures[t];
        }
        if (resolve(*router, "foo.com:80", "/x") != "Exact /x") ++failures[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

// --- Conditions besides the path (Gateway API matches) ---------------------------------------

// A request with a method, a query and header fields (names lower case), for the router's
// conditions.
class FakeRequest final : public RequestView {
 public:
  FakeRequest(std::string method, std::string query,
              std::vector<std::pair<std::string, std::string>> fields)
      : method_(std::move(method)), query_(std::move(query)), fields_(std::move(fields)) {}
  std::string_view method() const override { return method_; }
  std::string_view query() const override { return query_; }
  std::optional<std::string_view> header(std::string_view name,
                                         std::string& scratch) const override {
    std::vector<std::string_view> values;
    for (const auto& [n, v] : fields_) {
      if (n == name) values.push_back(v);
    }
    if (values.empty()) return std::nullopt;
    if (values.size() == 1) return values[0];
    scratch.clear();
    for (auto v : values) {
      if (!scratch.empty()) scratch += ", ";
      scratch += v;
    }
    return std::string_view(scratch);
  }

 private:
  std::string method_, query_;
  std::vector<std::pair<std::string, std::string>> fields_;
};

model::Route conditional(const std::string& name, std::function<void(model::Route&)> set) {
  model::Route r = prefix("/");
  r.upstream = name;
  set(r);
  return r;
}

std::string resolve_request(const Router& router, const std::string& path,
                            const FakeRequest& request) {
  const Match m = router.match("x.com", path, &request);
  return m.route == nullptr ? "404" : m.route->upstream;
}

TEST(RouterConditionsTest, MethodHeadersAndQueryDecideBetweenRoutesOfOnePath) {
  using model::ValueMatch;
  auto router = build_or_die(config(
      {virtual_host("x.com", {conditional("plain", [](model::Route&) {}),
                              conditional("post", [](model::Route& r) { r.method = "POST"; }),
                              conditional("v2",
                                          [](model::Route& r) {
                                            r.headers = {{"version", "v2", ValueMatch::kExact}};
                                          }),
                              conditional("v2 beta",
                                          [](model::Route& r) {
                                            r.headers = {
                                                {"version", "v2", ValueMatch::kExact},
                                                {"channel", "beta|canary", ValueMatch::kRegex}};
                                          }),
                              conditional("debug",
                                          [](model::Route& r) {
                                            r.query = {{"debug", "1", ValueMatch::kExact}};
                                          }),
                              conditional("user",
                                          [](model::Route& r) {
                                            r.query = {{"user", "[a-z]+", ValueMatch::kRegex}};
                                          }),
                              [] {
                                model::Route r = exact("/exact");
                                r.upstream = "exact get";
                                r.method = "GET";
                                return r;
                              }()})}));
  struct Case {
    std::string path;
    FakeRequest request;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"/", {"GET", "", {}}, "plain"},
      {"/", {"POST", "", {}}, "post"},
      {"/", {"post", "", {}}, "plain"},                  // methods are case-sensitive
      {"/", {"POST", "", {{"version", "v2"}}}, "post"},  // a method first
      {"/a", {"GET", "", {{"version", "v2"}}}, "v2"},
      {"/a", {"GET", "", {{"version", "V2"}}}, "plain"},  // values are case-sensitive
      {"/a", {"GET", "", {{"version", "v2"}, {"channel", "beta"}}}, "v2 beta"},
      {"/a", {"GET", "", {{"version", "v2"}, {"channel", "beta2"}}}, "v2"},  // a whole match
      {"/a", {"GET", "", {{"version", "v2"}, {"version", "v3"}}}, "plain"},  // "v2, v3"
      {"/a", {"GET", "debug=1", {}}, "debug"},
      {"/a", {"GET", "x=2&debug=1", {}}, "debug"},
      {"/a", {"GET", "debug=10", {}}, "plain"},
      {"/a", {"GET", "debug=1&debug=2", {}}, "debug"},  // the first occurrence
      {"/a", {"GET", "Debug=1", {}}, "plain"},          // names are case-sensitive
      {"/a", {"GET", "user=bob", {}}, "user"},
      {"/a", {"GET", "user=Bob", {}}, "plain"},
      {"/a", {"GET", "user", {}}, "plain"},                   // a bare name has the empty value
      {"/a", {"GET", "debug=1", {{"version", "v2"}}}, "v2"},  // headers before query
      {"/exact", {"GET", "", {}}, "exact get"},
      {"/exact", {"HEAD", "", {}}, "plain"},  // passed over: the next route takes it
  };
  for (const auto& c : cases) {
    EXPECT_EQ(resolve_request(*router, c.path, c.request), c.want)
        << c.request.method() << " " << c.path << "?" << c.request.query();
  }
  // Without a request view a route with conditions never matches.
  EXPECT_EQ(resolve(*router, "x.com", "/exact"), "plain");
}

TEST(RouterConditionsTest, AnInvalidConditionRegexFailsTheBuild) {
  model::Route r = conditional("bad", [](model::Route& route) {
    route.headers = {{"x", "(", model::ValueMatch::kRegex}};
  });
  std::string error;
  EXPECT_EQ(Router::build(config({virtual_host("x.com", {r})}), &error), nullptr);
  EXPECT_NE(error.find("invalid regex"), std::string::npos) << error;
}

// Gateway listeners (model::Listener): each listener's router holds only the hosts scoped to
// it, and no default route; the data plane's own router holds only the unscoped hosts.
TEST(RouterListenerTest, EachListenerSeesItsOwnHostsOnly) {
  model::Config c = config({virtual_host("a.com", {prefix("/shared")})}, default_route());
  c.listeners["ns/one:80"] = {"ns/one:80", 20000, false};
  c.listeners["ns/two:80"] = {"ns/two:80", 20001, false};
  for (const char* name : {"ns/one:80", "ns/two:80"}) {
    model::VirtualHost scoped = virtual_host("*", {prefix(std::string("/") + name)});
    scoped.listener = name;
    c.virtual_hosts[model::host_key(scoped)] = scoped;
  }
  model::VirtualHost exact_host = virtual_host("a.com", {exact("/one-only")});
  exact_host.listener = "ns/one:80";
  c.virtual_hosts[model::host_key(exact_host)] = exact_host;

  std::string error;
  auto shared = Router::build(c, &error);
  auto one = Router::build(c, "ns/one:80", &error);
  auto two = Router::build(c, "ns/two:80", &error);
  auto none = Router::build(c, "ns/absent:80", &error);
  ASSERT_TRUE(shared && one && two && none) << error;

  EXPECT_EQ(resolve(*shared, "a.com", "/shared"), "Prefix /shared");
  EXPECT_EQ(resolve(*shared, "b.com", "/ns/one:80"), "default");  // the default route
  EXPECT_EQ(resolve(*one, "b.com", "/ns/one:80"), "Prefix /ns/one:80");
  EXPECT_EQ(resolve(*one, "a.com", "/one-only"), "Exact /one-only");
  EXPECT_EQ(resolve(*one, "a.com", "/shared"), "404");  // a.com of listener one has no /shared
  EXPECT_EQ(resolve(*two, "a.com", "/ns/two:80"), "Prefix /ns/two:80");
  EXPECT_EQ(resolve(*two, "a.com", "/ns/one:80"), "404");
  EXPECT_EQ(resolve(*none, "a.com", "/shared"), "404");
  EXPECT_EQ(resolve(Router::empty(), "a.com", "/"), "404");
}

// build_borrowing: the router points into the configuration instead of copying it (the data
// plane's snapshot keeps both); the routes it returns are the configuration's own, tried in
// model::sort_routes order even when the configuration lists them in another order, equal routes
// in the configuration's order.
TEST(RouterBuildTest, BorrowingRouterPointsIntoTheConfigInPrecedenceOrder) {
  model::Route second_api = prefix("/api");
  second_api.upstream = "second /api";
  model::Config c;
  c.virtual_hosts["a.com"] = {"a.com", {prefix("/"), prefix("/api"), exact("/api"), second_api}};
  c.default_route = default_route();
  std::string error;
  auto borrowing = Router::build_borrowing(c, {}, &error);
  auto copying = Router::build(c, &error);
  ASSERT_TRUE(borrowing && copying) << error;
  const std::vector<model::Route>& routes = c.virtual_hosts.at("a.com").routes;

  for (const Router* router : {borrowing.get(), copying.get()}) {
    EXPECT_EQ(resolve(*router, "a.com", "/api"), "Exact /api");
    EXPECT_EQ(resolve(*router, "a.com", "/api/x"), "Prefix /api");  // the first of two equal
    EXPECT_EQ(resolve(*router, "a.com", "/other"), "Prefix /");
    EXPECT_EQ(resolve(*router, "b.com", "/"), "default");
  }
  EXPECT_EQ(borrowing->match("a.com", "/api").route, &routes[2]);
  EXPECT_EQ(borrowing->match("a.com", "/api/x").route, &routes[1]);
  EXPECT_EQ(borrowing->match("b.com", "/").route, &*c.default_route);
  EXPECT_EQ(borrowing->match("a.com", "/").virtual_host.data(),
            c.virtual_hosts.at("a.com").host.data());
  // build() answers from its own copy.
  EXPECT_NE(copying->match("a.com", "/api").route, &routes[2]);
  EXPECT_NE(copying->match("b.com", "/").route, &*c.default_route);
  std::vector<const model::Route*> visited;
  borrowing->for_each_route(
      [&](std::string_view, const model::Route& route) { visited.push_back(&route); });
  EXPECT_EQ(visited, (std::vector<const model::Route*>{&routes[2], &routes[1], &routes[3],
                                                       &routes[0], &*c.default_route}));
}

// build()'s router keeps working after the configuration it was built from is gone (under
// AddressSanitizer a pointer into the old configuration would be reported).
TEST(RouterBuildTest, BuiltRouterOutlivesItsConfig) {
  std::unique_ptr<const Router> router;
  {
    model::Config c = config({virtual_host("a.com", {prefix("/"), regex("/v[0-9]+/")}),
                              virtual_host("*.b.com", {exact("/x")})},
                             default_route());
    c.virtual_hosts["x.com"] = {"x.com", {prefix("/x")}};
    c.virtual_hosts["x.com"].listener = "ns/gw:80";  // another listener's: left out
    std::string error;
    router = Router::build(c, &error);
    ASSERT_TRUE(router) << error;
  }
  EXPECT_EQ(resolve(*router, "a.com", "/v2/users"), "Regex /v[0-9]+/");
  EXPECT_EQ(resolve(*router, "A.com:8080", "/"), "Prefix /");
  EXPECT_EQ(resolve(*router, "c.b.com", "/x"), "Exact /x");
  EXPECT_EQ(router->match("c.b.com", "/x").virtual_host, "*.b.com");
  EXPECT_EQ(resolve(*router, "x.com", "/x"), "default");
}

}  // namespace
}  // namespace tidegate::dataplane::router
