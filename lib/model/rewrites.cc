#include "model/rewrites.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "model/object_reader.h"
#include "model/policy.h"
#include "model/syntax.h"

namespace tidegate::model {

using detail::is_visible;
using detail::ObjectReader;
using detail::quote;
using nlohmann::json;

std::optional<std::string> check_rewrite_target(std::string_view target) {
  if (target.empty()) return "empty";
  if (target.size() > 4096) return "longer than 4096 bytes";
  if (!is_visible(target)) return "may hold only printable characters without spaces";
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] != '$') continue;
    if (i + 1 >= target.size() || target[i + 1] < '1' || target[i + 1] > '9') {
      return "'$' at offset " + std::to_string(i) +
             " is not followed by a group number 1-9 (no other variables are supported)";
    }
  }
  return std::nullopt;
}

int max_capture_reference(std::string_view target) {
  int max = 0;
  for (size_t i = 0; i + 1 < target.size(); ++i) {
    if (target[i] == '$' && target[i + 1] >= '1' && target[i + 1] <= '9') {
      max = std::max(max, target[i + 1] - '0');
    }
  }
  return max;
}

std::optional<std::string> check_redirect_url(std::string_view url) {
  const bool absolute = (url.substr(0, 7) == "http://" && url.size() > 7 && url[7] != '/') ||
                        (url.substr(0, 8) == "https://" && url.size() > 8 && url[8] != '/');
  const bool path = !url.empty() && url[0] == '/' && url.substr(0, 2) != "//";
  if (!absolute && !path) return "must be an http:// or https:// URL or a path starting with '/'";
  if (url.size() > 4096) return "longer than 4096 bytes";
  if (!is_visible(url) || url.find_first_of("\"\\<>{}|^`") != std::string_view::npos) {
    return "may not hold spaces, control characters, quotes, backslashes or <>{}|^`";
  }
  return std::nullopt;
}

void validate_rewrites(const RoutePolicy& p, std::vector<std::string>& problems) {
  if (!p.rewrite_target.empty()) {
    if (auto why = check_rewrite_target(p.rewrite_target)) {
      problems.push_back("rewrite_target " + quote(p.rewrite_target) + ": " + *why);
    }
  }
  if (!p.app_root.empty()) {
    if (auto why = check_path(p.app_root)) {
      problems.push_back("app_root " + quote(p.app_root) + ": " + *why);
    }
  }
  if (p.redirect) {
    if (auto why = check_redirect_url(p.redirect->url)) {
      problems.push_back("redirect url " + quote(p.redirect->url) + ": " + *why);
    }
    if (std::find(std::begin(kRedirectCodes), std::end(kRedirectCodes), p.redirect->code) ==
        std::end(kRedirectCodes)) {
      problems.push_back("redirect code " + std::to_string(p.redirect->code) +
                         " is not one of 301, 302, 303, 307, 308");
    }
  }
}

void rewrites_to_json(const RoutePolicy& p, json& j) {
  if (!p.rewrite_target.empty()) j["rewrite_target"] = p.rewrite_target;
  if (!p.app_root.empty()) j["app_root"] = p.app_root;
  if (p.redirect) j["redirect"] = json{{"url", p.redirect->url}, {"code", p.redirect->code}};
}

void rewrites_from_json(ObjectReader& r, RoutePolicy& p) {
  r.string("rewrite_target", p.rewrite_target);
  r.string("app_root", p.app_root);
  if (const json* v = r.find("redirect")) {
    Redirect redirect;
    ObjectReader rr(*v, "route policy redirect");
    rr.string("url", redirect.url);
    rr.integer("code", redirect.code, 999);
    rr.finish();
    p.redirect = std::move(redirect);
  }
}

}  // namespace tidegate::model
