// Annotation table cases of the canary family (canary):
// controller/translate/annotations/canary.cc. Shared parts: table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

using namespace std::chrono_literals;

std::vector<Case> canary_cases() {
  return {
      // ---- canary ----
      {"canary by weight", A({{"canary", "true"}, {"canary-weight", "10"}}),
       [](IngressPolicy& p) { p.canary = Canary{"", 10, 100, "", "", ""}; }},
      {"canary with every option",
       A({{"canary", "true"},
          {"canary-weight", "5"},
          {"canary-weight-total", "1000"},
          {"canary-by-header", "X-Canary"},
          {"canary-by-header-value", "blue"},
          {"canary-by-cookie", "canary"}}),
       [](IngressPolicy& p) { p.canary = Canary{"", 5, 1000, "X-Canary", "blue", "canary"}; }},
      {"canary keeps upstream settings and ignores route settings",
       A({{"canary", "true"},
          {"load-balance", "ewma"},
          {"proxy-read-timeout", "5"},
          {"limit-rps", "1"}}),
       [](IngressPolicy& p) {
         p.canary = Canary{};
         p.upstream.mut().load_balance = model::LoadBalance::kEwma;
       },
       {W("proxy-read-timeout: ignored on a canary Ingress"),
        W("limit-rps: ignored on a canary Ingress")}},
      {"canary false",
       A({{"canary", "false"}, {"canary-weight", "10"}}),
       {},
       {W("canary-weight: has no effect without canary: \"true\"")}},
      {"canary invalid",
       A({{"canary", "yes"}, {"canary-by-cookie", "c"}}),
       {},
       {E("canary: invalid value \"yes\""), W("canary-by-cookie: has no effect")}},
      {"canary invalid options",
       A({{"canary", "true"},
          {"canary-weight", "101"},
          {"canary-weight-total", "0"},
          {"canary-by-header", "X Canary"},
          {"canary-by-header-value", "blue"},
          {"canary-by-cookie", "a;b"}}),
       [](IngressPolicy& p) { p.canary = Canary{}; },
       {E("canary-weight-total: invalid value \"0\": out of range (1-1000000)"),
        E("canary-weight: invalid value \"101\": more than the weight total 100; ignored "
          "(weight 0)"),
        E("canary-by-header: invalid value \"X Canary\""),
        E("canary-by-header-value: invalid value \"blue\": needs a valid canary-by-header"),
        E("canary-by-cookie: invalid value \"a;b\"")}},
      {"canary-by-header-pattern",
       A({{"canary", "true"},
          {"canary-by-header", "X-C"},
          {"canary-by-header-pattern", "^(a|b)$"}}),
       [](IngressPolicy& p) {
         p.canary = Canary{"", 0, 100, "X-C", "", ""};
         p.canary->header_pattern = "^(a|b)$";
       }},
      {"canary-by-header-pattern that does not compile, or without a header",
       A({{"canary", "true"}, {"canary-by-header", "X-C"}, {"canary-by-header-pattern", "(a"}}),
       [](IngressPolicy& p) { p.canary = Canary{"", 0, 100, "X-C", "", ""}; },
       {E("canary-by-header-pattern: invalid value \"(a\": the pattern does not compile")}},
      {"canary-by-header-pattern needs canary-by-header",
       A({{"canary", "true"}, {"canary-by-header-pattern", "a"}}),
       [](IngressPolicy& p) { p.canary = Canary{}; },
       {E("canary-by-header-pattern: invalid value \"a\": needs a valid canary-by-header")}},
      {"canary-by-header-value wins over the pattern",
       A({{"canary", "true"},
          {"canary-by-header", "X-C"},
          {"canary-by-header-value", "v"},
          {"canary-by-header-pattern", "a"}}),
       [](IngressPolicy& p) { p.canary = Canary{"", 0, 100, "X-C", "v", ""}; },
       {W("canary-by-header-pattern: has no effect with canary-by-header-value")}},
      {"canary weight not a number",
       A({{"canary", "true"}, {"canary-weight", "10%"}}),
       [](IngressPolicy& p) { p.canary = Canary{}; },
       {E("expected a whole number")}},
      {"canary header value with a control character",
       A({{"canary", "true"}, {"canary-by-header", "X-C"}, {"canary-by-header-value", "a\x01"}}),
       [](IngressPolicy& p) { p.canary = Canary{"", 0, 100, "X-C", "", ""}; },
       {E("a header value must be non-empty without control characters")}},
  };
}

TEST(AnnotationsCanary, Table) {
  for (const auto& c : canary_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
