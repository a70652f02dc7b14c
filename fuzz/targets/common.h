#pragma once
// Shared by the fuzz targets. A target is a function `std::string run_x(const uint8_t*, size_t)`
// that returns the empty string when every invariant held, else a description of the broken one.
// It must also never crash and never let an exception escape for any input. The libFuzzer entry
// files (fuzz/*_fuzz.cc) abort on a non-empty answer; tests/fuzz_replay_test.cc runs the same
// functions over every seed corpus file in the normal unit test run.

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

namespace tidegate::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Printable form of a byte string for failure messages.
inline std::string escape(std::string_view s, size_t limit = 200) {
  std::ostringstream o;
  size_t n = 0;
  for (unsigned char c : s) {
    if (n++ == limit) {
      o << "...";
      break;
    }
    if (c == '\\') {
      o << "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      o << c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      o << "\\x" << kHex[c >> 4] << kHex[c & 0xf];
    }
  }
  return o.str();
}

}  // namespace tidegate::fuzz

// Returns a description from the enclosing target when `cond` does not hold.
#define TIDEGATE_FUZZ_CHECK(cond, what)                                                 \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::ostringstream tidegate_fuzz_message_;                                        \
      tidegate_fuzz_message_ << __FILE__ << ":" << __LINE__ << ": " #cond ": " << what; \
      return tidegate_fuzz_message_.str();                                              \
    }                                                                                   \
  } while (0)
