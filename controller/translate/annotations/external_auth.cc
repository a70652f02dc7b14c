// External authentication: auth-url with auth-method, auth-signin, auth-signin-redirect-param,
// auth-response-headers, auth-request-redirect, auth-cache-key, auth-cache-duration and
// auth-always-set-cookie. The parser checks the URL and the templates; the translator turns the
// URL's host into the Service's upstream (translate.cc, resolve_external_auth). An auth-url that
// cannot be used never opens the route: it fails closed (503 for every request).

#include <algorithm>

#include "text/text.h"
#include "translate/annotations/parser.h"

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_external_auth() {
  static constexpr std::string_view kRefinements[] = {
      "auth-method",           "auth-signin",           "auth-signin-redirect-param",
      "auth-response-headers", "auth-request-redirect", "auth-cache-key",
      "auth-cache-duration",   "auth-always-set-cookie"};
  auto url = get("auth-url");
  if (!url) {
    for (std::string_view name : kRefinements) no_effect_without(name, "auth-url");
    return;
  }
  model::ExternalAuth auth;
  auto& slot = route_.external_auth;
  const std::string closed = "the route refuses every request (503) until it is fixed";
  const std::string written(trim(url->value));
  std::string error;
  auto parsed = model::parse_auth_url(written, &error);
  if (!parsed) {
    invalid(*url, error, closed);
  } else if (!model::service_of_auth_host(parsed->host, context_.ingress_namespace)) {
    invalid(*url,
            "the host must name a Service of the cluster (name, name.namespace or "
            "name.namespace.svc[.cluster.local]); other hosts are not supported",
            closed);
  } else {
    auth.url = written;
  }
  if (auto m = get("auth-method")) {
    std::string method = text::ascii_lower(std::string(trim(m->value)));
    std::transform(method.begin(), method.end(), method.begin(),
                   [](char c) { return c >= 'a' && c <= 'z' ? char(c - 'a' + 'A') : c; });
    model::ExternalAuth probe;
    probe.method = method;
    if (method.empty() || !model::validate(probe).empty() || method == "CONNECT" ||
        method == "TRACE") {
      invalid(*m, "expected GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS", "GET applies");
    } else {
      auth.method = method;
    }
  }
  // A template annotation: checked as the data plane will read it.
  auto template_of = [&](std::string_view name, std::string* out, const std::string& otherwise) {
    auto a = get(name);
    if (!a) return;
    std::string value(trim(a->value));
    std::vector<model::TemplatePart> parts;
    if (value.size() > 2048) {
      invalid(*a, "is longer than 2048 bytes", otherwise);
    } else if (!std::all_of(value.begin(), value.end(),
                            [](char c) { return c > 0x20 && c < 0x7f; })) {
      invalid(*a, "must be printable ASCII without spaces", otherwise);
    } else if (auto why = model::parse_template(value, &parts)) {
      invalid(*a, *why, otherwise);
    } else {
      *out = std::move(value);
    }
  };
  template_of("auth-signin", &auth.signin, "a refused request gets 401");
  if (auto p = get("auth-signin-redirect-param")) {
    std::string param(trim(p->value));
    model::ExternalAuth probe;
    probe.signin_redirect_param = param;
    if (param.empty() || !model::validate(probe).empty()) {
      invalid(*p, "expected a query parameter name (a token)", "rd applies");
    } else if (auth.signin.empty()) {
      warn(*p, "has no effect without auth-signin; ignored");
    } else {
      auth.signin_redirect_param = std::move(param);
    }
  }
  if (auto h = get("auth-response-headers")) {
    bool ok = true;
    std::vector<std::string> names;
    for (auto& item : split_commas(h->value)) {
      std::string name = text::ascii_lower(item);
      model::ExternalAuth probe;
      probe.response_headers = {name};
      if (name.empty() || !model::validate(probe).empty()) {
        invalid(*h, "expected header names separated by commas", "no header is copied");
        ok = false;
        break;
      }
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    if (ok && names.size() > model::ExternalAuth::kMaxResponseHeaders) {
      invalid(*h, "names more than 32 headers", "no header is copied");
      ok = false;
    }
    if (ok) auth.response_headers = std::move(names);
  }
  template_of("auth-request-redirect", &auth.request_redirect,
              "X-Auth-Request-Redirect is the request's URI");
  template_of("auth-cache-key", &auth.cache_key, "responses are not cached");
  if (auto d = get("auth-cache-duration")) {
    std::string why;
    auto rules = model::parse_auth_cache_duration(trim(d->value), &why);
    if (!rules) {
      invalid(*d, why,
              auth.cache_key.empty() ? "ignored" : "the default \"200 202 401 5m\" applies");
    } else if (auth.cache_key.empty()) {
      warn(*d, "has no effect without auth-cache-key; ignored");
    } else {
      auth.cache_rules = std::move(*rules);
    }
  }
  if (!auth.cache_key.empty() && auth.cache_rules.empty()) {
    auth.cache_rules = model::default_auth_cache_rules();
  }
  if (auto c = get_bool("auth-always-set-cookie")) auth.always_set_cookie = *c;
  slot = std::move(auth);
}

}  // namespace tidegate::controller::translate::annotations_detail
