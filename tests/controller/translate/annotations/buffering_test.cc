// Annotation table cases of the buffering family (proxy-buffering, proxy-request-buffering,
// client-body-buffer-size, proxy-http-version): controller/translate/annotations/buffering.cc.
// They set nothing (both bodies always stream; HTTP/1 backends get HTTP/1.1): what Tidegate
// does anyway is accepted silently, the rest is a warning or an error. Shared parts: table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

std::vector<Case> buffering_cases() {
  return {
      {"what the data plane does anyway", A({{"proxy-buffering", "off"},
                                             {"proxy-request-buffering", "off"},
                                             {"client-body-buffer-size", "16k"},
                                             {"proxy-http-version", "1.1"}})},
      {"nginx spellings",
       A({{"nginx.ingress.kubernetes.io/proxy-buffering", "off"},
          {"nginx.ingress.kubernetes.io/proxy-http-version", "1.1"}}),
       {},
       {},
       plain_paths(),
       AnnotationOptions{true}},
      {"buffering asked for: a warning, bodies still stream",
       A({{"proxy-buffering", "on"},
          {"proxy-request-buffering", "on"},
          {"proxy-http-version", "1.0"}}),
       {},
       {W("proxy-buffering: responses always stream to the client"),
        W("proxy-request-buffering: request bodies always stream to the backend"),
        W("proxy-http-version: HTTP/1 backends are spoken to in HTTP/1.1")}},
      {"malformed values",
       A({{"proxy-buffering", "yes"},
          {"proxy-request-buffering", "1"},
          {"client-body-buffer-size", "lots"},
          {"proxy-http-version", "2"}}),
       {},
       {E("proxy-buffering: invalid value \"yes\": expected \"on\" or \"off\""),
        E("proxy-request-buffering: invalid value \"1\": expected \"on\" or \"off\""),
        E("client-body-buffer-size: invalid value \"lots\": expected a size"),
        E("proxy-http-version: invalid value \"2\": expected \"1.0\" or \"1.1\"")}},
  };
}

TEST(AnnotationsBuffering, Table) {
  for (const auto& c : buffering_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
