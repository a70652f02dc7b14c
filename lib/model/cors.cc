#include "model/cors.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "model/object_reader.h"
#include "model/syntax.h"

namespace tidegate::model {

using detail::is_alnum;
using detail::is_digit;
using detail::quote;
using nlohmann::json;

namespace {

// "http(s)://host[:port]" with an optional leading "*." on the host, or "*".
bool is_cors_origin(std::string_view s) {
  if (s == "*") return true;
  std::string_view rest;
  if (s.substr(0, 7) == "http://") {
    rest = s.substr(7);
  } else if (s.substr(0, 8) == "https://") {
    rest = s.substr(8);
  } else {
    return false;
  }
  if (rest.substr(0, 2) == "*.") rest = rest.substr(2);
  size_t colon = rest.rfind(':');
  std::string_view host = rest.substr(0, colon);
  if (colon != std::string_view::npos) {
    std::string_view port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), is_digit) ||
        std::stoul(std::string(port)) > 65535) {
      return false;
    }
  }
  if (host.empty() || host.front() == '.' || host.back() == '.') return false;
  return std::all_of(host.begin(), host.end(),
                     [](char c) { return is_alnum(c) || c == '-' || c == '.'; });
}

void check_tokens(const std::vector<std::string>& items, bool star_alone, const std::string& what,
                  std::vector<std::string>& problems) {
  for (const auto& t : items) {
    if (star_alone && t == "*") {
      if (items.size() != 1) problems.push_back(what + ": \"*\" must be the only entry");
      continue;
    }
    if (!is_token(t)) problems.push_back(what + ": " + quote(t) + " is not a token");
  }
}

}  // namespace

std::optional<std::string> check_cors_origin(std::string_view text) {
  if (!is_cors_origin(text)) return "must be \"*\" or http(s)://host[:port]";
  return std::nullopt;
}

std::vector<std::string> validate(const Cors& c) {
  std::vector<std::string> problems;
  if (c.allow_origins.empty()) problems.push_back("cors allow_origins is empty");
  for (const auto& o : c.allow_origins) {
    if (auto why = check_cors_origin(o)) {
      problems.push_back("cors origin " + quote(o) + ": " + *why);
    } else if (o == "*" && c.allow_origins.size() != 1) {
      problems.push_back("cors origin \"*\" must be the only entry");
    }
  }
  if (c.allow_methods.empty()) problems.push_back("cors allow_methods is empty");
  check_tokens(c.allow_methods, false, "cors allow_methods", problems);
  check_tokens(c.allow_headers, true, "cors allow_headers", problems);
  check_tokens(c.expose_headers, true, "cors expose_headers", problems);
  if (c.max_age_seconds < 0 || c.max_age_seconds > Cors::kMaxMaxAgeSeconds) {
    problems.push_back("cors max_age " + std::to_string(c.max_age_seconds) + " is out of range");
  }
  return problems;
}

json to_json(const Cors& c) {
  const Cors dc;
  json cj = json::object();
  if (c.allow_origins != dc.allow_origins) cj["allow_origins"] = c.allow_origins;
  if (c.allow_methods != dc.allow_methods) cj["allow_methods"] = c.allow_methods;
  if (c.allow_headers != dc.allow_headers) cj["allow_headers"] = c.allow_headers;
  if (c.expose_headers != dc.expose_headers) cj["expose_headers"] = c.expose_headers;
  if (c.allow_credentials != dc.allow_credentials) cj["allow_credentials"] = c.allow_credentials;
  if (c.max_age_seconds != dc.max_age_seconds) cj["max_age_seconds"] = c.max_age_seconds;
  if (c.gateway_api != dc.gateway_api) cj["gateway_api"] = c.gateway_api;
  return cj;
}

Cors cors_from_json(const json& j) {
  Cors c;
  detail::ObjectReader cr(j, "route policy cors");
  cr.strings("allow_origins", c.allow_origins);
  cr.strings("allow_methods", c.allow_methods);
  cr.strings("allow_headers", c.allow_headers);
  cr.strings("expose_headers", c.expose_headers);
  cr.boolean("allow_credentials", c.allow_credentials);
  cr.integer("max_age_seconds", c.max_age_seconds, static_cast<uint64_t>(INT64_MAX));
  cr.boolean("gateway_api", c.gateway_api);
  cr.finish();
  return c;
}

}  // namespace tidegate::model
