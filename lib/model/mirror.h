#pragma once
// Request mirroring of a route (the Gateway API's RequestMirror filter; docs/gateway-api.md,
// "Request mirroring"): its own family of the route policy (RoutePolicy::mirrors), checks and
// JSON form here.
//
// A mirrored request is a copy of the request as it goes to the route's backend (the proxy's
// forwarding fields and the route's header modifications included), sent to another upstream
// at the same time; its answer is read and dropped. The client only ever sees the backend's
// answer: a slow, failing or missing mirror never changes it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

struct Mirror {
  static constexpr size_t kMaxPerRoute = 16;
  static constexpr uint32_t kMaxDenominator = 1'000'000;

  std::string upstream;  // Upstream::name of the mirror's backend
  // The share of requests mirrored: numerator / denominator (percent: n / 100; fraction as
  // written). 0 / d: none; d / d: every request.
  uint32_t numerator = 100;
  uint32_t denominator = 100;
  bool operator==(const Mirror&) const = default;
};

std::vector<std::string> validate(const std::vector<Mirror>& mirrors);
nlohmann::json to_json(const std::vector<Mirror>& mirrors);
std::vector<Mirror> mirrors_from_json(const nlohmann::json& j);

}  // namespace tidegate::model
