// Annotation table cases of the access family (whitelist-source-range, rate limits):
// controller/translate/annotations/access.cc. Shared parts: table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

using namespace std::chrono_literals;

std::vector<Case> access_cases() {
  return {
      // ---- whitelist-source-range ----
      {"whitelist-source-range", A({{"whitelist-source-range", "10.0.0.0/8, 2001:db8::/32"}}),
       [](IngressPolicy& p) {
         p.route.mut().source_ranges = model::SourceRanges{{"10.0.0.0/8", "2001:db8::/32"}};
       }},
      {"whitelist-source-range invalid denies everyone",
       A({{"whitelist-source-range", "10.0.0.0/8, 10.0.0.0/33"}}),
       [](IngressPolicy& p) { p.route.mut().source_ranges = model::SourceRanges{}; },
       {E("whitelist-source-range: invalid value \"10.0.0.0/8, 10.0.0.0/33\": entry 2 "
          "\"10.0.0.0/33\": prefix length 33 is out of range 0-32 for IPv4; the route denies "
          "every client")}},
      {"whitelist-source-range empty denies everyone",
       A({{"whitelist-source-range", ""}}),
       [](IngressPolicy& p) { p.route.mut().source_ranges = model::SourceRanges{}; },
       {E("no network given; the route denies every client")}},

      // ---- denylist-source-range, and allowlist-source-range (nginx's newer spelling) ----
      {"denylist-source-range", A({{"denylist-source-range", "192.168.0.0/16 ::1"}}),
       [](IngressPolicy& p) {
         p.route.mut().deny_ranges = model::SourceRanges{{"192.168.0.0/16", "::1"}};
       }},
      {"denylist-source-range invalid denies everyone",
       A({{"denylist-source-range", "10.0.0.0/8, nonsense"}}),
       [](IngressPolicy& p) { p.route.mut().source_ranges = model::SourceRanges{}; },
       {E("denylist-source-range: invalid value \"10.0.0.0/8, nonsense\"")}},
      {"allowlist-source-range is whitelist-source-range's nginx spelling",
       A({{"nginx.ingress.kubernetes.io/allowlist-source-range", "10.0.0.0/8"}}),
       [](IngressPolicy& p) { p.route.mut().source_ranges = model::SourceRanges{{"10.0.0.0/8"}}; },
       {},
       plain_paths(),
       AnnotationOptions{true}},

      // ---- rate limits ----
      {"limit-rpm with a multiplier beside limit-rps",
       A({{"limit-rpm", "300"}, {"limit-rps", "20"}, {"limit-burst-multiplier", "3"}}),
       [](IngressPolicy& p) {
         p.route.mut().rate_limits.rpm = 300;
         p.route.mut().rate_limits.rps = 20;
         p.route.mut().rate_limits.burst_multiplier = 3;
       }},
      {"limit-rpm alone makes limit-status-code count",
       A({{"limit-rpm", "60"}, {"limit-status-code", "503"}}),
       [](IngressPolicy& p) {
         p.route.mut().rate_limits.rpm = 60;
         p.route.mut().rate_limits.status_code = 503;
       }},
      {"limit-rpm invalid",
       A({{"limit-rpm", "ten"}}),
       {},
       {E("limit-rpm: invalid value \"ten\": expected a decimal number")}},
      {"limit-rpm too low to refill within the engine's hour",
       A({{"limit-rpm", "0.001"}}),
       {},
       {E("limit-rpm: invalid value \"0.001\": too low")}},
      {"limit-burst-multiplier too large for limit-rpm",
       A({{"limit-rpm", "60"}, {"limit-burst-multiplier", "100"}}),
       [](IngressPolicy& p) { p.route.mut().rate_limits.rpm = 60; },
       {E("limit-burst-multiplier: invalid value \"100\": a burst of rpm")}},
      {"limit-rps with the default burst", A({{"limit-rps", "10"}}),
       [](IngressPolicy& p) { p.route.mut().rate_limits.rps = 10; }},
      {"every rate-limit option",
       A({{"limit-rps", "0.5"},
          {"limit-burst-multiplier", "2"},
          {"limit-connections", "20"},
          {"limit-allowlist", "10.0.0.0/8 192.168.1.7"},
          {"limit-status-code", "503"}}),
       [](IngressPolicy& p) {
         auto& r = p.route.mut().rate_limits;
         r.rps = 0.5;
         r.burst_multiplier = 2;
         r.connections = 20;
         r.allowlist = {"10.0.0.0/8", "192.168.1.7"};
         r.status_code = 503;
       }},
      {"limit-connections alone with an allowlist",
       A({{"limit-connections", "3"}, {"limit-allowlist", "::1"}, {"limit-status-code", "429"}}),
       [](IngressPolicy& p) {
         p.route.mut().rate_limits.connections = 3;
         p.route.mut().rate_limits.allowlist = {"::1"};
       }},
      {"invalid rate limits",
       A({{"limit-rps", "0"},
          {"limit-burst-multiplier", "0.5"},
          {"limit-connections", "0"},
          {"limit-allowlist", "10.0.0.0/8"},
          {"limit-status-code", "503"}}),
       {},
       {E("limit-rps: invalid value \"0\": out of range (greater than 0, at most 100000)"),
        E("limit-burst-multiplier: invalid value \"0.5\": out of range (1-10000)"),
        E("limit-connections: invalid value \"0\": out of range (1-1000000)"),
        W("limit-allowlist: has no effect without limit-rps, limit-rpm or limit-connections"),
        W("limit-status-code: has no effect without limit-rps, limit-rpm or limit-connections")}},
      {"limit-rps not a number",
       A({{"limit-rps", "10/s"}, {"limit-burst-multiplier", "5"}}),
       {},
       {E("limit-rps: invalid value \"10/s\": expected a decimal number"),
        W("limit-burst-multiplier: has no effect without limit-rps")}},
      {"limit-rps too large", A({{"limit-rps", "100001"}}), {}, {E("out of range")}},
      {"limit-rps too low to refill within the engine's hour",
       A({{"limit-rps", "0.0001"}}),
       {},
       {E("limit-rps: invalid value \"0.0001\": too low")}},
      {"limit-burst-multiplier too slow to refill",
       A({{"limit-rps", "1"}, {"limit-burst-multiplier", "5000"}}),
       [](IngressPolicy& p) { p.route.mut().rate_limits.rps = 1; },
       {E("limit-burst-multiplier: invalid value \"5000\": a burst of rps")}},
      {"limit-allowlist invalid: no client exempt",
       A({{"limit-rps", "5"}, {"limit-allowlist", "10.0.0.0/8,"}}),
       [](IngressPolicy& p) { p.route.mut().rate_limits.rps = 5; },
       {E("limit-allowlist: invalid value \"10.0.0.0/8,\": trailing comma after entry 1; ignored "
          "(no client is exempt)")}},
      {"limit-status-code other than 429 or 503",
       A({{"limit-rps", "5"}, {"limit-status-code", "404"}}),
       [](IngressPolicy& p) { p.route.mut().rate_limits.rps = 5; },
       {E("limit-status-code: invalid value \"404\": expected 429 or 503; ignored (429 applies)")}},
  };
}

TEST(AnnotationsAccess, Table) {
  for (const auto& c : access_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
