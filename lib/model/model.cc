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
  size_t n = r.path.size();
  if (r.match == PathMatch::kPrefix) {
    while (n > 0 && r.path[n - 1] == '/') --n;
  }
  return n;
}

}  // namespace

void sort_routes(std::vector<Route>& routes) {
  std::stable_sort(routes.begin(), routes.end(), [](const Route& a, const Route& b) {
    size_t la = effective_length(a), lb = effective_length(b);
    if (la != lb) return la > lb;
    if (a.match != b.match) return static_cast<int>(a.match) < static_cast<int>(b.match);
    return a.path < b.path;
  });
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

bool is_valid_host(const std::string& host) {
  if (host == "*") return true;
  std::string_view rest = host;
  if (rest.starts_with("*.")) rest.remove_prefix(2);
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

void validate_route(const Config& config, const Route& r, const std::string& where,
                    std::vector<std::string>& errors) {
  if (r.match != PathMatch::kRegex && (r.path.empty() || r.path.front() != '/')) {
    errors.push_back(where + ": path \"" + r.path + "\" does not start with '/'");
  }
  if (r.match == PathMatch::kRegex) {
    RE2::Options opts;
    opts.set_log_errors(false);
    RE2 re(r.path, opts);
    if (!re.ok()) errors.push_back(where + ": invalid regex \"" + r.path + "\": " + re.error());
  }
  if (!config.upstreams.contains(r.upstream)) {
    errors.push_back(where + ": unknown upstream \"" + r.upstream + "\"");
  }
}

}  // namespace

std::vector<std::string> validate(const Config& config) {
  std::vector<std::string> errors;
  for (const auto& [key, vh] : config.virtual_hosts) {
    if (key != vh.host)
      errors.push_back("virtual host key \"" + key + "\" != host \"" + vh.host + "\"");
    if (!is_valid_host(vh.host)) errors.push_back("invalid host \"" + vh.host + "\"");

    for (const auto& r : vh.routes) validate_route(config, r, "host " + vh.host, errors);
  }
  if (config.default_route) validate_route(config, *config.default_route, "default route", errors);
  for (const auto& [key, cert] : config.certificates) {
    if (key != cert.name)
      errors.push_back("certificate key \"" + key + "\" != name \"" + cert.name + "\"");
    if (cert.cert_pem.empty() || cert.key_pem.empty()) {
      errors.push_back("certificate " + cert.name + ": empty certificate or key");
    }
  }
  for (const auto& [key, th] : config.tls_hosts) {
    if (key != th.host)
      errors.push_back("TLS host key \"" + key + "\" != host \"" + th.host + "\"");
    if (th.host == "*" || !is_valid_host(th.host))
      errors.push_back("invalid TLS host \"" + th.host + "\"");
    if (!config.certificates.contains(th.certificate)) {
      errors.push_back("TLS host " + th.host + ": unknown certificate \"" + th.certificate + "\"");
    }
  }
  for (const auto& [key, up] : config.upstreams) {
    if (key != up.name)
      errors.push_back("upstream key \"" + key + "\" != name \"" + up.name + "\"");
    std::set<Endpoint> seen;
    for (const auto& ep : up.endpoints) {
      if (ep.port == 0)
        errors.push_back("upstream " + up.name + ": endpoint " + ep.address + " has port 0");
      if (ep.address.empty())
        errors.push_back("upstream " + up.name + ": endpoint with empty address");
      if (!seen.insert(ep).second) {
        errors.push_back("upstream " + up.name + ": duplicate endpoint " + ep.address + ":" +
                         std::to_string(ep.port));
      }
    }
    if (!up.tls.enabled && (!up.tls.server_name.empty() || !up.tls.ca_pem.empty()))
      errors.push_back("upstream " + up.name + ": TLS settings without TLS");
    if (up.tls.server_name.size() > 253)
      errors.push_back("upstream " + up.name + ": TLS server name longer than 253 characters");
  }
  return errors;
}

bool Delta::empty() const {
  return upsert_virtual_hosts.empty() && remove_virtual_hosts.empty() && upsert_upstreams.empty() &&
         remove_upstreams.empty() && upsert_certificates.empty() && remove_certificates.empty() &&
         upsert_tls_hosts.empty() && remove_tls_hosts.empty() && !default_route_changed;
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

Delta diff(const Config& from, const Config& to) {
  Delta d;
  diff_maps(from.virtual_hosts, to.virtual_hosts, d.upsert_virtual_hosts, d.remove_virtual_hosts);
  diff_maps(from.upstreams, to.upstreams, d.upsert_upstreams, d.remove_upstreams);
  diff_maps(from.certificates, to.certificates, d.upsert_certificates, d.remove_certificates);
  diff_maps(from.tls_hosts, to.tls_hosts, d.upsert_tls_hosts, d.remove_tls_hosts);
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
  for (const auto& vh : delta.upsert_virtual_hosts) c.virtual_hosts[vh.host] = vh;
  for (const auto& th : delta.upsert_tls_hosts) c.tls_hosts[th.host] = th;
  for (const auto& cert : delta.upsert_certificates) c.certificates[cert.name] = cert;
  for (const auto& up : delta.upsert_upstreams) c.upstreams[up.name] = up;
  if (delta.default_route_changed) c.default_route = delta.default_route;
  return result;
}

}  // namespace tidegate::model
