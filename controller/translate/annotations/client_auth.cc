// Client certificates: auth-tls-secret, auth-tls-verify-client, auth-tls-verify-depth,
// auth-tls-pass-certificate-to-upstream, auth-tls-error-page, auth-tls-match-cn. The parser
// checks the values and the Secret reference; the translator reads the Secret's ca.crt (and
// ca.crl) and puts the settings on the Ingress's TLS hosts (translate.cc, add_client_auth). A
// setup that cannot be used never opens the hosts: they refuse every request until it is fixed.

#include <re2/re2.h>

#include "text/text.h"
#include "translate/annotations/parser.h"

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_client_auth() {
  static constexpr std::string_view kRefinements[] = {
      "auth-tls-verify-client", "auth-tls-verify-depth", "auth-tls-pass-certificate-to-upstream",
      "auth-tls-error-page", "auth-tls-match-cn"};
  auto secret = get("auth-tls-secret");
  if (!secret) {
    for (std::string_view name : kRefinements) no_effect_without(name, "auth-tls-secret");
    return;
  }
  const std::string closed = "the Ingress's hosts refuse every request (503) until it is fixed";
  model::ClientAuth auth;
  if (auto v = get("auth-tls-verify-client")) {
    const std::string mode = text::ascii_lower(std::string(trim(v->value)));
    if (mode == "off") {
      warn(*v, "\"off\": no client certificates are asked for; auth-tls-secret is ignored");
      return;
    }
    if (auto parsed = model::client_verify_from_string(mode)) {
      auth.verify = *parsed;
    } else {
      invalid(*v, "expected on, off, optional or optional_no_ca", "\"on\" applies");
    }
  }
  if (auto depth = get_integer("auth-tls-verify-depth", 1, model::ClientAuth::kMaxVerifyDepth)) {
    auth.verify_depth = static_cast<uint32_t>(*depth);
  }
  if (auto pass = get_bool("auth-tls-pass-certificate-to-upstream")) auth.pass_certificate = *pass;
  if (auto page = get("auth-tls-error-page")) {
    std::string url(trim(page->value));
    if (auto why = model::check_error_page_url(url)) {
      invalid(*page, "the URL " + *why, "failures are answered 400");
    } else {
      auth.error_page = std::move(url);
    }
  }
  if (auto cn = get("auth-tls-match-cn")) {
    std::string pattern(trim(cn->value));
    RE2::Options options;
    options.set_log_errors(false);
    RE2 re(pattern, options);
    if (pattern.empty() || !re.ok()) {
      // Refusing every certificate is closer to what was asked than accepting any subject.
      invalid(*cn, pattern.empty() ? "an empty pattern" : "not an RE2 pattern: " + re.error(),
              closed);
      result_.policy.client_auth = std::move(auth);
      return;
    }
    auth.match_cn = std::move(pattern);
  }
  if (auto ref = own_secret(*secret, closed)) auth.secret = std::move(*ref);
  result_.policy.client_auth = std::move(auth);
}

}  // namespace tidegate::controller::translate::annotations_detail
