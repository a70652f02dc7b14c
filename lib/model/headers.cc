#include "model/headers.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "model/object_reader.h"
#include "model/policy.h"
#include "model/syntax.h"
#include "text/text.h"

namespace tidegate::model {

using detail::is_alnum;
using detail::is_digit;
using detail::is_field_value;
using detail::ObjectReader;
using detail::quote;
using nlohmann::json;

namespace {

// Response fields the proxy itself manages; setting them would break framing or the connection.
bool is_reserved_response_header(std::string_view name) {
  static constexpr std::string_view kReserved[] = {
      "connection", "content-length", "keep-alive",        "proxy-connection",
      "te",         "trailer",        "transfer-encoding", "upgrade"};
  const std::string l = text::ascii_lower(std::string(name));
  return std::find(std::begin(kReserved), std::end(kReserved), l) != std::end(kReserved);
}

// "host" or "host:port"; host a DNS name, an IPv4 address or a bracketed IPv6 address.
bool is_host_port(std::string_view s) {
  if (s.empty()) return false;
  std::string_view host = s;
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    size_t close = s.find(']');
    if (close == std::string_view::npos) return false;
    if (!detail::ipv6_mapped(s.substr(1, close - 1))) return false;
    if (close + 1 == s.size()) return true;
    if (s[close + 1] != ':') return false;
    port = s.substr(close + 2);
    host = {};
  } else if (size_t colon = s.find(':'); colon != std::string_view::npos) {
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
    if (port.empty()) return false;
  }
  if (!port.empty() || (!s.empty() && s.front() == '[')) {
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), is_digit)) {
      return false;
    }
    unsigned long n = std::stoul(std::string(port));
    if (n == 0 || n > 65535) return false;
  }
  if (s.front() == '[') return true;
  if (host.empty() || host.size() > 253 || host.front() == '.' || host.back() == '.' ||
      host.front() == '-') {
    return false;
  }
  return std::all_of(host.begin(), host.end(),
                     [](char c) { return is_alnum(c) || c == '-' || c == '.' || c == '_'; });
}

}  // namespace

std::optional<std::string> check_response_header(std::string_view name, std::string_view value) {
  if (!is_token(name)) return "header name " + quote(name) + " is not a token";
  if (is_reserved_response_header(name)) {
    return "header " + std::string(name) + " is managed by the proxy and cannot be set";
  }
  if (!is_field_value(value)) {
    return "the value of " + std::string(name) + " holds a control character";
  }
  if (value.size() > 4096)
    return "the value of " + std::string(name) + " is longer than 4096 bytes";
  return std::nullopt;
}

std::optional<std::string> check_host_port(std::string_view text) {
  if (!is_host_port(text)) return "must be host or host:port";
  return std::nullopt;
}

std::optional<std::string> check_upgrade_protocol(std::string_view text) {
  auto slash = text.find('/');
  auto name = text.substr(0, slash);
  if (!is_token(name) || (slash != std::string_view::npos && !is_token(text.substr(slash + 1)))) {
    return "must be a protocol name, optionally with /version (tokens)";
  }
  for (char c : text) {
    if (c >= 'A' && c <= 'Z') return "must be lower case";
  }
  if (name == "h2c") return "h2c is never forwarded (it would tunnel past the route's policies)";
  if (name == "websocket") return "websocket upgrades are always forwarded";
  return std::nullopt;
}

namespace {

void validate_modifier(const HeaderModifier& m, const std::string& what,
                       std::vector<std::string>& problems) {
  for (const auto* list : {&m.set, &m.add}) {
    if (list->size() > kMaxModifiedHeaders) {
      problems.push_back(what + ": more than " + std::to_string(kMaxModifiedHeaders) + " fields");
    }
    std::set<std::string> names;
    for (const auto& h : *list) {
      if (auto why = check_response_header(h.name, h.value)) {
        problems.push_back(what + ": " + *why);
      } else if (!names.insert(text::ascii_lower(h.name)).second) {
        problems.push_back(what + ": " + h.name + " appears twice in one list");
      }
    }
  }
  if (m.remove.size() > kMaxModifiedHeaders) {
    problems.push_back(what + ": more than " + std::to_string(kMaxModifiedHeaders) + " removals");
  }
  std::set<std::string> names;
  for (const auto& name : m.remove) {
    if (auto why = check_response_header(name, "")) {
      problems.push_back(what + ": " + *why);
    } else if (!names.insert(text::ascii_lower(name)).second) {
      problems.push_back(what + ": " + name + " is removed twice");
    }
  }
}

json modifier_json(const HeaderModifier& m) {
  json j = json::object();
  for (const auto& [key, list] : {std::pair{"set", &m.set}, std::pair{"add", &m.add}}) {
    if (list->empty()) continue;
    json fields = json::array();
    for (const auto& h : *list) fields.push_back(json{{"name", h.name}, {"value", h.value}});
    j[key] = std::move(fields);
  }
  if (!m.remove.empty()) j["remove"] = m.remove;
  return j;
}

HeaderModifier modifier_from(const json& j, const std::string& what) {
  HeaderModifier m;
  ObjectReader r(j, what);
  for (const auto& [key, list] : {std::pair{"set", &m.set}, std::pair{"add", &m.add}}) {
    if (const json* v = r.find(key)) {
      if (!v->is_array()) r.fail(key, "must be an array");
      for (const auto& item : *v) {
        Header h;
        ObjectReader hr(item, what + " field");
        hr.string("name", h.name);
        hr.string("value", h.value);
        hr.finish();
        list->push_back(std::move(h));
      }
    }
  }
  r.strings("remove", m.remove);
  r.finish();
  return m;
}

}  // namespace

void validate_headers(const RoutePolicy& p, std::vector<std::string>& problems) {
  if (p.request_header_modifier) {
    validate_modifier(*p.request_header_modifier, "request_header_modifier", problems);
  }
  if (p.response_header_modifier) {
    validate_modifier(*p.response_header_modifier, "response_header_modifier", problems);
  }
  if (p.response_headers.size() > kMaxResponseHeaders) {
    problems.push_back("more than " + std::to_string(kMaxResponseHeaders) + " response headers");
  }
  std::set<std::string> names;
  for (const auto& h : p.response_headers) {
    if (auto why = check_response_header(h.name, h.value)) {
      problems.push_back("response header: " + *why);
    } else if (!names.insert(text::ascii_lower(h.name)).second) {
      problems.push_back("response header " + h.name + " is set twice");
    }
  }
  if (!p.forwarded_prefix.empty()) {
    if (auto why = check_path(p.forwarded_prefix)) {
      problems.push_back("forwarded_prefix " + quote(p.forwarded_prefix) + ": " + *why);
    }
  }
  if (!p.upstream_vhost.empty()) {
    if (auto why = check_host_port(p.upstream_vhost)) {
      problems.push_back("upstream_vhost " + quote(p.upstream_vhost) + ": " + *why);
    }
  }
  for (const auto& u : p.upgrade_protocols) {
    if (auto why = check_upgrade_protocol(u)) {
      problems.push_back("upgrade protocol " + quote(u) + ": " + *why);
    }
  }
}

void headers_to_json(const RoutePolicy& p, json& j) {
  if (!p.response_headers.empty()) {
    json headers = json::array();
    for (const auto& h : p.response_headers) {
      headers.push_back(json{{"name", h.name}, {"value", h.value}});
    }
    j["response_headers"] = std::move(headers);
  }
  if (!p.upstream_vhost.empty()) j["upstream_vhost"] = p.upstream_vhost;
  if (!p.forwarded_prefix.empty()) j["forwarded_prefix"] = p.forwarded_prefix;
  if (!p.access_log) j["access_log"] = false;
  if (!p.upgrade_protocols.empty()) j["upgrade_protocols"] = p.upgrade_protocols;
  if (p.request_header_modifier) {
    j["request_header_modifier"] = modifier_json(*p.request_header_modifier);
  }
  if (p.response_header_modifier) {
    j["response_header_modifier"] = modifier_json(*p.response_header_modifier);
  }
}

void headers_from_json(ObjectReader& r, RoutePolicy& p) {
  if (const json* v = r.find("response_headers")) {
    if (!v->is_array()) r.fail("response_headers", "must be an array");
    for (const auto& item : *v) {
      Header h;
      ObjectReader hr(item, "route policy response header");
      hr.string("name", h.name);
      hr.string("value", h.value);
      hr.finish();
      p.response_headers.push_back(std::move(h));
    }
  }
  r.string("upstream_vhost", p.upstream_vhost);
  r.string("forwarded_prefix", p.forwarded_prefix);
  r.boolean("access_log", p.access_log);
  r.strings("upgrade_protocols", p.upgrade_protocols);
  if (const json* v = r.find("request_header_modifier")) {
    p.request_header_modifier = modifier_from(*v, "route policy request_header_modifier");
  }
  if (const json* v = r.find("response_header_modifier")) {
    p.response_header_modifier = modifier_from(*v, "route policy response_header_modifier");
  }
}

}  // namespace tidegate::model
