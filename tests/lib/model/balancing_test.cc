// lib/model/balancing: load balancing, consistent hashing and cookie affinity of an upstream:
// the names, JSON, validate(), and the hash expressions cross-checked against the data plane's
// compiler.

#include "model/balancing.h"

#include <gtest/gtest.h>

#include <iomanip>

#include "balancer/cookie_affinity.h"
#include "balancer/endpoint_table.h"
#include "balancer/hash_expression.h"
#include "lib/model/policy_cases.h"
#include "model/policy.h"

namespace tidegate::model {
namespace {

using namespace policy_cases;

TEST(PolicyBalancing, AffinityDefaultsMatchTheEngine) {
  const SessionAffinity ours;
  const dataplane::balancer::AffinityConfig engine;
  EXPECT_EQ(ours.cookie_name, engine.cookie_name);
  EXPECT_EQ(ours.secure, engine.secure);
  EXPECT_FALSE(ours.max_age_seconds);
  EXPECT_FALSE(engine.max_age);
}

TEST(PolicyBalancing, NamesRoundTripAndRefuseUnknown) {
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
}

TEST(PolicyBalancing, EachFieldRoundTripsAlone) {
  const UpstreamPolicy full = full_upstream_policy();
  expect_upstream_fields_round_trip_alone({
      {"load_balance", [&](UpstreamPolicy& p) { p.load_balance = LoadBalance::kIpHash; }},
      {"hash_by", [&](UpstreamPolicy& p) { p.hash_by = full.hash_by; }},
      {"affinity (defaults)", [&](UpstreamPolicy& p) { p.affinity = SessionAffinity{}; }},
      {"affinity", [&](UpstreamPolicy& p) { p.affinity = full.affinity; }},
      {"affinity max-age 0", [&](UpstreamPolicy& p) { p.affinity = affinity("a", 0); }},
  });
}

TEST(PolicyBalancing, MalformedInputIsRefusedWithTheFieldNamed) {
  expect_upstream_refused({
      {R"({"load_balance": "random"})", "load_balance"},
      {R"({"affinity": {"same_site": "Sometimes"}})", "same_site"},
      {R"({"affinity": {"max_age_seconds": "1"}})", "max_age_seconds"},
      {R"({"affinity": {"expires_seconds": 1.5}})", "expires_seconds"},
      {R"({"affinity": {"cookie": "a"}})", "affinity: unknown field \"cookie\""},
      {R"({"hash_by": 1})", "hash_by"},
  });
}

TEST(PolicyBalancing, EachBadFieldIsReported) {
  expect_each_reported_alone<UpstreamPolicy>({
      {"hash", [](UpstreamPolicy& p) { p.hash_by = "$host"; }, "hash_by"},
      {"cookie name", [](UpstreamPolicy& p) { p.affinity = affinity("a=b"); }, "cookie name"},
      {"max age", [](UpstreamPolicy& p) { p.affinity = affinity("a", -1); }, "max-age"},
      {"path", [](UpstreamPolicy& p) { p.affinity = affinity("a", {}, "x;y"); }, "path"},
      {"domain",
       [](UpstreamPolicy& p) {
         p.affinity = affinity("a");
         p.affinity->domain = "Example.com";
       },
       "cookie domain"},
      {"expires",
       [](UpstreamPolicy& p) {
         p.affinity = affinity("a");
         p.affinity->expires_seconds = SessionAffinity::kMaxMaxAgeSeconds + 1;
       },
       "affinity expires"},
  });
  EXPECT_FALSE(check_cookie_domain(".example.com"));
  EXPECT_TRUE(check_cookie_domain("."));
  EXPECT_TRUE(check_cookie_domain("a..b"));
}

TEST(PolicyBalancing, HashExpressionsAgreeWithTheDataPlaneCompiler) {
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

}  // namespace
}  // namespace tidegate::model
