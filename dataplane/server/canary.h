#pragma once
// Canary traffic selection (docs/annotations.md, "Canary"): which of a route's two backends a
// request goes to. Pure functions; the HTTP session supplies the request's fields and a
// per-worker turn counter (CompiledRoute::canary_turn).

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <re2/re2.h>

#include "model/conditions.h"
#include "model/policy.h"

namespace tidegate::dataplane::server {

enum class CanaryChoice : uint8_t { kMain, kCanary, kUndecided };

// Steps 1 and 2: the header (`header_value`: the request's field named canary.header, nullopt
// when absent) and then the cookie (`cookie_value`: the value of cookie canary.cookie, nullopt
// when absent). kUndecided: the weight decides. `pattern`: canary.header_pattern compiled (null
// when it has none, or it failed to compile: then no value matches).
inline CanaryChoice canary_by_request(const model::Canary& canary,
                                      std::optional<std::string_view> header_value,
                                      std::optional<std::string_view> cookie_value,
                                      const re2::RE2* pattern = nullptr) {
  if (!canary.header.empty() && header_value) {
    if (!canary.header_value.empty()) {
      return *header_value == canary.header_value ? CanaryChoice::kCanary : CanaryChoice::kMain;
    }
    if (!canary.header_pattern.empty()) {
      const bool found =
          pattern != nullptr &&
          re2::RE2::PartialMatch(re2::StringPiece(header_value->data(), header_value->size()),
                                 *pattern);
      return found ? CanaryChoice::kCanary : CanaryChoice::kMain;
    }
    if (*header_value == "always") return CanaryChoice::kCanary;
    if (*header_value == "never") return CanaryChoice::kMain;
  }
  if (!canary.cookie.empty() && cookie_value) {
    if (*cookie_value == "always") return CanaryChoice::kCanary;
    if (*cookie_value == "never") return CanaryChoice::kMain;
  }
  return CanaryChoice::kUndecided;
}

// Step 3: whether request number `turn` (counted per worker from 0) goes to the canary. Smooth
// and exact: of any `total` consecutive turns starting at a multiple of `total`, exactly `weight`
// go to the canary, spread evenly (turn t is a canary turn when floor((t+1)·w/T) > floor(t·w/T)).
inline bool canary_by_weight(uint64_t turn, uint32_t weight, uint32_t total) {
  if (weight == 0 || total == 0) return false;
  if (weight >= total) return true;
  uint64_t t = turn % total;
  return (t + 1) * weight / total > t * weight / total;
}

// The Gateway API's weighted backendRefs: the backend for request number `turn` of a worker.
// Turns are spread by the golden ratio (a low-discrepancy sequence), so that any run of
// requests divides close to the weights without a per-request random draw. nullptr when every
// weight is 0 (the route then answers 500, as a rule without backends).
inline const model::WeightedBackend* pick_weighted_backend(
    const std::vector<model::WeightedBackend>& backends, uint64_t turn) {
  uint64_t total = 0;
  for (const auto& b : backends) total += b.weight;
  if (total == 0) return nullptr;
  // The fractional part of turn * (golden ratio - 1), in 64-bit fixed point, scaled to total.
  const uint64_t fraction = turn * 0x9E3779B97F4A7C15ULL;
  const uint64_t point =
      static_cast<uint64_t>((static_cast<unsigned __int128>(fraction) * total) >> 64);
  uint64_t sum = 0;
  for (const auto& b : backends) {
    sum += b.weight;
    if (point < sum) return &b;
  }
  return &backends.back();
}

}  // namespace tidegate::dataplane::server
