#include "server/route_filters.h"

#include <algorithm>

#include "server/headers.h"

namespace tidegate::dataplane::server {

std::string replace_path_prefix(std::string_view path, std::size_t prefix_length,
                                std::string_view value) {
  prefix_length = std::min(prefix_length, path.size());
  while (!value.empty() && value.back() == '/') value.remove_suffix(1);
  std::string out(value);
  out.append(path.substr(prefix_length));
  if (out.empty() || out.front() != '/') out.insert(out.begin(), '/');
  return out;
}

std::string modify_path(const model::PathModifier& m, std::string_view path,
                        std::size_t prefix_length) {
  if (m.kind == model::PathModifier::Kind::kFull) return m.value;
  return replace_path_prefix(path, prefix_length, m.value);
}

namespace {

uint16_t well_known_port(std::string_view scheme) { return scheme == "https" ? 443 : 80; }

// The port of a Host value ("a:8080" -> 8080, "[::1]:81" -> 81), 0 when it names none or an
// invalid one.
uint16_t host_port(std::string_view host) {
  const std::string_view name = host_without_port(host);
  if (name.size() + 1 >= host.size() || host[name.size()] != ':') return 0;
  const std::string_view digits = host.substr(name.size() + 1);
  if (digits.size() > 5) return 0;
  unsigned port = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return 0;
    port = port * 10 + static_cast<unsigned>(c - '0');
  }
  return port > 0 && port <= 65535 ? static_cast<uint16_t>(port) : 0;
}

}  // namespace

std::string redirect_location(const model::RequestRedirect& r, bool https, std::string_view host,
                              std::string_view path, std::string_view query,
                              std::size_t prefix_length) {
  const std::string_view request_scheme = https ? "https" : "http";
  const std::string_view scheme = r.scheme.empty() ? request_scheme : std::string_view(r.scheme);
  uint16_t port = r.port;
  if (port == 0) {
    // A new scheme means its own well-known port; otherwise the port the client named.
    port = !r.scheme.empty() ? well_known_port(scheme) : host_port(host);
    if (port == 0) port = well_known_port(request_scheme);
  }
  std::string location(scheme);
  location += "://";
  if (r.hostname.empty()) {
    location += host_without_port(host);
  } else {
    location += r.hostname;
  }
  if (port != well_known_port(scheme)) {
    location += ':';
    location += std::to_string(port);
  }
  if (r.path) {
    location += modify_path(*r.path, path, prefix_length);
  } else {
    location += path.empty() ? std::string_view("/") : path;
  }
  if (!query.empty()) {
    location += '?';
    location += query;
  }
  return location;
}

}  // namespace tidegate::dataplane::server
