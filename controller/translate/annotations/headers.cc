// Headers: custom-headers, upstream-vhost, x-forwarded-prefix, allow-upgrade, enable-cors and
// cors-*, hsts*; and enable-access-log.

#include "translate/annotations/parser.h"

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_headers() {
  auto& r = route_;
  if (auto a = get("custom-headers")) {
    std::vector<model::Header> headers;
    std::string why;
    std::set<std::string> names;
    std::string_view v = a->value;
    size_t line_no = 0;
    size_t start = 0;
    while (start <= v.size() && why.empty()) {
      size_t nl = v.find('\n', start);
      std::string_view line = trim(v.substr(start, nl == std::string_view::npos ? nl : nl - start));
      start = nl == std::string_view::npos ? v.size() + 1 : nl + 1;
      ++line_no;
      if (line.empty()) continue;
      const std::string where = "line " + std::to_string(line_no) + ": ";
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) {
        why = where + "expected \"Name: value\"";
        break;
      }
      model::Header h{std::string(trim(line.substr(0, colon))),
                      std::string(trim(line.substr(colon + 1)))};
      if (auto bad = model::check_response_header(h.name, h.value)) {
        why = where + *bad;
      } else {
        std::string lower = h.name;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (!names.insert(lower).second) why = where + h.name + " is set twice";
      }
      headers.push_back(std::move(h));
    }
    if (why.empty() && headers.empty()) why = "no header given";
    if (why.empty() && headers.size() > model::kMaxResponseHeaders) {
      why = "more than " + std::to_string(model::kMaxResponseHeaders) + " headers";
    }
    const std::string_view whole = trim(v);
    if (!why.empty() && !whole.empty() && whole.find(':') == std::string_view::npos &&
        std::none_of(whole.begin(), whole.end(), is_space)) {
      // ingress-nginx's custom-headers names a ConfigMap; we read the headers inline.
      why =
          "ConfigMap references are not supported; write the headers inline, one "
          "\"Name: value\" per line";
    }
    if (why.empty()) {
      r.response_headers = std::move(headers);
    } else {
      invalid(*a, why);
    }
  }
  if (auto a = get("x-forwarded-prefix")) {
    std::string_view v = trim(a->value);
    if (auto why = model::check_path(v)) {
      invalid(*a, "expected a path such as \"/app\": " + *why);
    } else {
      r.forwarded_prefix = std::string(v);
    }
  }
  if (auto on = get_bool("enable-access-log")) r.access_log = *on;
  if (auto a = get("upstream-vhost")) {
    std::string_view v = trim(a->value);
    if (auto why = model::check_host_port(v)) {
      invalid(*a, *why);
    } else {
      r.upstream_vhost = std::string(v);
    }
  }
  if (auto a = get("allow-upgrade")) {
    std::vector<std::string> protocols;
    std::string why;
    for (auto& p : split_commas(a->value)) {
      for (auto& c : p) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (auto bad = model::check_upgrade_protocol(p)) {
        why = quote(p) + ": " + *bad;
        break;
      }
      if (std::find(protocols.begin(), protocols.end(), p) == protocols.end()) {
        protocols.push_back(std::move(p));
      }
    }
    if (why.empty()) {
      r.upgrade_protocols = std::move(protocols);
    } else {
      invalid(*a, why);
    }
  }
}

void Parser::parse_cors() {
  static constexpr std::string_view kCorsAnnotations[] = {
      "cors-allow-origin",   "cors-allow-methods",     "cors-allow-headers",
      "cors-expose-headers", "cors-allow-credentials", "cors-max-age"};
  if (!get_bool("enable-cors").value_or(false)) {
    for (auto name : kCorsAnnotations) no_effect_without(name, "enable-cors: \"true\"");
    return;
  }
  model::Cors c;
  if (auto a = get("cors-allow-origin")) {
    auto origins = split_commas(a->value);
    std::string why;
    for (const auto& o : origins) {
      if (auto bad = model::check_cors_origin(o)) {
        why = "origin " + quote(o) + " " + *bad;
        break;
      }
    }
    if (why.empty() && origins.size() > 1 &&
        std::find(origins.begin(), origins.end(), "*") != origins.end()) {
      why = "\"*\" must be alone";
    }
    if (why.empty()) {
      c.allow_origins = std::move(origins);
    } else {
      invalid(*a, why);
    }
  }
  token_list("cors-allow-methods", false, c.allow_methods);
  token_list("cors-allow-headers", true, c.allow_headers);
  token_list("cors-expose-headers", true, c.expose_headers);
  if (auto b = get_bool("cors-allow-credentials")) c.allow_credentials = *b;
  if (auto n = get_integer("cors-max-age", 0, model::Cors::kMaxMaxAgeSeconds)) {
    c.max_age_seconds = *n;
  }
  route_.cors = std::move(c);
}

// hsts: Strict-Transport-Security on HTTPS responses; the other three refine it.
void Parser::parse_hsts() {
  static constexpr std::string_view kRefining[] = {"hsts-max-age", "hsts-include-subdomains",
                                                   "hsts-preload"};
  if (!get_bool("hsts").value_or(false)) {
    for (auto name : kRefining) no_effect_without(name, "hsts: \"true\"");
    return;
  }
  model::Hsts h;
  if (auto n = get_integer("hsts-max-age", 0, model::Hsts::kMaxMaxAgeSeconds)) {
    h.max_age_seconds = *n;
  }
  if (auto b = get_bool("hsts-include-subdomains")) h.include_subdomains = *b;
  std::optional<FoundAnnotation> preload_found;
  if (auto b = get_bool("hsts-preload")) {
    h.preload = *b;
    preload_found = get("hsts-preload");
  }
  // The browsers' preload lists take a host only with a year or more and includeSubDomains.
  if (h.preload && (h.max_age_seconds < 31'536'000 || !h.include_subdomains)) {
    warn(*preload_found,
         "preload lists require hsts-max-age of at least 31536000 and "
         "hsts-include-subdomains; sent as asked");
  }
  route_.hsts = h;
}

void Parser::token_list(std::string_view name, bool star_alone, std::vector<std::string>& out) {
  auto a = get(name);
  if (!a) return;
  auto items = split_commas(a->value);
  for (const auto& t : items) {
    if (star_alone && t == "*") {
      if (items.size() == 1) continue;
      invalid(*a, "\"*\" must be alone");
      return;
    }
    if (!model::is_token(t)) {
      invalid(*a, (t.empty() ? std::string("empty entry") : quote(t) + " is not a token") +
                      (star_alone ? " (a comma-separated list of names, or \"*\")"
                                  : " (a comma-separated list of names)"));
      return;
    }
  }
  out = std::move(items);
}

}  // namespace tidegate::controller::translate::annotations_detail
