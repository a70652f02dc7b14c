#pragma once
// RFC 9110 syntax shared by the controller's validation (lib/model) and the data plane's checks
// of requests and responses: one definition of a token and of a field value, so that what the
// controller accepts in an annotation is exactly what the data plane accepts on the wire.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace tidegate::text {

namespace detail {
inline constexpr std::array<bool, 256> kTchar = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) {
    t[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  }
  return t;
}();
}  // namespace detail

// A token character (RFC 9110 section 5.6.2): letters, digits and !#$%&'*+-.^_`|~.
constexpr bool is_tchar(unsigned char c) { return detail::kTchar[c]; }

// A token: header names, methods, cookie names.
inline bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (!is_tchar(c)) return false;
  }
  return true;
}

// A byte a field value may hold (RFC 9110 section 5.5): VCHAR, obs-text, SP and HTAB; no CR,
// LF, NUL or other controls.
constexpr bool is_field_byte(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

// A field value (empty included).
inline bool is_field_value(std::string_view s) {
  const char* p = s.data();
  std::size_t n = s.size();
  // Eight bytes at a time: a word with no byte below 0x20 and none equal to 0x7f is valid
  // (obs-text, 0x80 and up, included). From a word with a tab or a bad byte on, byte by byte.
  // (x - 0x20 in each byte) & ~x & 0x80 in each byte is non-zero exactly when a byte is below
  // 0x20: a borrow reaches a higher byte only from a byte that is below 0x20 itself.
  constexpr std::uint64_t kOnes = 0x0101010101010101, kHighs = 0x8080808080808080;
  while (n >= 8) {
    std::uint64_t x;
    std::memcpy(&x, p, 8);
    const std::uint64_t del = x ^ (kOnes * 0x7f);
    if ((((x - kOnes * 0x20) & ~x) | ((del - kOnes) & ~del)) & kHighs) break;
    p += 8;
    n -= 8;
  }
  for (; n > 0; ++p, --n) {
    if (!is_field_byte(static_cast<unsigned char>(*p))) return false;
  }
  return true;
}

}  // namespace tidegate::text
