#pragma once
// Small text helpers shared by the controller and the data plane.

#include <cstddef>
#include <string>
#include <string_view>

namespace tidegate::text {

// Without leading and trailing spaces and tabs (HTTP's optional whitespace, RFC 9110 5.6.3).
inline std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Equal ignoring the case of ASCII letters (no locale).
inline bool iequals_ascii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Whether the comma-separated `list` (an HTTP field value such as Connection, Vary or
// Cache-Control) has the element `token`, compared case-insensitively.
inline bool has_token(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (iequals_ascii(trim_ows(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// The value of a hexadecimal digit, or -1 (percent-decoding).
inline int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// ASCII letters lowered; other bytes as they are (no locale).
inline std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// Percent-encodes every byte but RFC 3986's unreserved characters (letters, digits, "-._~"), as
// nginx's ngx_escape_uri does for a URI component: a query value, a header carrying a PEM.
inline std::string percent_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// "base[i]": a position in a list, as Kubernetes field paths write it.
inline std::string index_path(std::string_view base, size_t i) {
  return std::string(base) + "[" + std::to_string(i) + "]";
}

}  // namespace tidegate::text
