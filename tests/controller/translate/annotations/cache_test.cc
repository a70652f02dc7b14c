// Annotation table cases of the response cache family (enable-cache):
// controller/translate/annotations/cache.cc. Shared parts: table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

std::vector<Case> cache_cases() {
  return {
      {"enable-cache", A({{"enable-cache", "true"}}),
       [](IngressPolicy& p) { p.route.mut().cache = true; }},
      {"off as written", A({{"enable-cache", "false"}}), {}},
      {"not a boolean: off",
       A({{"enable-cache", "on"}}),
       {},
       {E("enable-cache: invalid value \"on\": expected \"true\" or \"false\"")}},
  };
}

TEST(AnnotationsCache, Table) {
  for (const auto& c : cache_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
