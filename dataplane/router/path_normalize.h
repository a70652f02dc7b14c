#pragma once
// Path normalization: what routes match, what policies see and what the backend receives
// (docs/proxy.md, "Path normalization"). A pure function over the path part of an origin-form
// request target (no query: the caller splits at the first '?' and leaves the query untouched).
//
// In order:
//   1. Percent-encoding: every '%' must start "%XY" with two hex digits (else kBadPercent).
//      Encoded unreserved characters (RFC 3986 section 2.3: ALPHA DIGIT - . _ ~) are decoded;
//      every other escape keeps its octet and gets upper-case hex ("%2f" -> "%2F").
//      Escaped slashes ("%2F", "%5C") and a raw backslash follow EscapedSlashes:
//        kKeep   (default): left as they are (hex upper-cased); they are not separators;
//        kReject: kEscapedSlash (the request gets 400);
//        kDecode: all three become '/', a separator for the steps below.
//   2. With merge_slashes, runs of '/' become one '/'.
//   3. Dot segments are removed as RFC 3986 section 5.2.4 does, except that a ".." with no
//      segment left to remove (going above the root) is kAboveRoot instead of being dropped.
//      "/a/./b" -> "/a/b", "/a/b/.." -> "/a/", "/a/%2e%2E/b" -> "/b", "/.." -> kAboveRoot.
// Other bytes (sub-delimiters, raw non-ASCII) are kept as they are.
//
// Properties (tested, and checked by fuzz/targets/path_normalize.h): the output starts with '/',
// has no "." or ".." segment, and normalizing it again gives it back unchanged.

#include <string>
#include <string_view>

namespace tidegate::dataplane::router {

enum class EscapedSlashes { kKeep, kReject, kDecode };

struct PathOptions {
  EscapedSlashes escaped_slashes = EscapedSlashes::kKeep;
  bool merge_slashes = false;
};

enum class PathError {
  kNone,
  kNotAbsolute,   // does not start with '/'
  kBadPercent,    // '%' not followed by two hex digits
  kEscapedSlash,  // %2F, %5C or '\' under EscapedSlashes::kReject
  kAboveRoot,     // a ".." segment above the root
};

const char* to_string(PathError e);

// Writes the normalized form of `path` into `out` (replacing its content) and returns kNone, or
// returns the error (`out` is then unspecified).
PathError normalize_path(std::string_view path, const PathOptions& options, std::string& out);

// True when `path` is already normal under `options` (normalize_path would return it unchanged):
// a quick scan that lets the common request skip the copy.
bool is_normal_path(std::string_view path, const PathOptions& options);

// Parses "keep", "reject" or "decode".
bool parse_escaped_slashes(std::string_view text, EscapedSlashes* out);

}  // namespace tidegate::dataplane::router
