#include "model/model.h"

#include <algorithm>
#include <set>

#include <re2/re2.h>

namespace tidegate::model {

const char* to_string(PathMatch m) {
  switch (m) {
    case PathMatch::kExact:
      return "Exact";
    case PathMatch::kPrefix:
      return "Prefix";
    case PathMatch::kRegex:
      return "Regex";
  }
  return "?";
}

std::optional<PathMatch> path_match_from_string(const std::string& s) {
  if (s == "Exact") return PathMatch::kExact;
  if (s == "Prefix") return PathMatch::kPrefix;
  if (s == "Regex") return PathMatch::kRegex;
  return std::nullopt;
}

namespace {

// A Prefix path's trailing slashes do not count: "/foo/" is the same prefix as "/foo" (Ingress
// v1), so Exact "/foo" must win against it like against Prefix "/foo".
size_t effective_length(const Route& r) {
  if (r.precedence_length != 0) return r.precedence_length;
  size_t n = r.path.size();
  if (r.match == PathMatch::kPrefix) {
    while (n > 0 && r.path[n - 1] == '/') --n;
  }
  return n;
}

}  // namespace

bool route_precedes(const Route& a, const Route& b) {
  size_t la = effective_length(a), lb = effective_length(b);
  if (la != lb) return la > lb;
  if (a.match != b.match) return static_cast<int>(a.match) < static_cast<int>(b.match);
  // The same prefix written with or without a trailing slash ("/foo/", "/foo") is one path:
  // the conditions decide before the text (which only keeps the order deterministic).
  if (a.method.empty() != b.method.empty()) return !a.method.empty();
  if (a.headers.size() != b.headers.size()) return a.headers.size() > b.headers.size();
  if (a.query.size() != b.query.size()) return a.query.size() > b.query.size();
  return a.path < b.path;
}

void sort_routes(std::vector<Route>& routes) {
  // Most hosts have one route, or routes already in order: std::stable_sort would still move
  // them through a temporary buffer of Routes (4% of a first translation at 10,000 hosts).
  if (std::is_sorted(routes.begin(), routes.end(), route_precedes)) return;
  std::stable_sort(routes.begin(), routes.end(), route_precedes);
}

namespace {

bool is_dns_label(std::string_view label) {
  if (label.empty() || label.size() > 63) return false;
  if (label.front() == '-' || label.back() == '-') return false;
  return std::all_of(label.begin(), label.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

}  // namespace

bool is_valid_listener_name(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_alnum(name.front())) return false;
  for (char c : name) {
    if (!lower_alnum(c) && c != '.' && c != '/' && c != ':' && c != '_' && c != '-') return false;
  }
  return true;
}

std::string host_key(std::string_view listener, std::string_view host) {
  if (listener.empty()) return std::string(host);
  std::string key;
  key.reserve(listener.size() + 1 + host.size());
  key.append(listener).append(1, ' ').append(host);
  return key;
}

// Also "**.suffix": a wildcard of the Gateway API, which stands for one or more labels
// ("**.example.com" takes "a.example.com" and "a.b.example.com"), where an Ingress's "*.suffix"
// stands for exactly one (dataplane/router/router.h).
bool is_valid_host(const std::string& host) {
  if (host == "*") return true;
  std::string_view rest = host;
  if (rest.starts_with("**.")) {
    rest.remove_prefix(3);
  } else if (rest.starts_with("*.")) {
    rest.remove_prefix(2);
  }
  if (rest.empty() || rest.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = rest.find('.', start);
    std::string_view label =
        rest.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (!is_dns_label(label)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

namespace {

bool is_token_char(char c) {
  // RFC 9110 tchar, lower case only (types are compared case-insensitively, stored lower-case),
  // and without '*': "text/*" would read as a wildcard, which the data plane does not implement.
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'+-.^_`|~").find(c) != std::string_view::npos;
}

void fnv1a(uint64_t& h, std::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
}

// Length-prefixed, so that ("ab", "c") and ("a", "bc") hash differently.
void fnv1a_field(uint64_t& h, std::string_view field) {
  const std::string length = std::to_string(field.size()) + ":";
  fnv1a(h, length);
  fnv1a(h, field);
}

}  // namespace

bool is_valid_mime_type(std::string_view type) {
  const size_t slash = type.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == type.size()) return false;
  if (type.size() > 255) return false;
  std::string_view main = type.substr(0, slash);
  std::string_view sub = type.substr(slash + 1);
  return std::all_of(main.begin(), main.end(), is_token_char) &&
         std::all_of(sub.begin(), sub.end(), is_token_char);
}

uint64_t Substitution::rules_version() const {
  uint64_t h = 14695981039346656037ull;
  for (const auto& rule : rules) {
    fnv1a_field(h, rule.match);
    fnv1a_field(h, rule.replace);
    fnv1a_field(h, rule.flags);
  }
  return h;
}

namespace {

void validate_substitution(const Substitution& s, std::vector<std::string>& errors) {
  const std::string where = "substitution " + s.name;
  if (s.rules.empty()) errors.push_back(where + ": no rules");
  if (s.rules.size() > substitution::kMaxRules) {
    errors.push_back(where + ": more than " + std::to_string(substitution::kMaxRules) + " rules");
  }
  for (size_t i = 0; i < s.rules.size() && i < substitution::kMaxRules; ++i) {
    if (auto reason = substitution::validate_rule(s.rules[i])) {
      errors.push_back(where + ": " + substitution::describe_rule(i, s.rules[i]) + ": " + *reason);
    }
  }
  if (s.mime_types.empty()) errors.push_back(where + ": no MIME types");
  for (const auto& type : s.mime_types) {
    if (!is_valid_mime_type(type)) errors.push_back(where + ": invalid MIME type \"" + type + "\"");
  }
  if (!std::is_sorted(s.mime_types.begin(), s.mime_types.end()) ||
      std::adjacent_find(s.mime_types.begin(), s.mime_types.end()) != s.mime_types.end()) {
    errors.push_back(where + ": MIME types not sorted and unique");
  }
  if (s.max_buffer < kMinSubstitutionMaxBuffer || s.max_buffer > kMaxSubstitutionMaxBuffer) {
    errors.push_back(where + ": max_buffer " + std::to_string(s.max_buffer) + " out of range [" +
                     std::to_string(kMinSubstitutionMaxBuffer) + ", " +
                     std::to_string(kMaxSubstitutionMaxBuffer) + "]");
  }
}

// `host`: the route's virtual host, or null for the default route. The messages' context is
// written only for an error: a valid configuration of 10,000 hosts is validated on the data
// plane's way to serving them (docs/benchmarks.md, "Start-up at scale").
void validate_route(const Config& config, const Route& r, const VirtualHost* host,
                    std::vector<std::string>& errors) {
  const auto where = [&] { return host != nullptr ? "host " + host->host : "default route"; };
  if (r.match != PathMatch::kRegex && (r.path.empty() || r.path.front() != '/')) {
    errors.push_back(where() + ": path \"" + r.path + "\" does not start with '/'");
  }
  if (r.match == PathMatch::kRegex) {
    RE2::Options opts;
    opts.set_log_errors(false);
    RE2 re(r.path, opts);
    if (!re.ok()) errors.push_back(where() + ": invalid regex \"" + r.path + "\": " + re.error());
  }
  if (!r.upstream.empty() && !config.upstreams.contains(r.upstream)) {
    errors.push_back(where() + ": unknown upstream \"" + r.upstream + "\"");
  }
  // Each check of validate_conditions is about one of these: a route without them has nothing
  // to report there.
  if (!r.method.empty() || !r.headers.empty() || !r.query.empty() || !r.backends.empty()) {
    validate_conditions(r, where() + " path \"" + r.path + "\"", errors);
  }
  for (const auto& b : r.backends) {
    if (!b.upstream.empty() && !config.upstreams.contains(b.upstream)) {
      errors.push_back(where() + " path \"" + r.path + "\": unknown backend upstream \"" +
                       b.upstream + "\"");
    }
  }
  if (!r.fallback_upstream.empty() && !config.upstreams.contains(r.fallback_upstream)) {
    errors.push_back(where() + ": unknown fallback upstream \"" + r.fallback_upstream + "\"");
  }
  for (const auto& m : r.policy->mirrors) {
    if (!m.upstream.empty() && !config.upstreams.contains(m.upstream)) {
      errors.push_back(where() + " path \"" + r.path + "\": unknown mirror upstream \"" +
                       m.upstream + "\"");
    }
  }
  if (!r.substitution.empty() && !config.substitutions.contains(r.substitution)) {
    errors.push_back(where() + ": unknown substitution \"" + r.substitution + "\"");
  }
  for (const auto& problem : validate(*r.policy)) {
    errors.push_back(where() + " path \"" + r.path + "\": policy: " + problem);
  }
  if (r.canary) {
    for (const auto& problem : validate(*r.canary)) {
      errors.push_back(where() + " path \"" + r.path + "\": " + problem);
    }
    if (!r.canary->upstream.empty()) {
      if (!config.upstreams.contains(r.canary->upstream)) {
        errors.push_back(where() + " path \"" + r.path + "\": canary: unknown upstream \"" +
                         r.canary->upstream + "\"");
      } else if (r.canary->upstream == r.upstream) {
        errors.push_back(where() + " path \"" + r.path + "\": canary upstream is the route's own");
      }
    }
  }
}

}  // namespace

std::vector<std::string> validate(const Config& config) {
  std::vector<std::string> errors;
  for (const auto& [key, l] : config.listeners) {
    if (key != l.name) errors.push_back("listener key \"" + key + "\" != name \"" + l.name + "\"");
    if (!is_valid_listener_name(l.name))
      errors.push_back("invalid listener name \"" + l.name + "\"");
    if (l.port == 0) errors.push_back("listener " + l.name + ": port 0");
  }
  if (config.listeners.size() > kMaxListeners) {
    errors.push_back("more than " + std::to_string(kMaxListeners) + " listeners");
  }
  {
    std::map<uint16_t, std::string> ports;
    for (const auto& [name, l] : config.listeners) {
      if (auto [it, fresh] = ports.emplace(l.port, name); !fresh) {
        errors.push_back("listeners " + it->second + " and " + name + " share port " +
                         std::to_string(l.port));
      }
    }
  }
  for (const auto& [key, vh] : config.virtual_hosts) {
    if (key != host_key(vh))
      errors.push_back("virtual host key \"" + key + "\" != host \"" + host_key(vh) + "\"");
    if (!vh.listener.empty() && !config.listeners.contains(vh.listener))
      errors.push_back("host " + vh.host + ": unknown listener \"" + vh.listener + "\"");
    if (!is_valid_host(vh.host)) errors.push_back("invalid host \"" + vh.host + "\"");
    if (!vh.redirect_to.empty()) {
      if (vh.redirect_to == "*" || vh.redirect_to.front() == '*' || !is_valid_host(vh.redirect_to))
        errors.push_back("host " + vh.host + ": invalid redirect host \"" + vh.redirect_to + "\"");
      if (!vh.routes.empty())
        errors.push_back("host " + vh.host + ": a redirecting host has no routes");
    }

    for (const auto& r : vh.routes) validate_route(config, r, &vh, errors);
  }
  if (config.default_route) validate_route(config, *config.default_route, nullptr, errors);
  for (const auto& [key, cert] : config.certificates) {
    if (key != cert.name)
      errors.push_back("certificate key \"" + key + "\" != name \"" + cert.name + "\"");
    if (cert.cert_pem.empty() || cert.key_pem.empty()) {
      errors.push_back("certificate " + cert.name + ": empty certificate or key");
    }
  }
  for (const auto& [key, th] : config.tls_hosts) {
    if (key != host_key(th))
      errors.push_back("TLS host key \"" + key + "\" != host \"" + host_key(th) + "\"");
    if (!th.listener.empty()) {
      auto l = config.listeners.find(th.listener);
      if (l == config.listeners.end() || !l->second.tls) {
        errors.push_back("TLS host " + th.host + ": unknown TLS listener \"" + th.listener + "\"");
      }
      if (!th.passthrough_upstream.empty() || th.client_auth) {
        errors.push_back("TLS host " + th.host +
                         ": a listener's host has no passthrough and no client certificates");
      }
    }
    if (!is_valid_host(th.host)) errors.push_back("invalid TLS host \"" + th.host + "\"");
    // "*": the certificate of every name without an entry of its own (a Gateway's HTTPS
    // listener without a hostname), in place of the data plane's default.
    if (th.host == "*" &&
        (th.certificate.empty() || !th.passthrough_upstream.empty() || th.client_auth)) {
      errors.push_back("TLS host *: only a certificate (no passthrough, no client certificates)");
    }
    if (!th.passthrough_upstream.empty()) {
      if (!th.certificate.empty() || th.client_auth) {
        errors.push_back("TLS host " + th.host +
                         ": a passthrough host has no certificate and no client certificates");
      }
      if (!config.upstreams.contains(th.passthrough_upstream)) {
        errors.push_back("TLS host " + th.host + ": unknown passthrough upstream \"" +
                         th.passthrough_upstream + "\"");
      }
      if (!th.host.empty() && th.host.front() == '*') {
        errors.push_back("TLS host " + th.host + ": a passthrough host is an exact name");
      }
      continue;
    }
    // An empty certificate is the default one (a name with client certificates, or one that
    // must not fall to a wildcard's entry).
    if (!th.certificate.empty() && !config.certificates.contains(th.certificate)) {
      errors.push_back("TLS host " + th.host + ": unknown certificate \"" + th.certificate + "\"");
    }
    if (th.client_auth) {
      for (auto& problem : validate(*th.client_auth)) {
        errors.push_back("TLS host " + th.host + ": " + std::move(problem));
      }
    }
  }
  for (const auto& [key, sub] : config.substitutions) {
    if (key != sub.name)
      errors.push_back("substitution key \"" + key + "\" != name \"" + sub.name + "\"");
    validate_substitution(sub, errors);
  }
  for (const auto& [key, up] : config.upstreams) {
    if (key != up.name)
      errors.push_back("upstream key \"" + key + "\" != name \"" + up.name + "\"");
    // Each endpoint equal to an earlier one is a duplicate; a few are compared in place (no set
    // nodes to allocate for the usual upstream of one to a few pods).
    constexpr size_t kCompareInPlace = 16;
    std::set<Endpoint> seen;
    const auto& eps = up.endpoints;
    for (size_t i = 0; i < eps.size(); ++i) {
      const Endpoint& ep = eps[i];
      if (ep.port == 0)
        errors.push_back("upstream " + up.name + ": endpoint " + ep.address + " has port 0");
      if (ep.address.empty())
        errors.push_back("upstream " + up.name + ": endpoint with empty address");
      const bool duplicate =
          eps.size() <= kCompareInPlace
              ? std::find(eps.begin(), eps.begin() + static_cast<std::ptrdiff_t>(i), ep) !=
                    eps.begin() + static_cast<std::ptrdiff_t>(i)
              : !seen.insert(ep).second;
      if (duplicate) {
        errors.push_back("upstream " + up.name + ": duplicate endpoint " + ep.address + ":" +
                         std::to_string(ep.port));
      }
    }
    if (!up.tls.enabled && (!up.tls.server_name.empty() || !up.tls.ca_pem.empty()))
      errors.push_back("upstream " + up.name + ": TLS settings without TLS");
    if (up.tls.server_name.size() > 253)
      errors.push_back("upstream " + up.name + ": TLS server name longer than 253 characters");
    for (const auto& problem : validate(*up.policy)) {
      errors.push_back("upstream " + up.name + ": policy: " + problem);
    }
  }
  return errors;
}

bool Delta::empty() const {
  return upsert_virtual_hosts.empty() && remove_virtual_hosts.empty() && upsert_upstreams.empty() &&
         remove_upstreams.empty() && upsert_certificates.empty() && remove_certificates.empty() &&
         upsert_tls_hosts.empty() && remove_tls_hosts.empty() && upsert_substitutions.empty() &&
         remove_substitutions.empty() && upsert_listeners.empty() && remove_listeners.empty() &&
         !default_route_changed;
}

namespace {

template <typename Map, typename Upserts, typename Removes>
void diff_maps(const Map& from, const Map& to, Upserts& upserts, Removes& removes) {
  for (const auto& [key, value] : to) {
    auto it = from.find(key);
    if (it == from.end() || !(it->second == value)) upserts.push_back(value);
  }
  for (const auto& [key, value] : from) {
    if (!to.contains(key)) removes.push_back(key);
  }
}

}  // namespace

Delta diff(const Config& from, const Config& to) { return diff(from, from.upstreams, to); }

Delta diff(const Config& from, const std::map<std::string, Upstream>& from_upstreams,
           const Config& to) {
  Delta d;
  diff_maps(from.virtual_hosts, to.virtual_hosts, d.upsert_virtual_hosts, d.remove_virtual_hosts);
  diff_maps(from_upstreams, to.upstreams, d.upsert_upstreams, d.remove_upstreams);
  diff_maps(from.certificates, to.certificates, d.upsert_certificates, d.remove_certificates);
  diff_maps(from.tls_hosts, to.tls_hosts, d.upsert_tls_hosts, d.remove_tls_hosts);
  diff_maps(from.substitutions, to.substitutions, d.upsert_substitutions, d.remove_substitutions);
  diff_maps(from.listeners, to.listeners, d.upsert_listeners, d.remove_listeners);
  if (from.default_route != to.default_route) {
    d.default_route_changed = true;
    d.default_route = to.default_route;
  }
  return d;
}

ApplyResult apply(const Config& base, const Delta& delta) {
  ApplyResult result{base, {}};
  Config& c = result.config;
  for (const auto& host : delta.remove_virtual_hosts) {
    if (c.virtual_hosts.erase(host) == 0) {
      result.error = "remove of unknown virtual host \"" + host + "\"";
      return result;
    }
  }
  for (const auto& name : delta.remove_upstreams) {
    if (c.upstreams.erase(name) == 0) {
      result.error = "remove of unknown upstream \"" + name + "\"";
      return result;
    }
  }
  for (const auto& name : delta.remove_certificates) {
    if (c.certificates.erase(name) == 0) {
      result.error = "remove of unknown certificate \"" + name + "\"";
      return result;
    }
  }
  for (const auto& host : delta.remove_tls_hosts) {
    if (c.tls_hosts.erase(host) == 0) {
      result.error = "remove of unknown TLS host \"" + host + "\"";
      return result;
    }
  }
  for (const auto& name : delta.remove_substitutions) {
    if (c.substitutions.erase(name) == 0) {
      result.error = "remove of unknown substitution \"" + name + "\"";
      return result;
    }
  }
  for (const auto& name : delta.remove_listeners) {
    if (c.listeners.erase(name) == 0) {
      result.error = "remove of unknown listener \"" + name + "\"";
      return result;
    }
  }
  for (const auto& vh : delta.upsert_virtual_hosts) c.virtual_hosts[host_key(vh)] = vh;
  for (const auto& sub : delta.upsert_substitutions) c.substitutions[sub.name] = sub;
  for (const auto& th : delta.upsert_tls_hosts) c.tls_hosts[host_key(th)] = th;
  for (const auto& l : delta.upsert_listeners) c.listeners[l.name] = l;
  for (const auto& cert : delta.upsert_certificates) c.certificates[cert.name] = cert;
  for (const auto& up : delta.upsert_upstreams) c.upstreams[up.name] = up;
  if (delta.default_route_changed) c.default_route = delta.default_route;
  return result;
}

}  // namespace tidegate::model
