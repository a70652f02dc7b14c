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
//   - an origin that is not allowed gets no CORS fields, and its preflight goes upstream.

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

  // The Access-Control-Allow-Origin value for an allowed origin: "*" or the origin itself.
  std::string_view allow_origin_value(std::string_view origin) const {
    return any_origin_ ? std::string_view("*") : origin;
  }
  // Whether responses vary by Origin (the origin is echoed): add "Vary: Origin".
  bool varies_by_origin() const { return !any_origin_; }
  // Access-Control-Allow-Credentials: true is sent (never with "*").
  bool credentials() const { return credentials_; }
  const std::string& allow_methods() const { return allow_methods_; }
  const std::string& allow_headers() const { return allow_headers_; }    // empty: none sent
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
  std::vector<Pattern> patterns_;
  std::string allow_methods_;
  std::string allow_headers_;
  std::string expose_headers_;
  std::string max_age_;
};

}  // namespace tidegate::dataplane::server
