#include "server/cors.h"

#include <algorithm>

#include "text/text.h"

namespace tidegate::dataplane::server {

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

// Splits "scheme://host[:port]" into its parts; false when it is not of that form.
bool split_origin(std::string_view origin, std::string_view* scheme, std::string_view* host,
                  std::string_view* port) {
  size_t sep = origin.find("://");
  if (sep == std::string_view::npos) return false;
  *scheme = origin.substr(0, sep + 3);
  std::string_view rest = origin.substr(sep + 3);
  // An IPv6 literal's colons are inside brackets; a port follows the last ':' after them.
  size_t bracket = rest.rfind(']');
  size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    *host = rest.substr(0, colon);
    *port = rest.substr(colon);
  } else {
    *host = rest;
    *port = {};
  }
  return !host->empty() && host->find('/') == std::string_view::npos;
}

}  // namespace

CompiledCors::CompiledCors(const model::Cors& cors) {
  for (const auto& origin : cors.allow_origins) {
    if (origin == "*") {
      any_origin_ = true;
      continue;
    }
    std::string_view scheme, host, port;
    if (!split_origin(origin, &scheme, &host, &port)) continue;  // validated by the controller
    Pattern p;
    p.scheme = text::ascii_lower(std::string(scheme));
    if (host.substr(0, 2) == "*.") {
      p.wildcard = true;
      host.remove_prefix(1);  // keep the '.'
    }
    p.host = text::ascii_lower(std::string(host));
    p.port = std::string(port);
    patterns_.push_back(std::move(p));
  }
  answer_preflights_ = cors.gateway_api;
  echo_ = cors.gateway_api && cors.allow_credentials;
  credentials_ = cors.allow_credentials && (!any_origin_ || echo_);
  echo_methods_ = echo_ && cors.allow_methods == std::vector<std::string>{"*"};
  echo_headers_ = echo_ && cors.allow_headers == std::vector<std::string>{"*"};
  allow_methods_ = join(cors.allow_methods);
  allow_headers_ = join(cors.allow_headers);
  expose_headers_ = join(cors.expose_headers);
  max_age_ = std::to_string(cors.max_age_seconds);
}

bool CompiledCors::matches(const Pattern& p, std::string_view scheme, std::string_view host,
                           std::string_view port) {
  if (!iequal(scheme, p.scheme) || port != p.port) return false;
  if (!p.wildcard) return iequal(host, p.host);
  // "*.example.org" needs at least one label in front of ".example.org".
  return host.size() > p.host.size() && host[host.size() - p.host.size() - 1] != '.' &&
         iequal(host.substr(host.size() - p.host.size()), p.host);
}

bool CompiledCors::allows(std::string_view origin) const {
  if (origin.empty()) return false;
  if (any_origin_) return true;
  std::string_view scheme, host, port;
  if (!split_origin(origin, &scheme, &host, &port)) return false;
  return std::any_of(patterns_.begin(), patterns_.end(),
                     [&](const Pattern& p) { return matches(p, scheme, host, port); });
}

}  // namespace tidegate::dataplane::server
