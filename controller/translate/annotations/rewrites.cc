// Rewrites and redirects: rewrite-target (capture groups checked against the regex paths),
// app-root, permanent-/temporal-redirect(-code).

#include "translate/annotations/parser.h"

#include <re2/re2.h>

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_rewrites_and_redirects() {
  auto& r = route_;
  if (auto a = get("rewrite-target")) {
    std::string_view v = trim(a->value);
    if (auto why = model::check_rewrite_target(v)) {
      invalid(*a, *why);
    } else if (auto why = check_capture_groups(v)) {
      invalid(*a, *why);
    } else {
      r.rewrite_target = std::string(v);
    }
  }
  if (auto a = get("app-root")) {
    std::string_view v = trim(a->value);
    if (auto why = model::check_path(v)) {
      invalid(*a, "app-root " + *why);
    } else {
      r.app_root = std::string(v);
    }
  }
  auto permanent = redirect("permanent-redirect", "permanent-redirect-code", 301);
  auto temporal = redirect("temporal-redirect", "temporal-redirect-code", 302);
  if (permanent && temporal) {
    add(Severity::kWarning, "annotations " + permanent->first + " and " + temporal->first +
                                " are both set; " + temporal->first +
                                " wins (as in ingress-nginx)");
  }
  if (temporal) {
    r.redirect = temporal->second;
  } else if (permanent) {
    r.redirect = permanent->second;
  }
  if (r.redirect && !r.app_root.empty()) {
    add(Severity::kWarning, "app-root has no effect: every request of the route is redirected");
  }
}

// "$N" in a rewrite target must name a capture group of every path it applies to.
std::optional<std::string> Parser::check_capture_groups(std::string_view target) {
  const int wanted = model::max_capture_reference(target);
  if (wanted == 0) return std::nullopt;
  bool any_regex = false;
  for (const auto& p : context_.paths) {
    if (!p.regex) {
      return "refers to $" + std::to_string(wanted) + " but path " + quote(p.path) +
             " is not a regex (set tidegate.io/use-regex: \"true\"; Exact paths are never "
             "regexes)";
    }
    any_regex = true;
    RE2::Options re_options;
    re_options.set_log_errors(false);
    RE2 re(p.path, re_options);
    if (!re.ok()) continue;  // the translator drops that path and reports it
    if (re.NumberOfCapturingGroups() < wanted) {
      return "refers to $" + std::to_string(wanted) + " but path " + quote(p.path) + " has " +
             std::to_string(re.NumberOfCapturingGroups()) + " capture group" +
             (re.NumberOfCapturingGroups() == 1 ? "" : "s");
    }
  }
  if (!any_regex) {
    return "refers to $" + std::to_string(wanted) + " but the Ingress has no regex path";
  }
  return std::nullopt;
}

// The redirect of one kind with its code; reports and ignores invalid parts.
std::optional<std::pair<std::string, model::Redirect>> Parser::redirect(std::string_view url_name,
                                                                        std::string_view code_name,
                                                                        uint16_t default_code) {
  auto a = get(url_name);
  std::optional<std::pair<std::string, model::Redirect>> out;
  if (a) {
    std::string_view v = trim(a->value);
    if (auto why = model::check_redirect_url(v)) {
      invalid(*a, *why);
    } else {
      out.emplace(a->key, model::Redirect{std::string(v), default_code});
    }
  }
  if (!out) {
    no_effect_without(code_name, std::string(url_name));
    return out;
  }
  if (auto c = get(code_name)) {
    std::string_view v = trim(c->value);
    auto valid = std::find_if(std::begin(model::kRedirectCodes), std::end(model::kRedirectCodes),
                              [&](uint16_t code) { return v == std::to_string(code); });
    if (valid == std::end(model::kRedirectCodes)) {
      invalid(*c, "expected 301, 302, 303, 307 or 308",
              "ignored (" + std::to_string(default_code) + " applies)");
    } else {
      out->second.code = *valid;
    }
  }
  return out;
}

}  // namespace tidegate::controller::translate::annotations_detail
