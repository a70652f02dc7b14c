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

std::optional<std::string> check_path_modifier(const PathModifier& m) {
  if (m.value.empty() || m.value.front() != '/') return "must start with '/'";
  if (m.value.size() > 1024) return "longer than 1024 bytes";
  if (!is_visible(m.value) || m.value.find_first_of("?#") != std::string::npos) {
    return "may hold only printable characters without spaces, '?' or '#'";
  }
  return std::nullopt;
}

namespace {

const char* to_string(PathModifier::Kind k) {
  return k == PathModifier::Kind::kPrefix ? "ReplacePrefixMatch" : "ReplaceFullPath";
}

json path_modifier_json(const PathModifier& m) {
  return json{{"kind", to_string(m.kind)}, {"value", m.value}};
}

PathModifier path_modifier_from(const json& j, const char* what) {
  PathModifier m;
  ObjectReader r(j, what);
  std::string kind;
  r.string("kind", kind);
  if (kind == "ReplacePrefixMatch") {
    m.kind = PathModifier::Kind::kPrefix;
  } else if (kind != "ReplaceFullPath") {
    r.fail("kind", "must be ReplaceFullPath or ReplacePrefixMatch");
  }
  r.string("value", m.value);
  r.finish();
  return m;
}

bool is_dns_name(std::string_view s) {
  if (s.empty() || s.size() > 253 || s.front() == '.' || s.back() == '.' || s.front() == '-') {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || detail::is_digit(c) || c == '-' || c == '.';
  });
}

}  // namespace

void validate_rewrites(const RoutePolicy& p, std::vector<std::string>& problems) {
  if (p.request_redirect) {
    const RequestRedirect& r = *p.request_redirect;
    if (!r.scheme.empty() && r.scheme != "http" && r.scheme != "https") {
      problems.push_back("request_redirect scheme " + quote(r.scheme) + " is not http or https");
    }
    if (!r.hostname.empty() && !is_dns_name(r.hostname)) {
      problems.push_back("request_redirect hostname " + quote(r.hostname) +
                         " is not a lower-case DNS name");
    }
    if (r.path) {
      if (auto why = check_path_modifier(*r.path)) {
        problems.push_back("request_redirect path " + quote(r.path->value) + ": " + *why);
      }
    }
    if (std::find(std::begin(kRedirectCodes), std::end(kRedirectCodes), r.code) ==
        std::end(kRedirectCodes)) {
      problems.push_back("request_redirect code " + std::to_string(r.code) +
                         " is not one of 301, 302, 303, 307, 308");
    }
    if (p.redirect) problems.push_back("a route has redirect or request_redirect, not both");
  }
  if (p.path_rewrite) {
    if (auto why = check_path_modifier(*p.path_rewrite)) {
      problems.push_back("path_rewrite " + quote(p.path_rewrite->value) + ": " + *why);
    }
    if (!p.rewrite_target.empty()) {
      problems.push_back("a route has rewrite_target or path_rewrite, not both");
    }
  }
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
  if (p.request_redirect) {
    const RequestRedirect& r = *p.request_redirect;
    json o{{"code", r.code}};
    if (!r.scheme.empty()) o["scheme"] = r.scheme;
    if (!r.hostname.empty()) o["hostname"] = r.hostname;
    if (r.path) o["path"] = path_modifier_json(*r.path);
    if (r.port != 0) o["port"] = r.port;
    j["request_redirect"] = std::move(o);
  }
  if (p.path_rewrite) j["path_rewrite"] = path_modifier_json(*p.path_rewrite);
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
  if (const json* v = r.find("request_redirect")) {
    RequestRedirect redirect;
    ObjectReader rr(*v, "route policy request_redirect");
    rr.string("scheme", redirect.scheme);
    rr.string("hostname", redirect.hostname);
    if (const json* path = rr.find("path")) {
      redirect.path = path_modifier_from(*path, "route policy request_redirect path");
    }
    rr.integer("port", redirect.port, 65535);
    rr.integer("code", redirect.code, 999);
    rr.finish();
    p.request_redirect = std::move(redirect);
  }
  if (const json* v = r.find("path_rewrite")) {
    p.path_rewrite = path_modifier_from(*v, "route policy path_rewrite");
  }
}

}  // namespace tidegate::model
