// Buffering and the upstream HTTP version: proxy-buffering, proxy-request-buffering,
// client-body-buffer-size and proxy-http-version. Tidegate's data plane always streams both
// bodies (nginx's proxy_buffering off and proxy_request_buffering off) and speaks HTTP/1.1 to
// HTTP/1 backends, so these set nothing: the values that ask for what Tidegate does are accepted
// silently, the others get a warning that says what happens instead, and malformed ones an error.

#include "translate/annotations/parser.h"

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_buffering() {
  auto on_off = [&](std::string_view name, const std::string& on_means) {
    auto a = get(name);
    if (!a) return;
    const std::string_view v = trim(a->value);
    if (v == "off") return;
    if (v == "on") {
      warn(*a, on_means);
    } else {
      invalid(*a, "expected \"on\" or \"off\"");
    }
  };
  on_off("proxy-buffering",
         "responses always stream to the client as they arrive (nginx's proxy_buffering off); "
         "\"on\" is ignored");
  on_off("proxy-request-buffering",
         "request bodies always stream to the backend as they arrive (nginx's "
         "proxy_request_buffering off); \"on\" is ignored");
  if (auto a = get("client-body-buffer-size")) {
    auto n = parse_nginx_size(trim(a->value));
    if (!n || *n == 0) {
      invalid(*a, "expected a size such as \"16k\" or \"1m\"");
    }
    // Bodies stream through a fixed relay buffer (never to disk): a valid size changes nothing.
  }
  if (auto a = get("proxy-http-version")) {
    const std::string_view v = trim(a->value);
    if (v == "1.0") {
      warn(*a,
           "HTTP/1 backends are spoken to in HTTP/1.1 with keep-alive (HTTP/2 with "
           "backend-protocol H2C or GRPC); \"1.0\" is ignored");
    } else if (v != "1.1") {
      invalid(*a, "expected \"1.0\" or \"1.1\"");
    }
  }
}

}  // namespace tidegate::controller::translate::annotations_detail
