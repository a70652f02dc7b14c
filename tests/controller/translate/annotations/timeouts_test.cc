// Annotation table cases of the timeouts family (timeouts, body size, retries):
// controller/translate/annotations/timeouts.cc. Shared parts: table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

using namespace std::chrono_literals;

std::vector<Case> timeouts_cases() {
  return {
      // ---- timeouts, body size, retries ----
      {"timeouts in nginx syntax",
       A({{"proxy-connect-timeout", "500ms"},
          {"proxy-read-timeout", "1m30s"},
          {"proxy-send-timeout", "120"}}),
       [](IngressPolicy& p) {
         p.route.mut().connect_timeout = 500ms;
         p.route.mut().read_timeout = 90s;
         p.route.mut().send_timeout = 120s;
       }},
      {"timeouts in hours and days",
       A({{"proxy-read-timeout", "1d"}, {"proxy-send-timeout", "2h"}}),
       [](IngressPolicy& p) {
         p.route.mut().read_timeout = 24h;
         p.route.mut().send_timeout = 2h;
       }},
      {"invalid timeouts",
       A({{"proxy-connect-timeout", "0"},
          {"proxy-read-timeout", "30s1m"},
          {"proxy-send-timeout", "2d"}}),
       {},
       {E("proxy-connect-timeout: invalid value \"0\": out of range (1ms-24h)"),
        E("proxy-read-timeout: invalid value \"30s1m\": expected a duration"),
        E("proxy-send-timeout: invalid value \"2d\": out of range")}},
      {"timeout with a fraction or a unit nginx lacks",
       A({{"proxy-connect-timeout", "1.5s"}, {"proxy-read-timeout", "10x"}}),
       {},
       {E("proxy-connect-timeout: invalid value \"1.5s\""),
        E("proxy-read-timeout: invalid value \"10x\"")}},
      {"proxy-body-size", A({{"proxy-body-size", "8m"}}),
       [](IngressPolicy& p) { p.route.mut().max_body_bytes = 8u << 20; }},
      {"proxy-body-size in bytes and K", A({{"proxy-body-size", "512K"}}),
       [](IngressPolicy& p) { p.route.mut().max_body_bytes = 512u << 10; }},
      {"proxy-body-size 0 is unlimited", A({{"proxy-body-size", "0"}})},
      {"proxy-body-size invalid",
       A({{"proxy-body-size", "8mb"}}),
       {},
       {E("proxy-body-size: invalid value \"8mb\": expected a size")}},
      {"proxy-body-size too large",
       A({{"proxy-body-size", "2000g"}}),
       {},
       {E("larger than 1 TiB")}},
      {"proxy-body-size overflowing",
       A({{"proxy-body-size", "99999999999999999g"}}),
       {},
       {E("expected a size")}},
      {"proxy-next-upstream", A({{"proxy-next-upstream", "error timeout http_502 http_503"}}),
       [](IngressPolicy& p) {
         p.route.mut().next_upstream = {true, true, true, true, false, false};
       }},
      {"proxy-next-upstream with non_idempotent",
       A({{"proxy-next-upstream", "http_504  non_idempotent"}}),
       [](IngressPolicy& p) {
         p.route.mut().next_upstream = {false, false, false, false, true, true};
       }},
      {"proxy-next-upstream off", A({{"proxy-next-upstream", "off"}}),
       [](IngressPolicy& p) {
         p.route.mut().next_upstream = {false, false, false, false, false, false};
       }},
      {"proxy-next-upstream unsupported condition",
       A({{"proxy-next-upstream", "error http_500"}}),
       {},
       {E("proxy-next-upstream: invalid value \"error http_500\": unsupported condition "
          "\"http_500\"")}},
      {"proxy-next-upstream off with others",
       A({{"proxy-next-upstream", "off error"}}),
       {},
       {E("\"off\" must be alone")}},
      {"proxy-next-upstream only non_idempotent",
       A({{"proxy-next-upstream", "non_idempotent"}}),
       {},
       {E("non_idempotent needs at least one condition")}},
      {"proxy-next-upstream empty", A({{"proxy-next-upstream", " "}}), {}, {E("empty")}},
      {"proxy-next-upstream-tries", A({{"proxy-next-upstream-tries", "5"}}),
       [](IngressPolicy& p) { p.route.mut().next_upstream_tries = 5; }},
      {"proxy-next-upstream-tries 0 (nginx: unlimited) is refused",
       A({{"proxy-next-upstream-tries", "0"}}),
       {},
       {E("proxy-next-upstream-tries: invalid value \"0\": out of range (1-20)")}},
      {"proxy-next-upstream-timeout", A({{"proxy-next-upstream-timeout", "1500ms"}}),
       [](IngressPolicy& p) { p.route.mut().next_upstream_timeout = 1500ms; }},
      {"proxy-next-upstream-timeout 0: no limit (nginx's default)",
       A({{"proxy-next-upstream-timeout", "0"}}),
       {}},
      {"proxy-next-upstream-timeout invalid",
       A({{"proxy-next-upstream-timeout", "soon"}}),
       {},
       {E("proxy-next-upstream-timeout: invalid value \"soon\": expected a duration")}},
      {"proxy-next-upstream-timeout over a day",
       A({{"proxy-next-upstream-timeout", "2d"}}),
       {},
       {E("proxy-next-upstream-timeout: invalid value \"2d\": out of range (0-24h)")}},
      {"proxy-next-upstream-tries not a number",
       A({{"proxy-next-upstream-tries", "three"}}),
       {},
       {E("expected a whole number (1-20)")}},
  };
}

TEST(AnnotationsTimeouts, Table) {
  for (const auto& c : timeouts_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
