#pragma once
// Source ranges of a route (docs/annotations.md, "whitelist-source-range",
// "denylist-source-range" and "CIDR lists"): the allow and deny lists of client networks
// (RoutePolicy::source_ranges and RoutePolicy::deny_ranges), and the CIDR syntax they share with
// the rate limits' allowlist. Checks and JSON form here.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

namespace detail {
class ObjectReader;
}

// whitelist-source-range. Set and empty means "no client may use this route" (what an invalid
// annotation turns into: a broken allow list must not open the route).
struct SourceRanges {
  std::vector<std::string> cidrs;
  bool operator==(const SourceRanges&) const = default;
};

// One CIDR entry as dataplane/ratelimit/cidr_set.h reads it ("10.0.0.0/8", "::1", ...).
std::optional<std::string> check_cidr(std::string_view entry);
// A CIDR list separated by commas and/or whitespace; on success `out` (if given) receives the
// entries as written. Empty lists and empty entries are errors. At most kMaxCidrEntries.
inline constexpr size_t kMaxCidrEntries = 4096;
std::optional<std::string> parse_cidr_list(std::string_view text, std::vector<std::string>* out);
// Appends a problem naming `what` for a list longer than kMaxCidrEntries, else one for each entry
// check_cidr refuses.
void check_cidrs(const std::vector<std::string>& cidrs, const std::string& what,
                 std::vector<std::string>& problems);

// RoutePolicy::source_ranges (may be empty: no client allowed).
void validate_allow_ranges(const SourceRanges& r, std::vector<std::string>& problems);
// RoutePolicy::deny_ranges (may not be empty).
void validate_deny_ranges(const SourceRanges& r, std::vector<std::string>& problems);
// The JSON form is the array of entries.
nlohmann::json to_json(const SourceRanges& r);
// Reads `key` (an array of strings) from the route policy's object (`r`) into `out` if present,
// throwing as route_policy_from_json.
void source_ranges_from_json(detail::ObjectReader& r, const char* key,
                             std::optional<SourceRanges>& out);

}  // namespace tidegate::model
