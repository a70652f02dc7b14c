// Annotation table cases of the compression family (enable-compression, compression-min-length,
// compression-types, compression-breach-mitigation):
// controller/translate/annotations/compression.cc. Shared parts: table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

std::vector<Case> compression_cases() {
  AnnotationOptions on_by_default;
  on_by_default.compression_default = true;
  return {
      {"enable-compression", A({{"enable-compression", "true"}}),
       [](IngressPolicy& p) { p.route.mut().compression = model::Compression{}; }},
      {"min length and own types, comma or space separated, lower-cased",
       A({{"enable-compression", "true"},
          {"compression-min-length", "1024"},
          {"compression-types", "text/html, Application/JSON  image/svg+xml"}}),
       [](IngressPolicy& p) {
         model::Compression c;
         c.min_length = 1024;
         c.types = {"text/html", "application/json", "image/svg+xml"};
         p.route.mut().compression = c;
       }},
      {"a bad type keeps the default list",
       A({{"enable-compression", "true"}, {"compression-types", "text/html, html"}}),
       [](IngressPolicy& p) { p.route.mut().compression = model::Compression{}; },
       {E("compression-types: invalid value \"text/html, html\": \"html\" must be a lower-case "
          "media type such as \"text/css\"; the default list applies")}},
      {"a bad min length",
       A({{"enable-compression", "true"}, {"compression-min-length", "-1"}}),
       [](IngressPolicy& p) { p.route.mut().compression = model::Compression{}; },
       {E("compression-min-length: invalid value \"-1\": expected a whole number")}},
      {"not a boolean",
       A({{"enable-compression", "yes"}}),
       {},
       {E("enable-compression: invalid value \"yes\": expected \"true\" or \"false\"")}},
      {"settings without enable-compression are ignored",
       A({{"compression-types", "text/css"}}),
       {},
       {W("compression-types: has no effect without enable-compression")}},
      {"BREACH mitigation: no compression for credentialed requests",
       A({{"enable-compression", "true"}, {"compression-breach-mitigation", "No-Credentials"}}),
       [](IngressPolicy& p) {
         model::Compression c;
         c.breach = model::BreachMitigation::kNoCredentials;
         p.route.mut().compression = c;
       }},
      {"BREACH mitigation: padding",
       A({{"enable-compression", "true"}, {"compression-breach-mitigation", "padding"}}),
       [](IngressPolicy& p) {
         model::Compression c;
         c.breach = model::BreachMitigation::kPadding;
         p.route.mut().compression = c;
       }},
      {"an unknown BREACH mitigation: no-credentials, the safe reading",
       A({{"enable-compression", "true"}, {"compression-breach-mitigation", "random"}}),
       [](IngressPolicy& p) {
         model::Compression c;
         c.breach = model::BreachMitigation::kNoCredentials;
         p.route.mut().compression = c;
       },
       {E("compression-breach-mitigation: invalid value \"random\": expected off, "
          "no-credentials or padding; no-credentials applies")}},
      {"the controller's default turns it on",
       A({}),
       [](IngressPolicy& p) { p.route.mut().compression = model::Compression{}; },
       {},
       plain_paths(),
       on_by_default},
      {"and an Ingress turns it off",
       A({{"enable-compression", "false"}}),
       {},
       {},
       plain_paths(),
       on_by_default},
  };
}

TEST(AnnotationsCompression, Table) {
  for (const auto& c : compression_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
