// lib/model/policy: defaults equal to the data plane's current behaviour, validate(), the JSON
// round trip, and the syntax checks cross-checked against the data-plane engines they mirror.

#include "model/policy.h"

#include <gtest/gtest.h>

#include <functional>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "balancer/cookie_affinity.h"
#include "balancer/endpoint_table.h"
#include "balancer/hash_expression.h"
#include "ratelimit/cidr_set.h"
#include "server/limits.h"

namespace tidegate::model {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

SessionAffinity affinity(std::string name, std::optional<int64_t> max_age = {},
                         std::string path = "") {
  SessionAffinity a;
  a.cookie_name = std::move(name);
  a.max_age_seconds = max_age;
  a.path = std::move(path);
  return a;
}

Cors cors_for(std::vector<std::string> origins) {
  Cors c;
  c.allow_origins = std::move(origins);
  return c;
}

Canary canary(std::string upstream, uint32_t weight, uint32_t total = 100, std::string header = "",
              std::string value = "", std::string cookie = "") {
  return Canary{std::move(upstream), weight,           total,
                std::move(header),   std::move(value), std::move(cookie)};
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

TEST(PolicyDefaults, EqualTheDataPlaneLimitsInForceToday) {
  const dataplane::server::Limits limits;
  const RoutePolicy route;
  EXPECT_EQ(route.connect_timeout, limits.upstream_connect_timeout);
  EXPECT_EQ(route.read_timeout, limits.upstream_read_timeout);
  EXPECT_EQ(route.send_timeout, limits.upstream_send_timeout);
  EXPECT_EQ(route.next_upstream_tries, limits.max_upstream_attempts);
  EXPECT_FALSE(route.max_body_bytes);  // bodies stream without a limit today
  EXPECT_TRUE(route.next_upstream.error);
  EXPECT_TRUE(route.next_upstream.timeout);
  EXPECT_FALSE(route.next_upstream.http_502 || route.next_upstream.http_503 ||
               route.next_upstream.http_504 || route.next_upstream.non_idempotent);
  EXPECT_FALSE(route.cors || route.redirect || route.source_ranges || route.hsts);
  EXPECT_FALSE(route.rate_limits.rps || route.rate_limits.connections);
  EXPECT_EQ(route.rate_limits.status_code, 429);

  const UpstreamPolicy upstream;
  EXPECT_EQ(upstream.load_balance, LoadBalance::kRoundRobin);
  EXPECT_TRUE(upstream.hash_by.empty());
  EXPECT_FALSE(upstream.affinity);
  EXPECT_EQ(upstream.protocol, BackendProtocol::kHttp);

  EXPECT_TRUE(validate(route).empty()) << joined(validate(route));
  EXPECT_TRUE(validate(upstream).empty()) << joined(validate(upstream));
  EXPECT_TRUE(validate(Canary{}, false).empty());
  EXPECT_FALSE(validate(Canary{}, true).empty());  // the model's canary names its upstream
}

TEST(PolicyDefaults, AffinityDefaultsMatchTheEngine) {
  const SessionAffinity ours;
  const dataplane::balancer::AffinityConfig engine;
  EXPECT_EQ(ours.cookie_name, engine.cookie_name);
  EXPECT_EQ(ours.secure, engine.secure);
  EXPECT_FALSE(ours.max_age_seconds);
  EXPECT_FALSE(engine.max_age);
}

TEST(PolicyEnums, RoundTripAndRefuseUnknown) {
  for (auto m : {LoadBalance::kRoundRobin, LoadBalance::kLeastConn, LoadBalance::kIpHash,
                 LoadBalance::kEwma}) {
    EXPECT_EQ(load_balance_from_string(to_string(m)), m);
    // The data plane's engine knows the same names.
    EXPECT_TRUE(dataplane::balancer::method_from_string(to_string(m)));
  }
  EXPECT_FALSE(load_balance_from_string("random"));
  EXPECT_FALSE(load_balance_from_string("EWMA"));
  EXPECT_EQ(same_site_from_string("lax"), SameSite::kLax);
  EXPECT_EQ(same_site_from_string("STRICT"), SameSite::kStrict);
  EXPECT_EQ(same_site_from_string("None"), SameSite::kNone);
  EXPECT_FALSE(same_site_from_string("none-ish"));
  EXPECT_EQ(backend_protocol_from_string("https"), BackendProtocol::kHttps);
  for (auto p : {BackendProtocol::kHttp, BackendProtocol::kHttps, BackendProtocol::kH2c,
                 BackendProtocol::kH2}) {
    EXPECT_EQ(backend_protocol_from_string(to_string(p)), p);
  }
  EXPECT_TRUE(uses_tls(BackendProtocol::kH2) && uses_http2(BackendProtocol::kH2));
  EXPECT_TRUE(!uses_tls(BackendProtocol::kH2c) && uses_http2(BackendProtocol::kH2c));
  EXPECT_TRUE(uses_tls(BackendProtocol::kHttps) && !uses_http2(BackendProtocol::kHttps));
  // The annotation's GRPC and GRPCS are the translator's spellings, not the model's.
  EXPECT_FALSE(backend_protocol_from_string("GRPC"));
  NextUpstream n;
  EXPECT_EQ(n.to_string(), "error timeout");
  n = NextUpstream{false, false, false, false, false, false};
  EXPECT_EQ(n.to_string(), "off");
  n = NextUpstream{true, false, true, false, true, true};
  EXPECT_EQ(n.to_string(), "error http_502 http_504 non_idempotent");
}

TEST(PolicyHsts, HeaderValueAndRange) {
  EXPECT_EQ(hsts_value(Hsts{}), "max-age=31536000; includeSubDomains");
  EXPECT_EQ(hsts_value(Hsts{0, false, false}), "max-age=0");
  EXPECT_EQ(hsts_value(Hsts{63072000, true, true}), "max-age=63072000; includeSubDomains; preload");
  RoutePolicy p;
  p.hsts = Hsts{-1, true, false};
  EXPECT_NE(joined(validate(p)).find("hsts max_age -1 is out of range"), std::string::npos);
  p.hsts->max_age_seconds = Hsts::kMaxMaxAgeSeconds;
  EXPECT_EQ(joined(validate(p)), "");
}

// ---- JSON ----

RoutePolicy full_route_policy() {
  RoutePolicy p;
  p.connect_timeout = 1500ms;
  p.read_timeout = 3600s;
  p.send_timeout = 90s;
  p.max_body_bytes = 8 << 20;
  p.next_upstream = NextUpstream{true, false, true, true, false, true};
  p.next_upstream_tries = 5;
  p.rewrite_target = "/$2";
  p.app_root = "/app";
  p.redirect = Redirect{"https://example.com/new", 308};
  p.response_headers = {{"X-Frame-Options", "DENY"}, {"Cache-Control", "no-store, private"}};
  p.upstream_vhost = "internal.example.com:8443";
  p.cors = Cors{};
  p.cors->allow_origins = {"https://a.example.com", "https://*.example.org:8443"};
  p.cors->allow_methods = {"GET", "POST"};
  p.cors->allow_headers = {"*"};
  p.cors->expose_headers = {"X-Total"};
  p.cors->allow_credentials = false;
  p.cors->max_age_seconds = 600;
  p.hsts = Hsts{600, false, true};
  p.upgrade_protocols = {"foo/2", "tls/1.2"};
  p.source_ranges = SourceRanges{{"10.0.0.0/8", "2001:db8::/32"}};
  p.rate_limits.rps = 2.5;
  p.rate_limits.burst_multiplier = 3;
  p.rate_limits.connections = 20;
  p.rate_limits.allowlist = {"192.168.0.1"};
  p.rate_limits.status_code = 503;
  p.rate_limits.rpm = 90;
  p.deny_ranges = SourceRanges{{"10.1.0.0/16"}};
  p.next_upstream_timeout = std::chrono::milliseconds(2500);
  p.error_codes = {404, 503};
  return p;
}

UpstreamPolicy full_upstream_policy() {
  UpstreamPolicy p;
  p.load_balance = LoadBalance::kEwma;
  p.hash_by = "$http_x_user$cookie_s";
  p.affinity = SessionAffinity{"route", 3600, "/app", true, SameSite::kNone};
  p.affinity->domain = ".example.com";
  p.affinity->expires_seconds = 600;
  p.protocol = BackendProtocol::kHttps;
  p.tls_secret = "default/backend-ca";
  return p;
}

TEST(PolicyJson, DefaultsEncodeAsAnEmptyObject) {
  EXPECT_EQ(to_json(RoutePolicy{}).dump(), "{}");
  EXPECT_EQ(to_json(UpstreamPolicy{}).dump(), "{}");
  EXPECT_EQ(to_json(Canary{}).dump(), "{}");
  EXPECT_EQ(route_policy_from_json(json::object()), RoutePolicy{});
  EXPECT_EQ(upstream_policy_from_json(json::object()), UpstreamPolicy{});
  EXPECT_EQ(canary_from_json(json::object()), Canary{});
}

TEST(PolicyJson, FullPoliciesRoundTripThroughText) {
  const RoutePolicy route = full_route_policy();
  const UpstreamPolicy upstream = full_upstream_policy();
  const Canary canary{"default/web-canary:80", 10, 1000, "X-Canary", "yes", "canary"};
  ASSERT_TRUE(validate(route).empty()) << joined(validate(route));
  ASSERT_TRUE(validate(upstream).empty()) << joined(validate(upstream));
  ASSERT_TRUE(validate(canary).empty()) << joined(validate(canary));
  EXPECT_EQ(route_policy_from_json(json::parse(to_json(route).dump())), route);
  EXPECT_EQ(upstream_policy_from_json(json::parse(to_json(upstream).dump())), upstream);
  EXPECT_EQ(canary_from_json(json::parse(to_json(canary).dump())), canary);
  Canary patterned{"default/web-canary:80", 0, 100, "X-Canary", "", ""};
  patterned.header_pattern = "^v[0-9]+$";
  ASSERT_TRUE(validate(patterned).empty()) << joined(validate(patterned));
  EXPECT_EQ(canary_from_json(json::parse(to_json(patterned).dump())), patterned);
  patterned.header_pattern = "(";
  EXPECT_FALSE(validate(patterned).empty());
}

// Each field alone, so that a field the encoder forgets (or the decoder drops) fails by name.
TEST(PolicyJson, EachRouteFieldRoundTripsAlone) {
  const RoutePolicy full = full_route_policy();
  const std::vector<std::pair<const char*, std::function<void(RoutePolicy&)>>> fields = {
      {"connect_timeout", [&](RoutePolicy& p) { p.connect_timeout = full.connect_timeout; }},
      {"read_timeout", [&](RoutePolicy& p) { p.read_timeout = full.read_timeout; }},
      {"send_timeout", [&](RoutePolicy& p) { p.send_timeout = full.send_timeout; }},
      {"max_body_bytes", [&](RoutePolicy& p) { p.max_body_bytes = full.max_body_bytes; }},
      {"next_upstream", [&](RoutePolicy& p) { p.next_upstream = full.next_upstream; }},
      {"next_upstream off",
       [&](RoutePolicy& p) {
         p.next_upstream = NextUpstream{false, false, false, false, false, false};
       }},
      {"next_upstream_tries", [&](RoutePolicy& p) { p.next_upstream_tries = 1; }},
      {"rewrite_target", [&](RoutePolicy& p) { p.rewrite_target = full.rewrite_target; }},
      {"app_root", [&](RoutePolicy& p) { p.app_root = full.app_root; }},
      {"redirect", [&](RoutePolicy& p) { p.redirect = full.redirect; }},
      {"response_headers", [&](RoutePolicy& p) { p.response_headers = full.response_headers; }},
      {"upstream_vhost", [&](RoutePolicy& p) { p.upstream_vhost = full.upstream_vhost; }},
      {"cors (defaults)", [&](RoutePolicy& p) { p.cors = Cors{}; }},
      {"cors", [&](RoutePolicy& p) { p.cors = full.cors; }},
      {"source_ranges", [&](RoutePolicy& p) { p.source_ranges = full.source_ranges; }},
      {"source_ranges deny all", [&](RoutePolicy& p) { p.source_ranges = SourceRanges{}; }},
      {"rps", [&](RoutePolicy& p) { p.rate_limits.rps = 0.25; }},
      {"burst", [&](RoutePolicy& p) { p.rate_limits.burst_multiplier = 1.5; }},
      {"connections", [&](RoutePolicy& p) { p.rate_limits.connections = 7; }},
      {"allowlist", [&](RoutePolicy& p) { p.rate_limits.allowlist = {"::1"}; }},
      {"status_code", [&](RoutePolicy& p) { p.rate_limits.status_code = 503; }},
      {"rpm", [&](RoutePolicy& p) { p.rate_limits.rpm = 30; }},
      {"deny_ranges", [&](RoutePolicy& p) { p.deny_ranges = full.deny_ranges; }},
      {"error_codes", [&](RoutePolicy& p) { p.error_codes = full.error_codes; }},
      {"next_upstream_timeout",
       [&](RoutePolicy& p) { p.next_upstream_timeout = full.next_upstream_timeout; }},
  };
  for (const auto& [name, set] : fields) {
    RoutePolicy p;
    set(p);
    ASSERT_NE(p, RoutePolicy{}) << name;
    json j = to_json(p);
    EXPECT_NE(j.dump(), "{}") << name;
    EXPECT_EQ(route_policy_from_json(json::parse(j.dump())), p) << name << ": " << j.dump();
  }
}

TEST(PolicyJson, EachUpstreamFieldRoundTripsAlone) {
  const UpstreamPolicy full = full_upstream_policy();
  const std::vector<std::pair<const char*, std::function<void(UpstreamPolicy&)>>> fields = {
      {"load_balance", [&](UpstreamPolicy& p) { p.load_balance = LoadBalance::kIpHash; }},
      {"hash_by", [&](UpstreamPolicy& p) { p.hash_by = full.hash_by; }},
      {"affinity (defaults)", [&](UpstreamPolicy& p) { p.affinity = SessionAffinity{}; }},
      {"affinity", [&](UpstreamPolicy& p) { p.affinity = full.affinity; }},
      {"affinity max-age 0", [&](UpstreamPolicy& p) { p.affinity = affinity("a", 0); }},
      {"protocol", [&](UpstreamPolicy& p) { p.protocol = BackendProtocol::kHttps; }},
      {"tls_secret", [&](UpstreamPolicy& p) { p.tls_secret = full.tls_secret; }},
  };
  for (const auto& [name, set] : fields) {
    UpstreamPolicy p;
    set(p);
    ASSERT_NE(p, UpstreamPolicy{}) << name;
    json j = to_json(p);
    EXPECT_EQ(upstream_policy_from_json(json::parse(j.dump())), p) << name << ": " << j.dump();
  }
}

TEST(PolicyJson, MalformedInputIsRefusedWithTheFieldNamed) {
  struct Bad {
    const char* text;
    const char* want;  // substring of the error
    int kind;          // 0 route, 1 upstream, 2 canary
  };
  const Bad cases[] = {
      {R"({"read_timeout_ms": -1})", "read_timeout_ms", 0},
      {R"({"read_timeout_ms": 1.5})", "read_timeout_ms", 0},
      {R"({"next_upstream": ["error", "http_500"]})", "next_upstream", 0},
      {R"({"next_upstream": "error"})", "next_upstream", 0},
      {R"({"redirect": {"url": "/x", "code": 302, "extra": 1}})", "extra", 0},
      {R"({"response_headers": [{"name": 1, "value": "x"}]})", "name", 0},
      {R"({"cors": {"allow_origins": "*"}})", "allow_origins", 0},
      {R"({"rate_limits": {"rps": "10"}})", "rps", 0},
      {R"({"source_ranges": "10.0.0.0/8"})", "source_ranges", 0},
      {R"({"rewrite": "/"})", "unknown field \"rewrite\"", 0},
      {R"([])", "must be an object", 0},
      {R"({"load_balance": "random"})", "load_balance", 1},
      {R"({"affinity": {"same_site": "Sometimes"}})", "same_site", 1},
      {R"({"affinity": {"max_age_seconds": "1"}})", "max_age_seconds", 1},
      {R"({"protocol": "GRPC"})", "protocol", 1},
      {R"({"hash": "$remote_addr"})", "unknown field \"hash\"", 1},
      {R"({"weight": -5})", "weight", 2},
      {R"({"weight_total": 4294967296})", "weight_total", 2},
      {R"({"headers": "x"})", "unknown field", 2},
  };
  for (const auto& c : cases) {
    std::string error;
    try {
      json j = json::parse(c.text);
      if (c.kind == 0) route_policy_from_json(j);
      if (c.kind == 1) upstream_policy_from_json(j);
      if (c.kind == 2) canary_from_json(j);
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_NE(error.find(c.want), std::string::npos) << c.text << " -> " << error;
  }
}

// ---- validate() ----

TEST(PolicyValidate, EachBadRouteFieldIsReported) {
  const std::vector<std::tuple<const char*, std::function<void(RoutePolicy&)>, const char*>> cases =
      {
          {"zero timeout", [](RoutePolicy& p) { p.connect_timeout = 0ms; }, "connect_timeout"},
          {"huge timeout", [](RoutePolicy& p) { p.read_timeout = 25h; }, "read_timeout"},
          {"zero body", [](RoutePolicy& p) { p.max_body_bytes = 0; }, "max_body_bytes"},
          {"huge body", [](RoutePolicy& p) { p.max_body_bytes = (uint64_t{1} << 40) + 1; },
           "max_body_bytes"},
          {"zero tries", [](RoutePolicy& p) { p.next_upstream_tries = 0; }, "next_upstream_tries"},
          {"21 tries", [](RoutePolicy& p) { p.next_upstream_tries = 21; }, "next_upstream_tries"},
          {"rewrite $0", [](RoutePolicy& p) { p.rewrite_target = "/$0"; }, "rewrite_target"},
          {"rewrite $host", [](RoutePolicy& p) { p.rewrite_target = "/$host"; }, "rewrite_target"},
          {"rewrite space", [](RoutePolicy& p) { p.rewrite_target = "/a b"; }, "rewrite_target"},
          {"app root relative", [](RoutePolicy& p) { p.app_root = "app"; }, "app_root"},
          {"redirect ftp",
           [](RoutePolicy& p) {
             p.redirect = Redirect{"ftp://x", 301};
           },
           "url"},
          {"redirect //",
           [](RoutePolicy& p) {
             p.redirect = Redirect{"//evil.com", 301};
           },
           "url"},
          {"redirect quote",
           [](RoutePolicy& p) {
             p.redirect = Redirect{"https://x/\"a", 301};
           },
           "url"},
          {"redirect 200",
           [](RoutePolicy& p) {
             p.redirect = Redirect{"/x", 200};
           },
           "code"},
          {"header name",
           [](RoutePolicy& p) {
             p.response_headers = {{"X Y", "1"}};
           },
           "token"},
          {"header CRLF",
           [](RoutePolicy& p) {
             p.response_headers = {{"X-A", "1\r\nSet-Cookie: a=b"}};
           },
           "control"},
          {"header reserved",
           [](RoutePolicy& p) {
             p.response_headers = {{"Content-Length", "0"}};
           },
           "managed"},
          {"header twice",
           [](RoutePolicy& p) {
             p.response_headers = {{"X-A", "1"}, {"x-a", "2"}};
           },
           "twice"},
          {"vhost", [](RoutePolicy& p) { p.upstream_vhost = "a b"; }, "upstream_vhost"},
          {"vhost port", [](RoutePolicy& p) { p.upstream_vhost = "a:99999"; }, "upstream_vhost"},
          {"cors origin", [](RoutePolicy& p) { p.cors = cors_for({"example.com"}); }, "origin"},
          {"cors star+",
           [](RoutePolicy& p) {
             p.cors = cors_for({"*", "https://a.b"});
           },
           "only"},
          {"cors method",
           [](RoutePolicy& p) {
             p.cors = Cors{};
             p.cors->allow_methods = {"GET POST"};
           },
           "allow_methods"},
          {"cors max age",
           [](RoutePolicy& p) {
             p.cors = Cors{};
             p.cors->max_age_seconds = -1;
           },
           "max_age"},
          {"source range", [](RoutePolicy& p) { p.source_ranges = SourceRanges{{"10.0.0.0/33"}}; },
           "source range entry 1"},
          {"rps 0", [](RoutePolicy& p) { p.rate_limits.rps = 0; }, "rps"},
          {"rps nan", [](RoutePolicy& p) { p.rate_limits.rps = std::nan(""); }, "rps"},
          {"rps big", [](RoutePolicy& p) { p.rate_limits.rps = 100001; }, "rps"},
          {"burst 0.5", [](RoutePolicy& p) { p.rate_limits.burst_multiplier = 0.5; }, "burst"},
          {"slow refill", [](RoutePolicy& p) { p.rate_limits.rps = 0.0001; }, "hour"},
          {"connections 0", [](RoutePolicy& p) { p.rate_limits.connections = 0; }, "connections"},
          {"allowlist", [](RoutePolicy& p) { p.rate_limits.allowlist = {"host.example"}; },
           "allowlist"},
          {"status 404", [](RoutePolicy& p) { p.rate_limits.status_code = 404; }, "status code"},
      };
  for (const auto& [name, set, want] : cases) {
    RoutePolicy p;
    set(p);
    auto problems = validate(p);
    ASSERT_EQ(problems.size(), 1u) << name << ":\n" << joined(problems);
    EXPECT_NE(problems[0].find(want), std::string::npos) << name << ": " << problems[0];
  }
}

TEST(PolicyValidate, EachBadUpstreamAndCanaryFieldIsReported) {
  const std::vector<std::tuple<const char*, std::function<void(UpstreamPolicy&)>, const char*>>
      cases = {
          {"hash", [](UpstreamPolicy& p) { p.hash_by = "$host"; }, "hash_by"},
          {"cookie name", [](UpstreamPolicy& p) { p.affinity = affinity("a=b"); }, "cookie name"},
          {"max age", [](UpstreamPolicy& p) { p.affinity = affinity("a", -1); }, "max-age"},
          {"path", [](UpstreamPolicy& p) { p.affinity = affinity("a", {}, "x;y"); }, "path"},
          {"secret without https", [](UpstreamPolicy& p) { p.tls_secret = "default/ca"; },
           "no TLS"},
          {"secret ref",
           [](UpstreamPolicy& p) {
             p.protocol = BackendProtocol::kHttps;
             p.tls_secret = "Default/CA";
           },
           "tls_secret"},
      };
  for (const auto& [name, set, want] : cases) {
    UpstreamPolicy p;
    set(p);
    auto problems = validate(p);
    ASSERT_EQ(problems.size(), 1u) << name << ":\n" << joined(problems);
    EXPECT_NE(problems[0].find(want), std::string::npos) << name << ": " << problems[0];
  }
  const std::vector<std::tuple<const char*, Canary, const char*>> canaries = {
      {"weight > total", canary("u", 101), "exceeds"},
      {"total 0", canary("u", 0, 0), "total"},
      {"header", canary("u", 0, 100, "X Y"), "header"},
      {"value without header", canary("u", 0, 100, "", "v"), "without a header"},
      {"cookie", canary("u", 0, 100, "", "", "a;b"), "cookie"},
  };
  for (const auto& [name, c, want] : canaries) {
    auto problems = validate(c);
    ASSERT_EQ(problems.size(), 1u) << name << ":\n" << joined(problems);
    EXPECT_NE(problems[0].find(want), std::string::npos) << name << ": " << problems[0];
  }
}

// ---- Syntax checks against the engines they mirror ----

TEST(PolicySyntax, HashExpressionsAgreeWithTheDataPlaneCompiler) {
  std::vector<std::string> corpus = {"$remote_addr",
                                     "$request_uri",
                                     "$http_x_user_id",
                                     "$cookie_session",
                                     "$arg_tenant",
                                     "${arg_id}x",
                                     "user-$remote_addr",
                                     "literal only",
                                     "$remote_addr$arg_tenant",
                                     "",
                                     "$",
                                     "a$",
                                     "$$",
                                     "${",
                                     "${arg_id",
                                     "${}",
                                     "${arg-id}",
                                     "$host",
                                     "$http_",
                                     "$cookie_",
                                     "$arg_",
                                     "$HTTP_X",
                                     "$http_X_Up",
                                     "$remote_addrx",
                                     "${remote_addr}x",
                                     "$1",
                                     "$_",
                                     std::string(1024, 'a'),
                                     std::string(1025, 'a'),
                                     "$arg_a\n",
                                     "é$cookie_ü"};
  std::string many;
  for (int i = 0; i < 16; ++i) many += "a$remote_addr";
  corpus.push_back(many);        // 32 parts
  corpus.push_back(many + "b");  // 33, the last a literal: the engine accepts it
  corpus.push_back(many + "$arg_x");
  corpus.push_back("b" + many);
  for (const auto& text : corpus) {
    std::string engine_error;
    const bool engine_ok =
        dataplane::balancer::HashExpression::compile(text, &engine_error) != nullptr;
    auto ours = check_hash_expression(text);
    EXPECT_EQ(!ours.has_value(), engine_ok)
        << std::quoted(text) << ": " << ours.value_or("ok") << " vs " << engine_error;
    if (ours && !engine_ok) {
      EXPECT_EQ(*ours, engine_error) << text;
    }
  }
}

TEST(PolicySyntax, CidrListsAgreeWithTheDataPlaneParser) {
  const std::vector<std::string> corpus = {"10.0.0.0/8",
                                           "10.1.2.3/8",
                                           "10.0.0.1",
                                           "0.0.0.0/0",
                                           "::/0",
                                           "::1",
                                           "2001:db8::/32",
                                           "::ffff:10.0.0.0/104",
                                           "::ffff:10.0.0.0/90",
                                           "10.0.0.0/8, 192.168.1.7, 2001:db8::/32",
                                           "10.0.0.0/8 192.168.0.0/16",
                                           "10.0.0.0/8,\n 172.16.0.0/12",
                                           " 10.0.0.1 ",
                                           "",
                                           " ",
                                           ",",
                                           "10.0.0.0/8,",
                                           ",10.0.0.0/8",
                                           "10.0.0.0/8,,10.1.0.0/16",
                                           "10.0.0.0/33",
                                           "::/129",
                                           "10.0.0.0/",
                                           "10.0.0.0/08",
                                           "10.0.0.0/1a",
                                           "10.0.0.0/0000",
                                           "01.2.3.4",
                                           "1.2.3",
                                           "1.2.3.4.5",
                                           "256.1.1.1",
                                           "fe80::1%eth0",
                                           "example.com",
                                           "1.2.3.4/32/1",
                                           "::ffff:1.2.3.4",
                                           "2001:db8::g",
                                           "[::1]",
                                           "1.2.3.4:80",
                                           "::ffff:01.2.3.4",
                                           "1:2:3:4:5:6:7:8:9",
                                           "10.0.0.0/8;10.1.0.0/16"};
  for (const auto& text : corpus) {
    std::string engine_error;
    const bool engine_ok = dataplane::ratelimit::CidrSet::parse(text, &engine_error).has_value();
    std::vector<std::string> entries;
    auto ours = parse_cidr_list(text, &entries);
    EXPECT_EQ(!ours.has_value(), engine_ok)
        << std::quoted(text) << ": " << ours.value_or("ok") << " vs " << engine_error;
    if (ours && !engine_ok) {
      EXPECT_EQ(*ours, engine_error) << text;
    }
    // What we keep, the engine reads again: the entries joined must parse to the same set.
    if (!ours) {
      std::string again;
      for (const auto& e : entries) again += e + ",";
      again.pop_back();
      std::string e1, e2;
      EXPECT_EQ(dataplane::ratelimit::CidrSet::parse(again, &e1)->entries(),
                dataplane::ratelimit::CidrSet::parse(text, &e2)->entries())
          << text;
    }
  }
  std::string big;
  for (size_t i = 0; i <= kMaxCidrEntries; ++i) big += "10.0.0.1,";
  big.pop_back();
  std::string engine_error;
  EXPECT_FALSE(dataplane::ratelimit::CidrSet::parse(big, &engine_error));
  EXPECT_EQ(parse_cidr_list(big, nullptr), engine_error);
}

TEST(PolicySyntax, SmallChecks) {
  EXPECT_TRUE(is_token("X-Request-Id"));
  EXPECT_FALSE(is_token(""));
  EXPECT_FALSE(is_token("a b"));
  EXPECT_FALSE(is_token("a:b"));
  EXPECT_EQ(max_capture_reference("/$2/x/$1"), 2);
  EXPECT_EQ(max_capture_reference("/plain"), 0);
  EXPECT_FALSE(check_rewrite_target("/$1"));
  EXPECT_FALSE(check_rewrite_target("/new?x=1"));
  EXPECT_TRUE(check_rewrite_target("/$"));
  EXPECT_TRUE(check_rewrite_target(""));
  EXPECT_FALSE(check_path("/"));
  EXPECT_TRUE(check_path("/a;b"));
  EXPECT_FALSE(check_redirect_url("https://example.com"));
  EXPECT_FALSE(check_redirect_url("http://example.com/x?y=1"));
  EXPECT_FALSE(check_redirect_url("/elsewhere"));
  EXPECT_TRUE(check_redirect_url("https://"));
  EXPECT_TRUE(check_redirect_url("https:///path"));
  EXPECT_TRUE(check_redirect_url("javascript:alert(1)"));
  EXPECT_TRUE(check_redirect_url("https://x/a b"));
  EXPECT_TRUE(check_redirect_url("https://x/{a}"));
  EXPECT_FALSE(check_host_port("example.com"));
  EXPECT_FALSE(check_host_port("example.com:8080"));
  EXPECT_FALSE(check_host_port("10.0.0.1:80"));
  EXPECT_FALSE(check_host_port("[::1]:80"));
  EXPECT_FALSE(check_host_port("[::1]"));
  EXPECT_TRUE(check_host_port("example.com:"));
  EXPECT_TRUE(check_host_port("example.com:0"));
  EXPECT_TRUE(check_host_port("[::1"));
  EXPECT_TRUE(check_host_port("a/b"));
  EXPECT_TRUE(check_host_port(""));
  EXPECT_FALSE(check_cors_origin("*"));
  EXPECT_FALSE(check_cors_origin("https://a.example.com"));
  EXPECT_FALSE(check_cors_origin("http://*.example.com:8080"));
  EXPECT_TRUE(check_cors_origin("example.com"));
  EXPECT_TRUE(check_cors_origin("https://a.example.com/"));
  EXPECT_TRUE(check_cors_origin("https://a.example.com:99999"));
  EXPECT_FALSE(check_object_ref("default/ca-secret"));
  EXPECT_TRUE(check_object_ref("ca-secret"));
  EXPECT_TRUE(check_object_ref("default/Ca"));
  EXPECT_TRUE(check_object_ref("/ca"));
  EXPECT_FALSE(check_response_header("X-A", "v\tw"));
  EXPECT_TRUE(check_response_header("Transfer-Encoding", "chunked"));
  EXPECT_TRUE(check_response_header("X-A", std::string("a\0b", 3)));
}

}  // namespace
}  // namespace tidegate::model
