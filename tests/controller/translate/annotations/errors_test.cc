// Annotation table cases of the error-pages family (custom-http-errors):
// controller/translate/annotations/errors.cc. Shared parts: table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

std::vector<Case> errors_cases() {
  return {
      {"custom-http-errors, sorted and unique", A({{"custom-http-errors", "503, 404,404,500"}}),
       [](IngressPolicy& p) {
         p.route.mut().error_codes = {404, 500, 503};
       }},
      {"custom-http-errors outside 400-599",
       A({{"custom-http-errors", "404,302"}}),
       {},
       {E("custom-http-errors: invalid value \"404,302\": status 302 is not an error (400-599)")}},
      {"custom-http-errors not numbers",
       A({{"custom-http-errors", "404,5xx"}}),
       {},
       {E("custom-http-errors: invalid value \"404,5xx\": entry \"5xx\" is not a status code")}},
      {"custom-http-errors empty",
       A({{"custom-http-errors", ""}}),
       {},
       {E("entry \"\" is not a status code")}},
  };
}

TEST(AnnotationsErrors, Table) {
  for (const auto& c : errors_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
