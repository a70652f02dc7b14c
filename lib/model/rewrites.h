#pragma once
// Rewrites and redirects of a route (docs/annotations.md, "Rewrites and redirects"):
// rewrite-target, app-root and the permanent/temporal redirects. The values are plain fields of
// RoutePolicy (lib/model/policy.h); their checks and JSON form are here, called by
// validate(RoutePolicy) and the route policy's JSON functions.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

struct RoutePolicy;
namespace detail {
class ObjectReader;
}

struct Redirect {
  std::string url;  // absolute http(s) URL, or an absolute path ("/elsewhere")
  uint16_t code = 302;
  bool operator==(const Redirect&) const = default;
};

// A path edit of the Gateway API (HTTPPathModifier), for URL rewrites and redirects: kFull
// replaces the whole path, kPrefix replaces the part the route's Prefix path matched (element-wise;
// "/" as the replacement drops the prefix, "/foo/bar" with prefix "/foo" and "/" gives "/bar").
struct PathModifier {
  enum class Kind : uint8_t { kFull, kPrefix };
  Kind kind = Kind::kFull;
  std::string value;  // a path starting with '/'
  bool operator==(const PathModifier&) const = default;
};

// A redirect built from the request (the Gateway API's RequestRedirect filter). Each part left
// unset keeps the request's: its scheme, its host (without port), its path. The port: `port`
// when set; otherwise, when `scheme` is set, the scheme's well-known port; otherwise the port the
// request came to. A port that is the scheme's well-known one is left out of the Location. The
// query string is kept.
struct RequestRedirect {
  std::string scheme;    // "http", "https" or empty
  std::string hostname;  // a lower-case DNS name or empty
  std::optional<PathModifier> path;
  uint16_t port = 0;  // 0: see above
  uint16_t code = 302;
  bool operator==(const RequestRedirect&) const = default;
};

// rewrite-target: printable, no spaces; '$' only as "$1".."$9".
std::optional<std::string> check_rewrite_target(std::string_view text);
// The highest "$N" a rewrite target refers to (0: none).
int max_capture_reference(std::string_view rewrite_target);
// An http:// or https:// URL with a host, or a path starting with '/' (not "//"); printable,
// without spaces, quotes, backslashes or <>{}|^`.
std::optional<std::string> check_redirect_url(std::string_view text);
inline constexpr uint16_t kRedirectCodes[] = {301, 302, 303, 307, 308};

// A PathModifier's value: a path starting with '/', printable, without spaces, '?' or '#'.
std::optional<std::string> check_path_modifier(const PathModifier& m);

// rewrite_target, app_root, redirect, request_redirect and path_rewrite of `p`: appends each
// problem to `problems`.
void validate_rewrites(const RoutePolicy& p, std::vector<std::string>& problems);
// Adds the fields that are set to the route policy's object `j`.
void rewrites_to_json(const RoutePolicy& p, nlohmann::json& j);
// Reads the fields from the route policy's object (`r`), throwing as route_policy_from_json.
void rewrites_from_json(detail::ObjectReader& r, RoutePolicy& p);

}  // namespace tidegate::model
