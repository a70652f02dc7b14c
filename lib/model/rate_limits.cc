#include "model/rate_limits.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "model/object_reader.h"
#include "model/source_ranges.h"

namespace tidegate::model {

using nlohmann::json;

std::optional<std::string> check_burst_window(const RateLimits& r) {
  if (r.rps && *r.rps > 0 && std::max(1.0, *r.rps * r.burst_multiplier) / *r.rps > 3600) {
    return "a burst of rps × multiplier refills in more than an hour (the engine's limit)";
  }
  if (r.rpm && *r.rpm > 0 && std::max(1.0, *r.rpm * r.burst_multiplier) / (*r.rpm / 60) > 3600) {
    return "a burst of rpm × multiplier refills in more than an hour (the engine's limit)";
  }
  return std::nullopt;
}

std::vector<std::string> validate(const RateLimits& r) {
  std::vector<std::string> problems;
  if (r.rps && !(std::isfinite(*r.rps) && *r.rps > 0 && *r.rps <= RateLimits::kMaxRps)) {
    problems.push_back("rps must be greater than 0 and at most 100000");
  }
  if (r.rpm && !(std::isfinite(*r.rpm) && *r.rpm > 0 && *r.rpm <= RateLimits::kMaxRps * 60)) {
    problems.push_back("rpm must be greater than 0 and at most 6000000");
  }
  if (!(std::isfinite(r.burst_multiplier) && r.burst_multiplier >= 1 &&
        r.burst_multiplier <= RateLimits::kMaxBurstMultiplier)) {
    problems.push_back("burst multiplier must be between 1 and 10000");
  } else if (auto why = check_burst_window(r)) {
    problems.push_back(*why);
  }
  if (r.connections && (*r.connections < 1 || *r.connections > RateLimits::kMaxConnections)) {
    problems.push_back("connections " + std::to_string(*r.connections) + " is out of range 1-" +
                       std::to_string(RateLimits::kMaxConnections));
  }
  check_cidrs(r.allowlist, "rate-limit allowlist", problems);
  if (r.status_code != 429 && r.status_code != 503) {
    problems.push_back("rate-limit status code " + std::to_string(r.status_code) +
                       " is not 429 or 503");
  }
  return problems;
}

json to_json(const RateLimits& r) {
  const RateLimits dr;
  json rj = json::object();
  if (r.rps) rj["rps"] = *r.rps;
  if (r.rpm) rj["rpm"] = *r.rpm;
  if (r.burst_multiplier != dr.burst_multiplier) rj["burst_multiplier"] = r.burst_multiplier;
  if (r.connections) rj["connections"] = *r.connections;
  if (!r.allowlist.empty()) rj["allowlist"] = r.allowlist;
  if (r.status_code != dr.status_code) rj["status_code"] = r.status_code;
  return rj;
}

RateLimits rate_limits_from_json(const json& j) {
  RateLimits rl;
  detail::ObjectReader lr(j, "route policy rate_limits");
  if (lr.find("rps")) {
    double rps = 0;
    lr.number("rps", rps);
    rl.rps = rps;
  }
  if (lr.find("rpm")) {
    double rpm = 0;
    lr.number("rpm", rpm);
    rl.rpm = rpm;
  }
  lr.number("burst_multiplier", rl.burst_multiplier);
  lr.optional_integer("connections", rl.connections, UINT32_MAX);
  lr.strings("allowlist", rl.allowlist);
  lr.integer("status_code", rl.status_code, 999);
  lr.finish();
  return rl;
}

}  // namespace tidegate::model
