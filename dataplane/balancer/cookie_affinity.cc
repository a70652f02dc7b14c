#include "balancer/cookie_affinity.h"

#include <chrono>
#include <ctime>

#include "balancer/request_view.h"
#include "text/http_syntax.h"
#include "text/text.h"

namespace tidegate::dataplane::balancer {

std::optional<SameSite> same_site_from_string(std::string_view s) {
  if (text::iequals_ascii(s, "lax")) return SameSite::kLax;
  if (text::iequals_ascii(s, "strict")) return SameSite::kStrict;
  if (text::iequals_ascii(s, "none")) return SameSite::kNone;
  return std::nullopt;
}

std::optional<std::string> AffinityConfig::validate() const {
  if (cookie_name.empty()) return "cookie name is empty";
  for (char c : cookie_name) {
    if (!text::is_tchar(static_cast<unsigned char>(c))) {
      return "cookie name \"" + cookie_name + "\" may not contain '" + std::string(1, c) + "'";
    }
  }
  if (path.empty() || path.front() != '/') return "cookie path must start with '/'";
  for (char c : path) {
    if (c < 0x21 || c > 0x7e || c == ';') {
      return "cookie path \"" + path + "\" may hold only printable characters other than ';'";
    }
  }
  if (max_age && max_age->count() < 0) return "cookie max-age must not be negative";
  if (expires && expires->count() < 0) return "cookie expires must not be negative";
  for (char c : domain) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    if (!ok) return "cookie domain \"" + domain + "\" must be a lower-case DNS name";
  }
  return std::nullopt;
}

std::string CookieAffinity::cookie_value(uint64_t h) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<size_t>(i)] = kHex[h & 0xf];
    h >>= 4;
  }
  return out;
}

std::optional<uint64_t> CookieAffinity::parse_cookie_value(std::string_view v) {
  if (v.size() != 16) return std::nullopt;
  uint64_t h = 0;
  for (char c : v) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    h = (h << 4) | static_cast<uint64_t>(d);
  }
  return h;
}

uint32_t CookieAffinity::endpoint_for(const EndpointTable& table,
                                      std::string_view cookie_header) const {
  auto h = parse_cookie_value(find_cookie(cookie_header, config_.cookie_name));
  return h ? table.find_by_hash(*h) : kNone;
}

bool CookieAffinity::needs_cookie(const EndpointTable& table, std::string_view cookie_header,
                                  uint32_t picked) const {
  return endpoint_for(table, cookie_header) != picked;
}

std::string CookieAffinity::set_cookie(const EndpointTable& table, uint32_t index,
                                       std::string_view path) const {
  std::string out = config_.cookie_name;
  out += '=';
  out += cookie_value(table.endpoint_hash(index));
  out += "; Path=";
  out += path;
  if (!config_.domain.empty()) {
    out += "; Domain=";
    out += config_.domain;
  }
  if (config_.max_age) out += "; Max-Age=" + std::to_string(config_.max_age->count());
  if (config_.expires) {
    // RFC 9110 IMF-fixdate, as RFC 6265's Expires reads it.
    const std::time_t at =
        std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() + *config_.expires);
    std::tm tm{};
    gmtime_r(&at, &tm);
    char date[40];
    const size_t n = std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    out += "; Expires=";
    out.append(date, n);
  }
  if (config_.secure || config_.same_site == SameSite::kNone) out += "; Secure";
  // Scripts have no business reading a routing cookie.
  out += "; HttpOnly";
  switch (config_.same_site) {
    case SameSite::kLax:
      out += "; SameSite=Lax";
      break;
    case SameSite::kStrict:
      out += "; SameSite=Strict";
      break;
    case SameSite::kNone:
      out += "; SameSite=None";
      break;
    case SameSite::kUnset:
      break;
  }
  return out;
}

}  // namespace tidegate::dataplane::balancer
