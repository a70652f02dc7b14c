#include "model/syntax.h"

#include <arpa/inet.h>

#include <algorithm>

namespace tidegate::model {

namespace detail {

bool is_visible(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

bool is_dns_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (label.empty() || label.size() > 63) return false;
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-')) return false;
    }
    if (label.front() == '-' || label.back() == '-') return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool is_ipv4(std::string_view s) {
  size_t pos = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (pos >= s.size() || s[pos] != '.') return false;
      ++pos;
    }
    size_t start = pos;
    unsigned value = 0;
    while (pos < s.size() && is_digit(s[pos]) && pos - start < 3) {
      value = value * 10 + static_cast<unsigned>(s[pos] - '0');
      ++pos;
    }
    const size_t digits = pos - start;
    if (digits == 0 || value > 255 || (digits > 1 && s[start] == '0')) return false;
  }
  return pos == s.size();
}

std::optional<bool> ipv6_mapped(std::string_view s) {
  char buf[64];
  if (s.empty() || s.size() >= sizeof buf) return std::nullopt;
  std::copy(s.begin(), s.end(), buf);
  buf[s.size()] = '\0';
  unsigned char bytes[16];
  if (inet_pton(AF_INET6, buf, bytes) != 1) return std::nullopt;
  static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::equal(std::begin(kMapped), std::end(kMapped), bytes);
}

}  // namespace detail

using detail::is_dns_subdomain;
using detail::is_visible;

std::optional<std::string> check_path(std::string_view text) {
  if (text.empty() || text.front() != '/') return "must start with '/'";
  if (text.size() > 4096) return "longer than 4096 bytes";
  if (!is_visible(text) || text.find(';') != std::string_view::npos) {
    return "may hold only printable characters other than spaces and ';'";
  }
  return std::nullopt;
}

std::optional<std::string> check_object_ref(std::string_view text) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) return "must be \"namespace/name\"";
  if (!is_dns_subdomain(text.substr(0, slash))) return "the namespace is not a valid name";
  if (!is_dns_subdomain(text.substr(slash + 1))) return "the name is not a valid object name";
  return std::nullopt;
}

}  // namespace tidegate::model
