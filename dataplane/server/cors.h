#pragma once
// enable-cors and cors-* (model::Cors) compiled once per routing table: the origin matcher and
// the field values, so the request path only compares the Origin field and copies prepared
// strings. Semantics (docs/annotations.md, "CORS"):
//   - an origin is allowed when it equals an allowed "scheme://host[:port]" (scheme and host
//     without case), or its host ends with ".suffix" of an allowed "scheme://*.suffix[:port]"
//     (one or more labels in front); "*" allows every origin;
//   - a preflight (OPTIONS with Origin and Access-Control-Request-Method) from an allowed origin
//     is answered 204 by the proxy; other requests from an allowed origin go upstream and their
//     response gets Access-Control-Allow-Origin (and -Credentials, -Expose-Headers);
//   - with "*" the answer is a literal "*" and Access-Control-Allow-Credentials is never sent;
//   - an origin that is not allowed gets no CORS fields, and its preflight goes upstream;
//   - with gateway_api (the Gateway API's filter), every preflight is answered by the proxy (the
//     CORS fields only for an allowed origin), and with allow_credentials a "*" in the origins,
//     methods or headers is answered with the request's own Origin,
//     Access-Control-Request-Method or Access-Control-Request-Headers (the field is left out
//     when the request has none), and credentials are sent.

#include <string>
#include <string_view>
#include <vector>

#include "model/policy.h"

namespace tidegate::dataplane::server {

class CompiledCors {
 public:
  explicit CompiledCors(const model::Cors& cors);

  // Whether `origin` (the request's Origin field value) may read responses.
  bool allows(std::string_view origin) const;
  // Whether the proxy answers a preflight from an origin that is not allowed (204, no CORS
  // fields) instead of sending it to the backend.
  bool answers_every_preflight() const { return answer_preflights_; }

  // The Access-Control-Allow-Origin value for an allowed origin: "*" or the origin itself.
  std::string_view allow_origin_value(std::string_view origin) const {
    return any_origin_ && !echo_ ? std::string_view("*") : origin;
  }
  // Whether responses vary by Origin (the origin is echoed): add "Vary: Origin".
  bool varies_by_origin() const { return !any_origin_ || echo_; }
  // Access-Control-Allow-Credentials: true is sent (never with a literal "*").
  bool credentials() const { return credentials_; }
  // A preflight's Access-Control-Allow-Methods and -Headers, given the request's
  // Access-Control-Request-Method and -Headers (echoed for an echoed "*"); empty: none sent.
  std::string_view allow_methods(std::string_view requested) const {
    return echo_methods_ ? requested : std::string_view(allow_methods_);
  }
  std::string_view allow_headers(std::string_view requested) const {
    return echo_headers_ ? requested : std::string_view(allow_headers_);
  }
  const std::string& expose_headers() const { return expose_headers_; }  // empty: none sent
  const std::string& max_age() const { return max_age_; }

 private:
  struct Pattern {
    std::string scheme;  // "http://" or "https://"
    std::string host;    // lower case; for a wildcard, the suffix with its leading '.'
    std::string port;    // ":8443" or empty
    bool wildcard = false;
  };
  static bool matches(const Pattern& p, std::string_view scheme, std::string_view host,
                      std::string_view port);

  bool any_origin_ = false;
  bool credentials_ = false;
  bool answer_preflights_ = false;
  bool echo_ = false;          // "*" echoed (gateway_api with credentials)
  bool echo_methods_ = false;  // "*" echoed: the requested method
  bool echo_headers_ = false;  // "*" echoed: the requested headers
  std::vector<Pattern> patterns_;
  std::string allow_methods_;
  std::string allow_headers_;
  std::string expose_headers_;
  std::string max_age_;
};

}  // namespace tidegate::dataplane::server
