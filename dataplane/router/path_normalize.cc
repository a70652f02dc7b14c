#include "router/path_normalize.h"

#include <vector>

#include "text/text.h"

namespace tidegate::dataplane::router {

namespace {

// RFC 3986 section 2.3.
bool unreserved(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

void append_escape(std::string& out, unsigned char octet) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out += '%';
  out += kHex[octet >> 4];
  out += kHex[octet & 0xf];
}

// Step 1: percent-encoding and backslashes.
PathError decode(std::string_view path, EscapedSlashes mode, std::string& out) {
  out.clear();
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (c == '%') {
      const int hi = i + 2 < path.size() ? text::hex_value(path[i + 1]) : -1;
      const int lo = hi >= 0 ? text::hex_value(path[i + 2]) : -1;
      if (lo < 0) return PathError::kBadPercent;
      const auto octet = static_cast<unsigned char>(hi * 16 + lo);
      i += 2;
      if (unreserved(octet)) {
        out += static_cast<char>(octet);
      } else if (octet == '/' || octet == '\\') {
        if (mode == EscapedSlashes::kReject) return PathError::kEscapedSlash;
        if (mode == EscapedSlashes::kDecode) {
          out += '/';
        } else {
          append_escape(out, octet);
        }
      } else {
        append_escape(out, octet);
      }
    } else if (c == '\\') {
      if (mode == EscapedSlashes::kReject) return PathError::kEscapedSlash;
      out += mode == EscapedSlashes::kDecode ? '/' : '\\';
    } else {
      out += c;
    }
  }
  return PathError::kNone;
}

}  // namespace

const char* to_string(PathError e) {
  switch (e) {
    case PathError::kNone:
      return "none";
    case PathError::kNotAbsolute:
      return "path does not start with /";
    case PathError::kBadPercent:
      return "malformed percent-encoding";
    case PathError::kEscapedSlash:
      return "encoded slash or backslash";
    case PathError::kAboveRoot:
      return "dot segment above the root";
  }
  return "unknown";
}

PathError normalize_path(std::string_view path, const PathOptions& options, std::string& out) {
  if (path.empty() || path.front() != '/') return PathError::kNotAbsolute;
  std::string decoded;
  if (PathError e = decode(path, options.escaped_slashes, decoded); e != PathError::kNone) {
    return e;
  }
  // Steps 2 and 3 over '/'-separated segments: `starts` holds where each kept segment's '/'
  // is in `out`, so that ".." removes the last one.
  out.clear();
  out.reserve(decoded.size());
  std::vector<size_t> starts;
  const size_t n = decoded.size();
  size_t i = 0;  // decoded[i] == '/'
  while (i < n) {
    size_t j = decoded.find('/', i + 1);
    if (j == std::string::npos) j = n;
    const std::string_view segment(decoded.data() + i + 1, j - i - 1);
    const bool last = j == n;
    i = j;
    if (segment.empty() && options.merge_slashes && !last) continue;
    if (segment == ".") {
      if (last) out += '/';
      continue;
    }
    if (segment == "..") {
      if (starts.empty()) return PathError::kAboveRoot;
      out.resize(starts.back());
      starts.pop_back();
      if (last) out += '/';
      continue;
    }
    starts.push_back(out.size());
    out += '/';
    out.append(segment.data(), segment.size());
  }
  if (out.empty()) out = "/";
  return PathError::kNone;
}

bool is_normal_path(std::string_view path, const PathOptions& options) {
  if (path.empty() || path.front() != '/') return false;
  const size_t n = path.size();
  for (size_t i = 0; i < n; ++i) {
    const char c = path[i];
    if (c == '%') return false;
    if (c == '\\' && options.escaped_slashes != EscapedSlashes::kKeep) return false;
    if (c != '/') continue;
    // A segment starts at i + 1.
    if (options.merge_slashes && i + 1 < n && path[i + 1] == '/') return false;
    if (i + 1 < n && path[i + 1] == '.') {
      if (i + 2 == n || path[i + 2] == '/') return false;                          // "."
      if (path[i + 2] == '.' && (i + 3 == n || path[i + 3] == '/')) return false;  // ".."
    }
  }
  return true;
}

bool parse_escaped_slashes(std::string_view text, EscapedSlashes* out) {
  if (text == "keep") {
    *out = EscapedSlashes::kKeep;
  } else if (text == "reject") {
    *out = EscapedSlashes::kReject;
  } else if (text == "decode") {
    *out = EscapedSlashes::kDecode;
  } else {
    return false;
  }
  return true;
}

}  // namespace tidegate::dataplane::router
