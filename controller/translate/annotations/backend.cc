// Backend choice: load-balance, upstream-hash-by, affinity and its session cookies,
// backend-protocol, proxy-ssl-secret and proxy-ssl-name.

#include "text/text.h"
#include "translate/annotations/parser.h"

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_load_balancing() {
  auto& up = upstream_;
  auto lb = get("load-balance");
  if (lb) {
    if (auto m = model::load_balance_from_string(trim(lb->value))) {
      up.load_balance = *m;
    } else {
      invalid(*lb, "expected one of round_robin, least_conn, ip_hash, ewma");
      lb.reset();
    }
  }
  if (auto h = get("upstream-hash-by")) {
    std::string_view v = trim(h->value);
    if (auto why = model::check_hash_expression(v)) {
      invalid(*h, *why);
    } else {
      up.hash_by = std::string(v);
      if (lb) warn(*lb, "overridden by " + h->key + " (consistent hashing)");
    }
  }
}

void Parser::parse_affinity() {
  static constexpr std::string_view kCookieAnnotations[] = {
      "session-cookie-name",     "session-cookie-max-age",
      "session-cookie-path",     "session-cookie-secure",
      "session-cookie-samesite", "session-cookie-domain",
      "session-cookie-expires",  "affinity-mode"};
  auto a = get("affinity");
  if (a && trim(a->value) != "cookie") {
    invalid(*a, "the only supported affinity is \"cookie\"");
    a.reset();
  }
  if (!a) {
    for (auto name : kCookieAnnotations) no_effect_without(name, "affinity: cookie");
    return;
  }
  model::SessionAffinity s;
  if (auto n = get("session-cookie-name")) {
    std::string_view v = trim(n->value);
    if (model::is_token(v)) {
      s.cookie_name = std::string(v);
    } else {
      invalid(*n, "a cookie name must be a token (letters, digits and !#$%&'*+-.^_`|~)");
    }
  }
  s.max_age_seconds =
      get_integer("session-cookie-max-age", 0, model::SessionAffinity::kMaxMaxAgeSeconds);
  if (auto p = get("session-cookie-path")) {
    std::string_view v = trim(p->value);
    if (auto why = model::check_path(v)) {
      invalid(*p, "a cookie path " + *why);
    } else {
      s.path = std::string(v);
    }
  }
  s.secure = get_bool("session-cookie-secure").value_or(false);
  if (auto ss = get("session-cookie-samesite")) {
    if (auto v = model::same_site_from_string(trim(ss->value))) {
      s.same_site = *v;
    } else {
      invalid(*ss, "expected Strict, Lax or None");
    }
  }
  if (auto d = get("session-cookie-domain")) {
    std::string v = text::ascii_lower(std::string(trim(d->value)));
    if (auto why = model::check_cookie_domain(v)) {
      invalid(*d, "a cookie domain " + *why);
    } else {
      s.domain = std::move(v);
    }
  }
  s.expires_seconds =
      get_integer("session-cookie-expires", 0, model::SessionAffinity::kMaxMaxAgeSeconds);
  if (auto m = get("affinity-mode")) {
    // Both keep a session on its endpoint while that endpoint lives (docs/annotations.md).
    const std::string_view v = trim(m->value);
    if (v != "balanced" && v != "persistent") invalid(*m, "expected balanced or persistent");
  }
  upstream_.affinity = std::move(s);
}

void Parser::parse_backend_protocol() {
  auto& up = upstream_;
  if (auto p = get("backend-protocol")) {
    std::string_view v = trim(p->value);
    std::string upper(v);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    // The annotation's names: ingress-nginx's, plus H2C. gRPC is HTTP/2 (with trailers).
    std::optional<model::BackendProtocol> proto;
    if (upper == "HTTP") proto = model::BackendProtocol::kHttp;
    if (upper == "HTTPS") proto = model::BackendProtocol::kHttps;
    if (upper == "H2C" || upper == "GRPC") proto = model::BackendProtocol::kH2c;
    if (upper == "GRPCS") proto = model::BackendProtocol::kH2;
    static constexpr std::string_view kNginxOnly[] = {"AUTO_HTTP", "FCGI"};
    if (proto) {
      up.protocol = *proto;
    } else {
      bool known =
          std::find(std::begin(kNginxOnly), std::end(kNginxOnly), upper) != std::end(kNginxOnly);
      invalid(*p, known ? upper + " backends are not supported (HTTP, HTTPS, H2C, GRPC or GRPCS)"
                        : "expected HTTP, HTTPS, H2C, GRPC or GRPCS");
    }
  }
  parse_proxy_ssl_secret();
  if (auto su = get_bool("service-upstream")) up.service_upstream = *su;
  if (auto n = get("proxy-ssl-name")) {
    std::string name(trim(n->value));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (auto why = model::check_tls_server_name(name)) {
      invalid(*n, *why);
    } else if (!model::uses_tls(up.protocol)) {
      warn(*n, "has no effect without backend-protocol: HTTPS or GRPCS; ignored");
    } else {
      up.tls_server_name = std::move(name);
    }
  }
}

void Parser::parse_proxy_ssl_secret() {
  auto& up = upstream_;
  auto s = get("proxy-ssl-secret");
  if (!s) return;
  auto ref = own_secret(*s);
  if (!ref) return;
  if (!model::uses_tls(up.protocol)) {
    warn(*s, "has no effect without backend-protocol: HTTPS or GRPCS; ignored");
    return;
  }
  up.tls_secret = std::move(*ref);
}

}  // namespace tidegate::controller::translate::annotations_detail
