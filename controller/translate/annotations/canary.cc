// Canary: canary, canary-weight(-total), canary-by-header(-value, -pattern), canary-by-cookie.

#include "text/http_syntax.h"
#include "translate/annotations/parser.h"

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_canary() {
  static constexpr std::string_view kCanaryAnnotations[] = {
      "canary-weight",          "canary-weight-total",      "canary-by-header",
      "canary-by-header-value", "canary-by-header-pattern", "canary-by-cookie"};
  if (!get_bool("canary").value_or(false)) {
    for (auto name : kCanaryAnnotations) no_effect_without(name, "canary: \"true\"");
    return;
  }
  Canary c;
  if (auto t = get_integer("canary-weight-total", 1, Canary::kMaxWeightTotal)) {
    c.weight_total = static_cast<uint32_t>(*t);
  }
  std::optional<FoundAnnotation> weight_found;
  if (auto w = get_integer("canary-weight", 0, Canary::kMaxWeightTotal, &weight_found)) {
    if (*w > c.weight_total) {
      invalid(*weight_found, "more than the weight total " + std::to_string(c.weight_total),
              "ignored (weight 0)");
    } else {
      c.weight = static_cast<uint32_t>(*w);
    }
  }
  if (auto h = get("canary-by-header")) {
    std::string_view v = trim(h->value);
    if (model::is_token(v)) {
      c.header = std::string(v);
    } else {
      invalid(*h, "a header name must be a token");
    }
  }
  if (auto hv = get("canary-by-header-value")) {
    std::string_view v = trim(hv->value);
    if (c.header.empty()) {
      invalid(*hv, "needs a valid canary-by-header");
    } else if (v.empty() || v.size() > 4096 || !text::is_field_value(v)) {
      invalid(*hv, "a header value must be non-empty without control characters");
    } else {
      c.header_value = std::string(v);
    }
  }
  if (auto hp = get("canary-by-header-pattern")) {
    std::string_view v = trim(hp->value);
    if (c.header.empty()) {
      invalid(*hp, "needs a valid canary-by-header");
    } else if (!c.header_value.empty()) {
      warn(*hp,
           "has no effect with canary-by-header-value (the exact value wins, as in "
           "ingress-nginx); ignored");
    } else if (auto why = model::check_header_pattern(v)) {
      invalid(*hp, "the pattern " + *why);
    } else {
      c.header_pattern = std::string(v);
    }
  }
  if (auto k = get("canary-by-cookie")) {
    std::string_view v = trim(k->value);
    if (model::is_token(v)) {
      c.cookie = std::string(v);
    } else {
      invalid(*k, "a cookie name must be a token");
    }
  }
  result_.policy.canary = std::move(c);
}

}  // namespace tidegate::controller::translate::annotations_detail
