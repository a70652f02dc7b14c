#pragma once
// What a route asks of a request besides its path, and how it splits requests between backends:
// the Gateway API's HTTPRoute matches (method, headers, query parameters) and weighted
// backendRefs (docs/gateway-api.md). Plain fields of model::Route (model.h); their checks and
// JSON form are here. Ingress routes leave them empty: a route without conditions takes every
// request its path matches, and its `upstream` is its one backend.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

struct Route;

enum class ValueMatch : uint8_t {
  kExact,  // byte-for-byte equal
  kRegex,  // an RE2 pattern that must match the whole value
};
const char* to_string(ValueMatch m);  // "Exact", "RegularExpression"
std::optional<ValueMatch> value_match_from_string(std::string_view s);

// A request header the route requires: `name` is a lower-case RFC 9110 token (header names are
// compared without case), `value` what one of its fields must hold (several fields of the name
// are joined with ", " as RFC 9110 allows, as Envoy compares them).
struct HeaderCondition {
  std::string name;
  std::string value;
  ValueMatch match = ValueMatch::kExact;
  bool operator==(const HeaderCondition&) const = default;
};

// A query parameter the route requires: `name` compared byte-for-byte (no decoding), the
// value of its first occurrence compared with `value`.
struct QueryCondition {
  std::string name;
  std::string value;
  ValueMatch match = ValueMatch::kExact;
  bool operator==(const QueryCondition&) const = default;
};

// One of a route's backends with its share of the requests. An empty `upstream` stands for a
// backend the translator could not resolve (an unknown Service or kind, a reference not
// granted): the requests it would take are answered 500, as the Gateway API asks.
struct WeightedBackend {
  std::string upstream;
  uint32_t weight = 1;
  bool operator==(const WeightedBackend&) const = default;
};

inline constexpr size_t kMaxHeaderConditions = 16;  // the Gateway API's maxItems
inline constexpr size_t kMaxQueryConditions = 16;
inline constexpr size_t kMaxWeightedBackends = 16;
inline constexpr uint32_t kMaxBackendWeight = 1'000'000;

// The method, header and query conditions and the backends of `r` (named `where` in messages):
// appends each problem to `problems`. Upstream names are checked against the config by
// model::validate.
void validate_conditions(const Route& r, const std::string& where,
                         std::vector<std::string>& problems);
// Adds the fields that are set to the route's object `j`.
void conditions_to_json(const Route& r, nlohmann::json& j);
// Reads them from the route's object, throwing std::runtime_error on malformed input.
void conditions_from_json(const nlohmann::json& j, Route& r);

}  // namespace tidegate::model
