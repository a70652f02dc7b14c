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

// ASCII letters lowered; other bytes as they are (no locale).
inline std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// "base[i]": a position in a list, as Kubernetes field paths write it.
inline std::string index_path(std::string_view base, size_t i) {
  return std::string(base) + "[" + std::to_string(i) + "]";
}

}  // namespace tidegate::text
