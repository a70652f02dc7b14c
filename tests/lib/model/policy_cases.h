#pragma once
// Shared parts of the policy tests: tests/lib/policy_test.cc (the aggregates) and
// tests/lib/model/<family>_test.cc (one file per family of lib/model). The fully set policies,
// small builders, and the table runners every family's tables use.

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/policy.h"

namespace tidegate::model::policy_cases {

using nlohmann::json;

inline std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

inline SessionAffinity affinity(std::string name, std::optional<int64_t> max_age = {},
                                std::string path = "") {
  SessionAffinity a;
  a.cookie_name = std::move(name);
  a.max_age_seconds = max_age;
  a.path = std::move(path);
  return a;
}

inline Cors cors_for(std::vector<std::string> origins) {
  Cors c;
  c.allow_origins = std::move(origins);
  return c;
}

inline Canary canary(std::string upstream, uint32_t weight, uint32_t total = 100,
                     std::string header = "", std::string value = "", std::string cookie = "") {
  return Canary{std::move(upstream), weight,           total,
                std::move(header),   std::move(value), std::move(cookie)};
}

// Every route field set to a valid value other than its default.
inline RoutePolicy full_route_policy() {
  using namespace std::chrono_literals;
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
  p.cors->gateway_api = true;
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
  p.mirrors = {Mirror{"default/shadow:80", 1, 3}, Mirror{"default/audit:80"}};
  p.request_timeout = std::chrono::milliseconds(7500);
  return p;
}

// Every upstream field the tables use set to a valid value other than its default.
inline UpstreamPolicy full_upstream_policy() {
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

template <class P>
using Setters = std::vector<std::pair<const char*, std::function<void(P&)>>>;

// Each field alone, so that a field the encoder forgets (or the decoder drops) fails by name.
inline void expect_route_fields_round_trip_alone(const Setters<RoutePolicy>& fields) {
  for (const auto& [name, set] : fields) {
    RoutePolicy p;
    set(p);
    ASSERT_NE(p, RoutePolicy{}) << name;
    json j = to_json(p);
    EXPECT_NE(j.dump(), "{}") << name;
    EXPECT_EQ(route_policy_from_json(json::parse(j.dump())), p) << name << ": " << j.dump();
  }
}

inline void expect_upstream_fields_round_trip_alone(const Setters<UpstreamPolicy>& fields) {
  for (const auto& [name, set] : fields) {
    UpstreamPolicy p;
    set(p);
    ASSERT_NE(p, UpstreamPolicy{}) << name;
    json j = to_json(p);
    EXPECT_EQ(upstream_policy_from_json(json::parse(j.dump())), p) << name << ": " << j.dump();
  }
}

// A JSON text a decoder must refuse, and a substring of the error (the field's name).
struct Malformed {
  const char* text;
  const char* want;
};

inline void expect_refused(const std::vector<Malformed>& cases,
                           const std::function<void(const json&)>& decode) {
  for (const auto& c : cases) {
    std::string error;
    try {
      json j = json::parse(c.text);
      decode(j);
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_NE(error.find(c.want), std::string::npos) << c.text << " -> " << error;
  }
}

inline void expect_route_refused(const std::vector<Malformed>& cases) {
  expect_refused(cases, [](const json& j) { route_policy_from_json(j); });
}

inline void expect_upstream_refused(const std::vector<Malformed>& cases) {
  expect_refused(cases, [](const json& j) { upstream_policy_from_json(j); });
}

// One bad field each: validate() reports exactly one problem, which holds `want`.
template <class P>
using BadCases = std::vector<std::tuple<const char*, std::function<void(P&)>, const char*>>;

template <class P>
void expect_each_reported_alone(const BadCases<P>& cases) {
  for (const auto& [name, set, want] : cases) {
    P p;
    set(p);
    auto problems = validate(p);
    ASSERT_EQ(problems.size(), 1u) << name << ":\n" << joined(problems);
    EXPECT_NE(problems[0].find(want), std::string::npos) << name << ": " << problems[0];
  }
}

}  // namespace tidegate::model::policy_cases
