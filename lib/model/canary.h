#pragma once
// Canary of a route (docs/annotations.md, "Canary"): how a second Ingress for the same host and
// path becomes a weighted or conditional alternative backend of the main route (Route::canary in
// model.h). Checks and JSON form here.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

// A canary Ingress's annotations, and (with `upstream` filled in by the translator) what the
// main route carries as its alternative backend. Precedence on a request: header, then cookie,
// then weight (see docs/annotations.md).
struct Canary {
  static constexpr uint32_t kMaxWeightTotal = 1'000'000;

  std::string upstream;         // Upstream::name of the canary backend; empty in parser output
  uint32_t weight = 0;          // 0..weight_total: share of requests sent to the canary
  uint32_t weight_total = 100;  // 1..kMaxWeightTotal
  std::string header;           // request header name (token); empty: none
  // With `header`: the canary gets requests whose header equals this value exactly. Empty: the
  // header's value "always" picks the canary, "never" the main backend, anything else falls
  // through to the cookie and the weight.
  std::string header_value;
  std::string cookie;  // cookie name (token): "always" / "never" as for the header; empty: none
  // With `header` and no header_value: the canary gets requests whose header value the RE2
  // pattern finds a match in (canary-by-header-pattern; "always" / "never" then have no special
  // meaning). At most kMaxHeaderPattern bytes; must compile.
  static constexpr size_t kMaxHeaderPattern = 1024;
  std::string header_pattern = {};
  bool operator==(const Canary&) const = default;
};

// canary-by-header-pattern: an RE2 pattern of at most Canary::kMaxHeaderPattern bytes.
std::optional<std::string> check_header_pattern(std::string_view pattern);

// `require_upstream`: the model's form (the translator has named the canary's backend).
std::vector<std::string> validate(const Canary& c, bool require_upstream = true);
nlohmann::json to_json(const Canary& c);
Canary canary_from_json(const nlohmann::json& j);

}  // namespace tidegate::model
