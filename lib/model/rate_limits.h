#pragma once
// Rate limits of a route (docs/annotations.md, "Rate limits and source ranges"): the limit-*
// annotations, per client address (RoutePolicy::rate_limits). Checks and JSON form here; the
// allowlist's CIDR syntax is source_ranges.h's.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

// limit-*: per client address, as in docs/annotations.md.
struct RateLimits {
  static constexpr double kMaxRps = 100'000;
  static constexpr double kMaxBurstMultiplier = 10'000;
  static constexpr uint32_t kMaxConnections = 1'000'000;

  std::optional<double> rps;    // unset: no request-rate limit; else (0, kMaxRps]
  double burst_multiplier = 5;  // [1, kMaxBurstMultiplier]; the bucket refills within an hour
  // limit-rpm: requests per minute, a bucket of its own beside rps (both apply when both are
  // set, as nginx's two limit_req zones); unset: none; else (0, kMaxRps × 60]. Its burst is
  // rpm × burst_multiplier.
  std::optional<double> rpm;
  std::optional<uint32_t> connections;  // unset: no limit; else 1..kMaxConnections
  std::vector<std::string> allowlist;   // CIDR entries exempt from both limits
  uint16_t status_code = 429;           // 429 or 503 (limit-status-code)
  bool operator==(const RateLimits&) const = default;
};

// The rate limiter's table needs a full bucket to refill within an hour: with rps set,
// max(1, rps × burst_multiplier) / rps <= 3600 s.
std::optional<std::string> check_burst_window(const RateLimits& r);

std::vector<std::string> validate(const RateLimits& r);
nlohmann::json to_json(const RateLimits& r);
RateLimits rate_limits_from_json(const nlohmann::json& j);

}  // namespace tidegate::model
