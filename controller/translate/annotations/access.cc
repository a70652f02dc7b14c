// Access: whitelist-source-range (allowlist-source-range), denylist-source-range and the rate
// limits (limit-rps, limit-rpm, limit-burst-multiplier, limit-connections, limit-allowlist,
// limit-status-code).

#include <tuple>

#include "translate/annotations/parser.h"

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_source_ranges() {
  auto a = get("whitelist-source-range");
  if (!a) return;
  model::SourceRanges ranges;
  if (auto why = model::parse_cidr_list(a->value, &ranges.cidrs)) {
    ranges.cidrs.clear();
    invalid(*a, *why,
            "the route denies every client (403) until it is fixed, rather than allowing all");
  }
  route_.source_ranges = std::move(ranges);
}

void Parser::parse_deny_ranges() {
  auto a = get("denylist-source-range");
  if (!a) return;
  model::SourceRanges ranges;
  if (auto why = model::parse_cidr_list(a->value, &ranges.cidrs)) {
    // A deny list that cannot be read denies everyone rather than letting the listed in.
    invalid(*a, *why,
            "the route denies every client (403) until it is fixed, rather than allowing all");
    route_.source_ranges = model::SourceRanges{};
    return;
  }
  route_.deny_ranges = std::move(ranges);
}

void Parser::parse_rate_limits() {
  auto& rl = route_.rate_limits;
  std::optional<FoundAnnotation> rps_found;
  std::optional<FoundAnnotation> burst_found;
  rl.rps = get_decimal("limit-rps", 0, model::RateLimits::kMaxRps,
                       "(greater than 0, at most 100000)", &rps_found);
  std::optional<FoundAnnotation> rpm_found;
  rl.rpm = get_decimal("limit-rpm", 0, model::RateLimits::kMaxRps * 60,
                       "(greater than 0, at most 6000000)", &rpm_found);
  auto burst = get_decimal("limit-burst-multiplier", 1 - 1e-9,
                           model::RateLimits::kMaxBurstMultiplier, "(1-10000)", &burst_found);
  // Each rate alone, with the default multiplier, must refill within the engine's hour.
  for (auto [rate, found, is_rpm] :
       {std::tuple{&rl.rps, &rps_found, false}, std::tuple{&rl.rpm, &rpm_found, true}}) {
    if (!*rate) continue;
    model::RateLimits alone;
    (is_rpm ? alone.rpm : alone.rps) = *rate;
    if (auto why = model::check_burst_window(alone)) {
      invalid(**found, "too low: " + *why);
      rate->reset();
    }
  }
  if (burst) {
    if (!rl.rps && !rl.rpm) {
      warn(*burst_found, "has no effect without limit-rps or limit-rpm; ignored");
    } else {
      model::RateLimits with = rl;
      with.burst_multiplier = *burst;
      if (auto why = model::check_burst_window(with)) {
        invalid(*burst_found, *why);
      } else {
        rl.burst_multiplier = *burst;
      }
    }
  }
  if (auto n = get_integer("limit-connections", 1, model::RateLimits::kMaxConnections)) {
    rl.connections = static_cast<uint32_t>(*n);
  }
  const bool limited = rl.rps || rl.rpm || rl.connections;
  if (auto a = get("limit-allowlist")) {
    std::vector<std::string> cidrs;
    if (!limited) {
      warn(*a, "has no effect without limit-rps, limit-rpm or limit-connections; ignored");
    } else if (auto why = model::parse_cidr_list(a->value, &cidrs)) {
      invalid(*a, *why, "ignored (no client is exempt)");
    } else {
      rl.allowlist = std::move(cidrs);
    }
  }
  if (auto a = get("limit-status-code")) {
    std::string_view v = trim(a->value);
    if (!limited) {
      warn(*a, "has no effect without limit-rps, limit-rpm or limit-connections; ignored");
    } else if (v == "429" || v == "503") {
      rl.status_code = static_cast<uint16_t>(v == "429" ? 429 : 503);
    } else {
      invalid(*a, "expected 429 or 503", "ignored (429 applies)");
    }
  }
}

}  // namespace tidegate::controller::translate::annotations_detail
