#pragma once
// Fuzz target: the path normalizer (router/path_normalize.h) under each of its six option sets.
//
// Input: a path ('/' is put in front when it does not start with one; the input as it is must
// then be refused as kNotAbsolute).
//
// Invariants, for every option set where the path is accepted:
//   - the output starts with '/', has no "." or ".." segment, and normalizing it again gives it
//     back (idempotent); is_normal_path() never passes an input that normalization changes;
//   - every '%' in the output starts an escape with two upper-case hex digits of an octet that
//     is not unreserved; with decode or reject there is no '\', %2F or %5C left; with
//     merge_slashes there is no "//";
//   - without '%' in the input and without merging, the output (or the above-root refusal)
//     equals RFC 3986 section 5.2.4's remove_dot_segments, written here from the RFC's text,
//     where "going above the root" is the RFC's step 2C with an empty output buffer.

#include <cstdint>
#include <string>
#include <string_view>

#include "common.h"
#include "router/path_normalize.h"

namespace tidegate::fuzz {

namespace detail {

// RFC 3986 section 5.2.4, step by step. Sets *above_root when a ".." had nothing to remove.
inline std::string rfc3986_remove_dot_segments(std::string input, bool* above_root) {
  std::string output;
  *above_root = false;
  auto remove_last_segment = [&] {
    if (output.empty()) {
      *above_root = true;
      return;
    }
    auto slash = output.rfind('/');
    output.erase(slash == std::string::npos ? 0 : slash);
  };
  while (!input.empty()) {
    if (input.starts_with("../")) {
      input.erase(0, 3);
    } else if (input.starts_with("./")) {
      input.erase(0, 2);
    } else if (input.starts_with("/./")) {
      input.replace(0, 3, "/");
    } else if (input == "/.") {
      input = "/";
    } else if (input.starts_with("/../")) {
      input.replace(0, 4, "/");
      remove_last_segment();
    } else if (input == "/..") {
      input = "/";
      remove_last_segment();
    } else if (input == "." || input == "..") {
      input.clear();
    } else {
      size_t end = input.find('/', input.front() == '/' ? 1 : 0);
      if (end == std::string::npos) end = input.size();
      output.append(input, 0, end);
      input.erase(0, end);
    }
  }
  return output;
}

inline bool has_dot_segment(std::string_view path) {
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start + 1);
    if (end == std::string_view::npos) end = path.size();
    auto segment = path.substr(start + 1, end - start - 1);
    if (segment == "." || segment == "..") return true;
    start = end;
  }
  return false;
}

inline bool upper_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); }

inline int hex_digit(char c) { return c <= '9' ? c - '0' : c - 'A' + 10; }

inline bool unreserved_octet(int o) {
  return (o >= 'a' && o <= 'z') || (o >= 'A' && o <= 'Z') || (o >= '0' && o <= '9') || o == '-' ||
         o == '.' || o == '_' || o == '~';
}

}  // namespace detail

inline std::string run_path_normalize(const uint8_t* data, size_t size) {
  using dataplane::router::EscapedSlashes;
  using dataplane::router::PathError;
  using dataplane::router::PathOptions;
  const std::string_view input = as_text(data, size);
  std::string path(input);
  std::string out;
  if (path.empty() || path.front() != '/') {
    TIDEGATE_FUZZ_CHECK(dataplane::router::normalize_path(path, {}, out) == PathError::kNotAbsolute,
                        "a path without a leading / was accepted: " << escape(path));
    path.insert(path.begin(), '/');
  }
  for (EscapedSlashes mode :
       {EscapedSlashes::kKeep, EscapedSlashes::kReject, EscapedSlashes::kDecode}) {
    for (bool merge : {false, true}) {
      const PathOptions options{mode, merge};
      const PathError e = dataplane::router::normalize_path(path, options, out);
      const bool normal_in = dataplane::router::is_normal_path(path, options);
      if (e != PathError::kNone) {
        TIDEGATE_FUZZ_CHECK(!normal_in, "is_normal_path passed a refused path " << escape(path));
        TIDEGATE_FUZZ_CHECK(e != PathError::kNotAbsolute, "kNotAbsolute for " << escape(path));
      } else {
        const std::string what = escape(path) + " -> " + escape(out);
        TIDEGATE_FUZZ_CHECK(!out.empty() && out.front() == '/', what);
        TIDEGATE_FUZZ_CHECK(!detail::has_dot_segment(out), "dot segment left: " << what);
        std::string again;
        TIDEGATE_FUZZ_CHECK(
            dataplane::router::normalize_path(out, options, again) == PathError::kNone,
            "the output is refused: " << what);
        TIDEGATE_FUZZ_CHECK(again == out, "not idempotent: " << what << " -> " << escape(again));
        TIDEGATE_FUZZ_CHECK(!normal_in || out == path, "is_normal_path passed " << what);
        for (size_t i = 0; i < out.size(); ++i) {
          if (out[i] != '%') continue;
          TIDEGATE_FUZZ_CHECK(
              i + 2 < out.size() && detail::upper_hex(out[i + 1]) && detail::upper_hex(out[i + 2]),
              "bad escape left: " << what);
          const int octet = detail::hex_digit(out[i + 1]) * 16 + detail::hex_digit(out[i + 2]);
          TIDEGATE_FUZZ_CHECK(!detail::unreserved_octet(octet),
                              "unreserved left encoded: " << what);
          TIDEGATE_FUZZ_CHECK(mode == EscapedSlashes::kKeep || (octet != '/' && octet != '\\'),
                              "escaped slash left: " << what);
        }
        TIDEGATE_FUZZ_CHECK(mode == EscapedSlashes::kKeep || out.find('\\') == std::string::npos,
                            "backslash left: " << what);
        TIDEGATE_FUZZ_CHECK(!merge || out.find("//") == std::string::npos,
                            "double slash left: " << what);
      }
      if (merge || path.find('%') != std::string::npos) continue;
      std::string decoded = path;
      if (mode == EscapedSlashes::kReject && decoded.find('\\') != std::string::npos) {
        TIDEGATE_FUZZ_CHECK(e == PathError::kEscapedSlash, "backslash accepted " << escape(path));
        continue;
      }
      if (mode == EscapedSlashes::kDecode) {
        for (char& c : decoded) c = c == '\\' ? '/' : c;
      }
      bool above_root = false;
      const std::string want = detail::rfc3986_remove_dot_segments(decoded, &above_root);
      if (above_root) {
        TIDEGATE_FUZZ_CHECK(e == PathError::kAboveRoot,
                            "RFC 3986 goes above the root for " << escape(path));
      } else {
        TIDEGATE_FUZZ_CHECK(
            e == PathError::kNone && out == want,
            "RFC 3986 gives " << escape(want) << " for " << escape(path) << ", we " << escape(out));
      }
    }
  }
  return {};
}

}  // namespace tidegate::fuzz
