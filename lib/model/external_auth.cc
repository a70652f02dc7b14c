#include "model/external_auth.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "model/syntax.h"

namespace tidegate::model {

using detail::is_visible;
using nlohmann::json;

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::optional<TemplateVariable> variable_named(std::string_view name, std::string* arg) {
  struct Named {
    std::string_view name;
    TemplateVariable variable;
  };
  static constexpr Named kNames[] = {
      {"scheme", TemplateVariable::kScheme},
      {"pass_access_scheme", TemplateVariable::kScheme},
      {"host", TemplateVariable::kHost},
      {"http_host", TemplateVariable::kHttpHost},
      {"best_http_host", TemplateVariable::kHttpHost},
      {"request_uri", TemplateVariable::kRequestUri},
      {"escaped_request_uri", TemplateVariable::kEscapedRequestUri},
      {"uri", TemplateVariable::kUri},
      {"args", TemplateVariable::kArgs},
      {"query_string", TemplateVariable::kArgs},
      {"request_method", TemplateVariable::kRequestMethod},
      {"remote_addr", TemplateVariable::kRemoteAddr},
  };
  for (const auto& n : kNames) {
    if (n.name == name) return n.variable;
  }
  struct Prefixed {
    std::string_view prefix;
    TemplateVariable variable;
  };
  static constexpr Prefixed kPrefixes[] = {{"http_", TemplateVariable::kHeader},
                                           {"cookie_", TemplateVariable::kCookie},
                                           {"arg_", TemplateVariable::kArg}};
  for (const auto& p : kPrefixes) {
    if (name.starts_with(p.prefix) && name.size() > p.prefix.size()) {
      *arg = std::string(name.substr(p.prefix.size()));
      if (p.variable == TemplateVariable::kHeader) {
        std::replace(arg->begin(), arg->end(), '_', '-');
        std::transform(arg->begin(), arg->end(), arg->begin(),
                       [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; });
      }
      return p.variable;
    }
  }
  return std::nullopt;
}

// nginx's time syntax as auth-cache-duration uses it: a number with s, m, h or d (bare: s).
std::optional<uint32_t> parse_seconds(std::string_view s) {
  uint64_t unit = 1;
  if (!s.empty() && std::string_view("smhd").find(s.back()) != std::string_view::npos) {
    unit = s.back() == 's' ? 1 : s.back() == 'm' ? 60 : s.back() == 'h' ? 3600 : 86400;
    s.remove_suffix(1);
  }
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  if (n > ExternalAuth::kMaxCacheSeconds || n * unit > ExternalAuth::kMaxCacheSeconds) {
    return std::nullopt;
  }
  return static_cast<uint32_t>(n * unit);
}

}  // namespace

std::optional<std::string> parse_template(std::string_view text, std::vector<TemplatePart>* out) {
  out->clear();
  auto literal = [&](std::string_view s) {
    if (s.empty()) return;
    if (!out->empty() && out->back().variable == TemplateVariable::kLiteral) {
      out->back().text += s;
    } else {
      out->push_back({TemplateVariable::kLiteral, std::string(s)});
    }
  };
  size_t i = 0;
  while (i < text.size()) {
    size_t dollar = text.find('$', i);
    if (dollar == std::string_view::npos) {
      literal(text.substr(i));
      break;
    }
    literal(text.substr(i, dollar - i));
    size_t start = dollar + 1;
    size_t end = start;
    std::string_view name;
    if (start < text.size() && text[start] == '{') {
      end = text.find('}', start);
      if (end == std::string_view::npos)
        return "has an unclosed ${ at byte " + std::to_string(dollar);
      name = text.substr(start + 1, end - start - 1);
      if (name.empty() || !std::all_of(name.begin(), name.end(), is_name_char)) {
        return "has an invalid variable name at byte " + std::to_string(dollar);
      }
      ++end;
    } else {
      while (end < text.size() && is_name_char(text[end])) ++end;
      name = text.substr(start, end - start);
      if (name.empty())
        return "has a '$' without a variable name at byte " + std::to_string(dollar);
    }
    std::string arg;
    auto variable = variable_named(name, &arg);
    if (!variable) return "uses the unknown variable $" + std::string(name);
    out->push_back({*variable, std::move(arg)});
    i = end;
  }
  return std::nullopt;
}

std::string AuthUrl::authority() const {
  return explicit_port ? host + ":" + std::to_string(port) : host;
}

std::optional<AuthUrl> parse_auth_url(std::string_view url, std::string* error) {
  AuthUrl out;
  if (url.size() > 2048) {
    *error = "is longer than 2048 bytes";
    return std::nullopt;
  }
  if (!is_visible(url)) {
    *error = "must be printable ASCII without spaces";
    return std::nullopt;
  }
  std::string lower(url.substr(0, std::min<size_t>(url.size(), 8)));
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; });
  if (lower.starts_with("https://")) {
    out.https = true;
    url.remove_prefix(8);
  } else if (lower.starts_with("http://")) {
    url.remove_prefix(7);
  } else {
    *error = "must start with http:// or https://";
    return std::nullopt;
  }
  const size_t path_start = std::min(url.find('/'), url.find('?'));
  std::string_view authority = url.substr(0, path_start);
  std::string_view rest = path_start == std::string_view::npos ? "" : url.substr(path_start);
  if (authority.find('@') != std::string_view::npos) {
    *error = "must not carry user information";
    return std::nullopt;
  }
  if (rest.find('#') != std::string_view::npos) {
    *error = "must not have a fragment";
    return std::nullopt;
  }
  std::string_view host = authority;
  if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    std::string_view port = authority.substr(colon + 1);
    unsigned n = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || n == 0 ||
        n > 65535) {
      *error = "has an invalid port";
      return std::nullopt;
    }
    out.port = static_cast<uint16_t>(n);
    out.explicit_port = true;
  } else {
    out.port = out.https ? 443 : 80;
  }
  if (host.empty() || host.find('$') != std::string_view::npos ||
      !std::all_of(host.begin(), host.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '.';
      })) {
    *error = "must have a host name (letters, digits, '-' and '.'; no variables)";
    return std::nullopt;
  }
  out.host = std::string(host);
  std::transform(out.host.begin(), out.host.end(), out.host.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; });
  out.target = rest.empty()          ? "/"
               : rest.front() == '?' ? "/" + std::string(rest)
                                     : std::string(rest);
  std::vector<TemplatePart> parts;
  if (auto why = parse_template(out.target, &parts)) {
    *error = "path " + *why;
    return std::nullopt;
  }
  return out;
}

std::optional<std::string> service_of_auth_host(std::string_view host,
                                                std::string_view ingress_namespace) {
  std::vector<std::string_view> labels;
  size_t start = 0;
  while (true) {
    size_t dot = host.find('.', start);
    labels.push_back(host.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  auto label_ok = [](std::string_view l) {
    return !l.empty() && l.size() <= 63 && l.front() != '-' && l.back() != '-' &&
           std::all_of(l.begin(), l.end(), [](char c) {
             return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
           });
  };
  if (!label_ok(labels[0]) || (labels[0][0] >= '0' && labels[0][0] <= '9')) return std::nullopt;
  if (labels.size() == 1) return std::string(ingress_namespace) + "/" + std::string(labels[0]);
  if (!label_ok(labels[1])) return std::nullopt;
  if (labels.size() == 2 || (labels.size() >= 3 && labels[2] == "svc" &&
                             std::all_of(labels.begin() + 3, labels.end(), label_ok))) {
    return std::string(labels[1]) + "/" + std::string(labels[0]);
  }
  return std::nullopt;
}

std::vector<AuthCacheRule> default_auth_cache_rules() { return {{{200, 202, 401}, 300}}; }

std::optional<std::vector<AuthCacheRule>> parse_auth_cache_duration(std::string_view text,
                                                                    std::string* error) {
  std::vector<AuthCacheRule> rules;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view item =
        text.substr(start, comma == std::string_view::npos ? comma : comma - start);
    std::vector<std::string_view> words;
    size_t i = 0;
    while (i < item.size()) {
      while (i < item.size() && (item[i] == ' ' || item[i] == '\t')) ++i;
      size_t j = i;
      while (j < item.size() && item[j] != ' ' && item[j] != '\t') ++j;
      if (j > i) words.push_back(item.substr(i, j - i));
      i = j;
    }
    if (words.empty()) {
      *error = "has an empty entry";
      return std::nullopt;
    }
    AuthCacheRule rule;
    auto seconds = parse_seconds(words.back());
    if (!seconds) {
      *error = "entry \"" + std::string(item) + "\" does not end with a time (such as 5m, 30s, 1h)";
      return std::nullopt;
    }
    rule.seconds = *seconds;
    for (size_t w = 0; w + 1 < words.size(); ++w) {
      if (words[w] == "any") {
        rule.statuses.clear();
        continue;
      }
      unsigned code = 0;
      auto [end, ec] = std::from_chars(words[w].data(), words[w].data() + words[w].size(), code);
      if (ec != std::errc() || end != words[w].data() + words[w].size() || code < 200 ||
          code > 599) {
        *error = "has \"" + std::string(words[w]) + "\", not a status code 200-599 or any";
        return std::nullopt;
      }
      rule.statuses.push_back(static_cast<uint16_t>(code));
    }
    if (words.size() > 1 && std::find(words.begin(), words.end() - 1, "any") != words.end() - 1) {
      rule.statuses.clear();
    }
    rules.push_back(std::move(rule));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return rules;
}

std::vector<std::string> validate(const ExternalAuth& a) {
  std::vector<std::string> problems;
  std::string error;
  // An empty url is the form that fails closed (the annotation could not be used).
  if (a.url.empty() && !a.upstream.empty()) problems.push_back("external_auth has no url");
  if (!a.url.empty() && !parse_auth_url(a.url, &error)) {
    problems.push_back("external_auth url " + error);
  }
  static constexpr std::string_view kMethods[] = {"GET",    "HEAD",    "POST",    "PUT",  "PATCH",
                                                  "DELETE", "OPTIONS", "CONNECT", "TRACE"};
  if (!a.method.empty() &&
      std::find(std::begin(kMethods), std::end(kMethods), a.method) == std::end(kMethods)) {
    problems.push_back("external_auth method \"" + a.method + "\" is not an HTTP method");
  }
  std::vector<TemplatePart> parts;
  for (const std::string* t : {&a.signin, &a.request_redirect, &a.cache_key}) {
    if (t->size() > 2048) problems.push_back("external_auth template longer than 2048 bytes");
    if (!is_visible(*t)) problems.push_back("external_auth templates must be printable ASCII");
    if (auto why = parse_template(*t, &parts)) problems.push_back("external_auth template " + *why);
  }
  if (!a.signin_redirect_param.empty() && !is_token(a.signin_redirect_param)) {
    problems.push_back("external_auth signin_redirect_param must be a token");
  }
  if (a.response_headers.size() > ExternalAuth::kMaxResponseHeaders) {
    problems.push_back("external_auth has too many response_headers");
  }
  std::set<std::string_view> seen;
  for (const auto& h : a.response_headers) {
    if (!is_token(h) ||
        std::any_of(h.begin(), h.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
      problems.push_back("external_auth response header \"" + h + "\" must be a lower-case token");
    } else if (!seen.insert(h).second) {
      problems.push_back("external_auth response header \"" + h + "\" appears twice");
    }
  }
  for (const auto& r : a.cache_rules) {
    if (r.seconds > ExternalAuth::kMaxCacheSeconds) {
      problems.push_back("external_auth cache duration is too long");
    }
    for (uint16_t s : r.statuses) {
      if (s < 200 || s > 599) problems.push_back("external_auth cache status is not 200-599");
    }
  }
  return problems;
}

json to_json(const ExternalAuth& a) {
  json j = json::object();
  j["url"] = a.url;
  if (!a.upstream.empty()) j["upstream"] = a.upstream;
  if (!a.method.empty()) j["method"] = a.method;
  if (!a.signin.empty()) j["signin"] = a.signin;
  if (!a.signin_redirect_param.empty()) j["signin_redirect_param"] = a.signin_redirect_param;
  if (!a.response_headers.empty()) j["response_headers"] = a.response_headers;
  if (!a.request_redirect.empty()) j["request_redirect"] = a.request_redirect;
  if (!a.cache_key.empty()) j["cache_key"] = a.cache_key;
  if (!a.cache_rules.empty()) {
    json rules = json::array();
    for (const auto& r : a.cache_rules) {
      rules.push_back(json{{"statuses", r.statuses}, {"seconds", r.seconds}});
    }
    j["cache_rules"] = std::move(rules);
  }
  if (a.always_set_cookie) j["always_set_cookie"] = true;
  return j;
}

ExternalAuth external_auth_from_json(const json& j) {
  if (!j.is_object()) throw std::runtime_error("route policy external_auth must be an object");
  ExternalAuth a;
  auto string_field = [](const json& v, const std::string& key) {
    if (!v.is_string()) throw std::runtime_error("external_auth \"" + key + "\" must be a string");
    return v.get<std::string>();
  };
  for (const auto& [key, v] : j.items()) {
    if (key == "url") {
      a.url = string_field(v, key);
    } else if (key == "upstream") {
      a.upstream = string_field(v, key);
    } else if (key == "method") {
      a.method = string_field(v, key);
    } else if (key == "signin") {
      a.signin = string_field(v, key);
    } else if (key == "signin_redirect_param") {
      a.signin_redirect_param = string_field(v, key);
    } else if (key == "request_redirect") {
      a.request_redirect = string_field(v, key);
    } else if (key == "cache_key") {
      a.cache_key = string_field(v, key);
    } else if (key == "response_headers") {
      if (!v.is_array())
        throw std::runtime_error("external_auth \"response_headers\" must be an array");
      for (const auto& h : v) a.response_headers.push_back(string_field(h, key));
    } else if (key == "cache_rules") {
      if (!v.is_array()) throw std::runtime_error("external_auth \"cache_rules\" must be an array");
      for (const auto& r : v) {
        if (!r.is_object() || !r.contains("statuses") || !r.contains("seconds") ||
            !r["statuses"].is_array() || !r["seconds"].is_number_unsigned()) {
          throw std::runtime_error("external_auth cache_rules must be {statuses, seconds}");
        }
        AuthCacheRule rule;
        for (const auto& s : r["statuses"]) {
          if (!s.is_number_unsigned() || s.get<uint64_t>() > 999) {
            throw std::runtime_error("external_auth cache statuses must be status codes");
          }
          rule.statuses.push_back(s.get<uint16_t>());
        }
        if (r["seconds"].get<uint64_t>() > ExternalAuth::kMaxCacheSeconds) {
          throw std::runtime_error("external_auth cache seconds is too large");
        }
        rule.seconds = r["seconds"].get<uint32_t>();
        a.cache_rules.push_back(std::move(rule));
      }
    } else if (key == "always_set_cookie") {
      if (!v.is_boolean())
        throw std::runtime_error("external_auth \"always_set_cookie\" must be a boolean");
      a.always_set_cookie = v.get<bool>();
    } else {
      throw std::runtime_error("external_auth: unknown field \"" + key + "\"");
    }
  }
  return a;
}

}  // namespace tidegate::model
