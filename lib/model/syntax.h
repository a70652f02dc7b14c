#pragma once
// The small syntax checks several families of the route and upstream policy share: RFC 9110
// tokens, paths, object references; and, in namespace detail, the character helpers behind the
// families' own checks (private to lib/model).

#include <optional>
#include <string>
#include <string_view>

#include "text/http_syntax.h"

namespace tidegate::model {

using text::is_token;  // RFC 9110 token (header names, cookie names, methods)
// A path starting with '/', printable ASCII without spaces or ';' (app-root, cookie paths).
std::optional<std::string> check_path(std::string_view text);
// "namespace/name" of a Kubernetes object (DNS-1123 namespace and name).
std::optional<std::string> check_object_ref(std::string_view text);

namespace detail {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_alnum(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
inline std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Printable ASCII without space (what a URL or a path may hold as written in YAML).
bool is_visible(std::string_view s);
// Header field value: visible ASCII, obs-text, space and tab; no CR, LF, NUL or other controls.
using text::is_field_value;
// A DNS-1123 label or subdomain (Kubernetes object names and namespaces).
bool is_dns_subdomain(std::string_view s);
// Strict dotted quad: four decimal parts 0-255, no leading zeros (01 is octal to inet_aton).
bool is_ipv4(std::string_view s);
// Returns whether `s` is an IPv6 literal and, if so, whether it is IPv4-mapped (::ffff:a.b.c.d).
std::optional<bool> ipv6_mapped(std::string_view s);

}  // namespace detail
}  // namespace tidegate::model
