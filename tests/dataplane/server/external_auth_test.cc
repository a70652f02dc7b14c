// auth-url's parts: the URL, the Service its host names, the templates (parsed by the model,
// expanded by the data plane), auth-cache-duration and the per-worker cache.

#include "server/external_auth.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tidegate::dataplane::server {
namespace {

namespace http = boost::beast::http;
using model::TemplateVariable;

TEST(ExternalAuthUrl, Parts) {
  struct Row {
    std::string url;
    bool ok = false;
    bool https = false;
    std::string host = {};
    uint16_t port = 0;
    std::string target = {};
    std::string authority = {};
  };
  const std::vector<Row> rows = {
      {"http://auth/", true, false, "auth", 80, "/", "auth"},
      {"HTTPS://Auth.NS.svc:8443/check?u=$host", true, true, "auth.ns.svc", 8443, "/check?u=$host",
       "auth.ns.svc:8443"},
      {"http://auth?x=1", true, false, "auth", 80, "/?x=1", "auth"},
      {"http://auth", true, false, "auth", 80, "/", "auth"},
      {"ftp://auth/", false},
      {"http://user@auth/", false},
      {"http://auth:0/", false},
      {"http://auth:99999/", false},
      {"http://$host/", false},
      {"http://auth/#frag", false},
      {"http://auth/a b", false},
      {"http://auth/$nope", false},
      {"http:///x", false},
  };
  for (const auto& r : rows) {
    std::string error;
    auto got = model::parse_auth_url(r.url, &error);
    ASSERT_EQ(got.has_value(), r.ok) << r.url << ": " << error;
    if (!got) {
      EXPECT_FALSE(error.empty()) << r.url;
      continue;
    }
    EXPECT_EQ(got->https, r.https) << r.url;
    EXPECT_EQ(got->host, r.host) << r.url;
    EXPECT_EQ(got->port, r.port) << r.url;
    EXPECT_EQ(got->target, r.target) << r.url;
    EXPECT_EQ(got->authority(), r.authority) << r.url;
  }
}

TEST(ExternalAuthUrl, ServiceOfHost) {
  const std::vector<std::pair<std::string, std::optional<std::string>>> rows = {
      {"auth", "web/auth"},
      {"auth.sso", "sso/auth"},
      {"auth.sso.svc", "sso/auth"},
      {"auth.sso.svc.cluster.local", "sso/auth"},
      {"auth.sso.svc.corp.internal", "sso/auth"},
      {"auth.example.com", std::nullopt},
      {"10.0.0.1", std::nullopt},
      {"-auth", std::nullopt},
      {"auth.sso.pod", std::nullopt},
  };
  for (const auto& [host, want] : rows) {
    EXPECT_EQ(model::service_of_auth_host(host, "web"), want) << host;
  }
}

TEST(ExternalAuthTemplate, ParseAndExpand) {
  std::vector<model::TemplatePart> parts;
  EXPECT_EQ(*model::parse_template("a$missing", &parts), "uses the unknown variable $missing");
  EXPECT_TRUE(model::parse_template("$1", &parts).has_value()) << "no captures here";
  ASSERT_FALSE(model::parse_template(
                   "$scheme://$host${request_uri}|$http_x_user|$cookie_sid|$arg_page|$uri|$args|"
                   "$remote_addr|$request_method|$escaped_request_uri|$http_host",
                   &parts)
                   .has_value());
  EXPECT_EQ(parts[5].variable, TemplateVariable::kHeader);
  EXPECT_EQ(parts[5].text, "x-user");
  Fields fields;
  fields.set(http::field::host, "Shop.Example:8443");
  fields.set("X-User", "ann");
  fields.insert(http::field::cookie, "a=1; sid=s3cr3t");
  TemplateRequest req;
  req.https = true;
  req.host_header = "Shop.Example:8443";
  req.target = "/cart/view?page=2&q=a b";
  req.method = "POST";
  req.remote_addr = "192.0.2.7";
  req.fields = &fields;
  EXPECT_EQ(expand_template(parts, req),
            "https://shop.example/cart/view?page=2&q=a b|ann|s3cr3t|2|/cart/view|page=2&q=a b|"
            "192.0.2.7|POST|%2Fcart%2Fview%3Fpage%3D2%26q%3Da%20b|Shop.Example:8443");
  // Absent values are empty; literal text is kept as written.
  ASSERT_FALSE(model::parse_template("k=$cookie_none;$http_none;$arg_none!", &parts));
  EXPECT_EQ(expand_template(parts, req), "k=;;!");
  for (std::string bad : {"$", "${", "${}", "${a-b}", "a$", "$remote_user", "${host"}) {
    EXPECT_TRUE(model::parse_template(bad, &parts).has_value()) << bad;
  }
}

TEST(ExternalAuthCache, Durations) {
  std::string error;
  auto rules = model::parse_auth_cache_duration("200 202 10m, 401 30s,any 1h, 5", &error);
  ASSERT_TRUE(rules) << error;
  ASSERT_EQ(rules->size(), 4u);
  EXPECT_EQ((*rules)[0], (model::AuthCacheRule{{200, 202}, 600}));
  EXPECT_EQ((*rules)[1], (model::AuthCacheRule{{401}, 30}));
  EXPECT_EQ((*rules)[2], (model::AuthCacheRule{{}, 3600}));
  EXPECT_EQ((*rules)[3], (model::AuthCacheRule{{}, 5}));
  for (std::string bad : {"", "200 5x", "99 5m", "200 5m,", "200 31d", "abc 1m"}) {
    EXPECT_FALSE(model::parse_auth_cache_duration(bad, &error)) << bad;
  }
  model::ExternalAuth a;
  a.url = "http://auth/";
  a.cache_key = "$http_authorization";
  a.cache_rules = {{{200}, 60}, {{}, 0}};
  CompiledExternalAuth compiled(a, 2);
  ASSERT_TRUE(compiled.usable);
  ASSERT_TRUE(compiled.cache);
  EXPECT_EQ(compiled.cache_time(200), std::chrono::seconds(60));
  EXPECT_EQ(compiled.cache_time(401), std::nullopt) << "a zero time keeps nothing";
}

TEST(ExternalAuthCache, PerWorkerExpiringAndBounded) {
  AuthCache cache(2);
  const auto t0 = std::chrono::steady_clock::now();
  cache.store(0, "k", AuthAnswer{200, {{"x-user", "ann"}}}, t0 + std::chrono::seconds(10));
  const AuthAnswer* hit = cache.find(0, "k", t0);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->status, 200u);
  EXPECT_EQ(hit->fields.at(0).second, "ann");
  EXPECT_EQ(cache.find(1, "k", t0), nullptr) << "another worker's shard";
  EXPECT_EQ(cache.find(0, "k", t0 + std::chrono::seconds(10)), nullptr) << "expired";
  EXPECT_EQ(cache.size(0), 0u) << "an expired entry is dropped when found";
  for (size_t i = 0; i < AuthCache::kMaxEntriesPerWorker + 5; ++i) {
    cache.store(1, std::to_string(i), AuthAnswer{204, {}}, t0 + std::chrono::hours(1));
  }
  EXPECT_LE(cache.size(1), AuthCache::kMaxEntriesPerWorker);
  EXPECT_NE(cache.find(1, std::to_string(AuthCache::kMaxEntriesPerWorker + 4), t0), nullptr);
}

TEST(ExternalAuthModel, JsonRoundTripAndValidation) {
  model::ExternalAuth a;
  a.url = "https://auth.sso.svc/check?h=$host";
  a.upstream = "sso/auth:443+https";
  a.method = "POST";
  a.signin = "https://$host/start";
  a.signin_redirect_param = "next";
  a.response_headers = {"x-user"};
  a.request_redirect = "$request_uri";
  a.cache_key = "$http_authorization";
  a.cache_rules = {{{200}, 60}};
  a.always_set_cookie = true;
  EXPECT_TRUE(model::validate(a).empty());
  EXPECT_EQ(model::external_auth_from_json(model::to_json(a)), a);
  EXPECT_TRUE(model::validate(model::ExternalAuth{}).empty()) << "the fail-closed form";
  model::ExternalAuth bad = a;
  bad.method = "FETCH";
  bad.response_headers = {"X-User", "x-user", "x-user"};
  bad.signin = "$nope";
  EXPECT_EQ(model::validate(bad).size(), 4u);
  EXPECT_THROW(model::external_auth_from_json(nlohmann::json{{"url", 1}}), std::runtime_error);
  EXPECT_THROW(model::external_auth_from_json(nlohmann::json{{"other", "x"}}), std::runtime_error);
}

}  // namespace
}  // namespace tidegate::dataplane::server
