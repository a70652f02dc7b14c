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

// rewrite-target: printable, no spaces; '$' only as "$1".."$9".
std::optional<std::string> check_rewrite_target(std::string_view text);
// The highest "$N" a rewrite target refers to (0: none).
int max_capture_reference(std::string_view rewrite_target);
// An http:// or https:// URL with a host, or a path starting with '/' (not "//"); printable,
// without spaces, quotes, backslashes or <>{}|^`.
std::optional<std::string> check_redirect_url(std::string_view text);
inline constexpr uint16_t kRedirectCodes[] = {301, 302, 303, 307, 308};

// rewrite_target, app_root and redirect of `p`: appends each problem to `problems`.
void validate_rewrites(const RoutePolicy& p, std::vector<std::string>& problems);
// Adds the fields that are set to the route policy's object `j`.
void rewrites_to_json(const RoutePolicy& p, nlohmann::json& j);
// Reads the fields from the route policy's object (`r`), throwing as route_policy_from_json.
void rewrites_from_json(detail::ObjectReader& r, RoutePolicy& p);

}  // namespace tidegate::model
