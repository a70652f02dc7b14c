#include "model/policy.h"

#include <nlohmann/json.hpp>

#include "model/object_reader.h"
#include "model/syntax.h"
#include "text/text.h"

namespace tidegate::model {

using detail::ObjectReader;
using detail::quote;
using nlohmann::json;

// ---- Upstream (backend) policy ----

const char* to_string(BackendProtocol p) {
  switch (p) {
    case BackendProtocol::kHttp:
      return "HTTP";
    case BackendProtocol::kHttps:
      return "HTTPS";
    case BackendProtocol::kH2c:
      return "H2C";
    case BackendProtocol::kH2:
      return "H2";
  }
  return "?";
}

std::optional<BackendProtocol> backend_protocol_from_string(std::string_view s) {
  if (text::iequals_ascii(s, "HTTP")) return BackendProtocol::kHttp;
  if (text::iequals_ascii(s, "HTTPS")) return BackendProtocol::kHttps;
  if (text::iequals_ascii(s, "H2C")) return BackendProtocol::kH2c;
  if (text::iequals_ascii(s, "H2")) return BackendProtocol::kH2;
  return std::nullopt;
}

std::optional<std::string> check_tls_server_name(std::string_view text) {
  if (detail::is_ipv4(text) || detail::ipv6_mapped(text).has_value()) return std::nullopt;
  // A DNS name: letters may be upper case in DNS, but certificates are matched without case and
  // one spelling keeps upstream identities comparable.
  if (!detail::is_dns_subdomain(text))
    return "must be a lower-case DNS name (no wildcard) or an IP address";
  return std::nullopt;
}

std::vector<std::string> validate(const UpstreamPolicy& p) {
  std::vector<std::string> problems;
  validate_balancing(p, problems);
  if (!p.tls_secret.empty()) {
    if (auto why = check_object_ref(p.tls_secret)) {
      problems.push_back("tls_secret " + quote(p.tls_secret) + ": " + *why);
    }
    if (!uses_tls(p.protocol)) {
      problems.push_back("tls_secret is set but the backend protocol has no TLS");
    }
  }
  if (!p.tls_server_name.empty()) {
    if (auto why = check_tls_server_name(p.tls_server_name)) {
      problems.push_back("tls_server_name " + quote(p.tls_server_name) + ": " + *why);
    }
    if (!uses_tls(p.protocol)) {
      problems.push_back("tls_server_name is set but the backend protocol has no TLS");
    }
  }
  return problems;
}

json to_json(const UpstreamPolicy& p) {
  const UpstreamPolicy d;
  json j = json::object();
  balancing_to_json(p, j);
  if (p.protocol != d.protocol) j["protocol"] = to_string(p.protocol);
  if (!p.tls_secret.empty()) j["tls_secret"] = p.tls_secret;
  if (!p.tls_server_name.empty()) j["tls_server_name"] = p.tls_server_name;
  if (p.service_upstream) j["service_upstream"] = true;
  return j;
}

UpstreamPolicy upstream_policy_from_json(const json& j) {
  UpstreamPolicy p;
  ObjectReader r(j, "upstream policy");
  balancing_from_json(r, p);
  if (const json* v = r.find("protocol")) {
    auto proto =
        v->is_string() ? backend_protocol_from_string(v->get<std::string>()) : std::nullopt;
    if (!proto) r.fail("protocol", "must be \"HTTP\", \"HTTPS\", \"H2C\" or \"H2\"");
    p.protocol = *proto;
  }
  r.string("tls_secret", p.tls_secret);
  r.string("tls_server_name", p.tls_server_name);
  r.boolean("service_upstream", p.service_upstream);
  r.finish();
  return p;
}

// ---- Route policy ----

namespace {

void append(std::vector<std::string>& problems, std::vector<std::string> more) {
  for (auto& problem : more) problems.push_back(std::move(problem));
}

}  // namespace

std::vector<std::string> validate(const RoutePolicy& p) {
  std::vector<std::string> problems;
  validate_timeouts(p, problems);
  validate_rewrites(p, problems);
  validate_headers(p, problems);
  if (p.cors) append(problems, validate(*p.cors));
  if (p.external_auth) append(problems, validate(*p.external_auth));
  if (p.basic_auth) append(problems, validate(*p.basic_auth));
  if (p.compression) append(problems, validate(*p.compression));
  if (p.sendfile) append(problems, validate(*p.sendfile));
  if (p.hsts) append(problems, validate(*p.hsts));
  if (p.source_ranges) validate_allow_ranges(*p.source_ranges, problems);
  if (p.error_codes.size() > RoutePolicy::kMaxErrorCodes) {
    problems.push_back("more than 64 error codes");
  }
  for (size_t i = 0; i < p.error_codes.size(); ++i) {
    if (p.error_codes[i] < 400 || p.error_codes[i] > 599) {
      problems.push_back("error code " + std::to_string(p.error_codes[i]) + " is not 400-599");
    }
    if (i > 0 && p.error_codes[i] <= p.error_codes[i - 1]) {
      problems.push_back("error codes are not sorted and unique");
    }
  }
  if (p.deny_ranges) validate_deny_ranges(*p.deny_ranges, problems);
  append(problems, validate(p.rate_limits));
  append(problems, validate(p.mirrors));
  return problems;
}

json to_json(const RoutePolicy& p) {
  const RoutePolicy d;
  json j = json::object();
  timeouts_to_json(p, j);
  rewrites_to_json(p, j);
  headers_to_json(p, j);
  if (p.cors) j["cors"] = to_json(*p.cors);
  if (p.hsts) j["hsts"] = to_json(*p.hsts);
  if (p.source_ranges) j["source_ranges"] = to_json(*p.source_ranges);
  if (p.deny_ranges) j["deny_ranges"] = to_json(*p.deny_ranges);
  if (!p.error_codes.empty()) j["error_codes"] = p.error_codes;
  if (p.basic_auth) j["basic_auth"] = to_json(*p.basic_auth);
  if (p.external_auth) j["external_auth"] = to_json(*p.external_auth);
  if (p.compression) j["compression"] = to_json(*p.compression);
  if (p.sendfile) j["sendfile"] = to_json(*p.sendfile);
  if (p.cache) j["cache"] = true;
  if (!p.mirrors.empty()) j["mirrors"] = to_json(p.mirrors);
  if (p.rate_limits != d.rate_limits) j["rate_limits"] = to_json(p.rate_limits);
  return j;
}

RoutePolicy route_policy_from_json(const json& j) {
  RoutePolicy p;
  ObjectReader r(j, "route policy");
  timeouts_from_json(r, p);
  rewrites_from_json(r, p);
  headers_from_json(r, p);
  if (const json* v = r.find("cors")) p.cors = cors_from_json(*v);
  if (const json* v = r.find("hsts")) p.hsts = hsts_from_json(*v);
  if (const json* v = r.find("basic_auth")) p.basic_auth = basic_auth_from_json(*v);
  if (const json* v = r.find("external_auth")) p.external_auth = external_auth_from_json(*v);
  if (const json* v = r.find("compression")) p.compression = compression_from_json(*v);
  if (const json* v = r.find("sendfile")) p.sendfile = sendfile_from_json(*v);
  r.boolean("cache", p.cache);
  if (const json* v = r.find("mirrors")) p.mirrors = mirrors_from_json(*v);
  source_ranges_from_json(r, "source_ranges", p.source_ranges);
  if (const json* v = r.find("error_codes")) {
    if (!v->is_array()) r.fail("error_codes", "must be an array");
    for (const auto& code : *v) {
      if (!code.is_number_unsigned() || code.get<uint64_t>() > 999) {
        r.fail("error_codes", "must hold status codes");
      }
      p.error_codes.push_back(code.get<uint16_t>());
    }
  }
  source_ranges_from_json(r, "deny_ranges", p.deny_ranges);
  if (const json* v = r.find("rate_limits")) p.rate_limits = rate_limits_from_json(*v);
  r.finish();
  return p;
}

}  // namespace tidegate::model
