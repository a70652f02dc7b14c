#include "router/router.h"

#include <algorithm>
#include <utility>

#include <re2/re2.h>

namespace tidegate::dataplane::router {

struct Router::CompiledRoute {
  const model::Route* route_ptr = nullptr;  // in the configuration (see Router::owned_)
  const model::Route& route() const { return *route_ptr; }
  // kPrefix: length of route().path without its trailing slashes ("/foo/" → 4, "/" → 0).
  std::size_t prefix_length = 0;
  // kRegex: the compiled pattern.
  std::unique_ptr<re2::RE2> regex;
  // Conditions besides the path: route().method/headers/query set. The RegularExpression ones'
  // patterns, by index into route().headers and route().query (null for Exact).
  bool has_conditions = false;
  std::vector<std::unique_ptr<re2::RE2>> header_regexes;
  std::vector<std::unique_ptr<re2::RE2>> query_regexes;

  bool conditions_hold(const RequestView* request) const {
    if (!has_conditions) return true;
    if (request == nullptr) return false;
    if (!route().method.empty() && request->method() != route().method) return false;
    std::string scratch;
    for (std::size_t i = 0; i < route().headers.size(); ++i) {
      const model::HeaderCondition& c = route().headers[i];
      auto value = request->header(c.name, scratch);
      if (!value || !value_matches(*value, c.value, header_regexes[i].get())) return false;
    }
    if (!route().query.empty()) {
      const std::string_view query = request->query();
      for (std::size_t i = 0; i < route().query.size(); ++i) {
        const model::QueryCondition& c = route().query[i];
        auto value = query_parameter(query, c.name);
        if (!value || !value_matches(*value, c.value, query_regexes[i].get())) return false;
      }
    }
    return true;
  }

  static bool value_matches(std::string_view value, const std::string& want,
                            const re2::RE2* regex) {
    if (regex == nullptr) return value == want;
    return re2::RE2::FullMatch(re2::StringPiece(value.data(), value.size()), *regex);
  }

  // The value of the first "name=value" (or bare "name") pair of `query` named `name`.
  static std::optional<std::string_view> query_parameter(std::string_view query,
                                                         std::string_view name) {
    while (!query.empty()) {
      const std::size_t amp = query.find('&');
      std::string_view pair = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
      const std::size_t eq = pair.find('=');
      if (pair.substr(0, eq) != name) continue;
      return eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    }
    return std::nullopt;
  }

  bool matches(std::string_view path) const {
    switch (route().match) {
      case model::PathMatch::kExact:
        return path == route().path;
      case model::PathMatch::kPrefix: {
        // Element-wise: the prefix must end at the end of the path or at a '/'.
        std::string_view prefix(route().path.data(), prefix_length);
        return path.starts_with(prefix) &&
               (path.size() == prefix.size() || path[prefix.size()] == '/');
      }
      case model::PathMatch::kRegex:
        return regex->Match(re2::StringPiece(path.data(), path.size()), 0, path.size(),
                            re2::RE2::ANCHOR_START, nullptr, 0);
    }
    return false;
  }
};

struct Router::VirtualHostTable {
  std::string_view host;              // as configured: "foo.com", "*.foo.com" or "*"
  std::vector<CompiledRoute> routes;  // model::sort_routes order
  bool falls_through = false;         // model::VirtualHost::falls_through
};

namespace {

struct HostName {
  std::string_view name;  // without port, brackets or trailing dot; case unchanged
  bool ip_literal = false;
};

bool is_ipv4_literal(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(),
                                      [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

// Splits the Host header value into the name to look up. A malformed value yields an empty name,
// which only the catch-all virtual host takes.
HostName split_host(std::string_view raw) {
  if (raw.starts_with('[')) {
    // "[v6]" or "[v6]:port": keep the literal inside the brackets.
    std::size_t close = raw.find(']');
    if (close == std::string_view::npos) return {};
    std::string_view rest = raw.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return {};
    return {raw.substr(1, close - 1), true};
  }
  std::string_view name = raw.substr(0, raw.find(':'));
  if (name.ends_with('.')) name.remove_suffix(1);
  return {name, is_ipv4_literal(name)};
}

char to_lower_ascii(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + ('a' - 'A')) : c;
}

// Lower-cases `name` into `buffer` when it fits, otherwise into `heap`.
std::string_view to_lower(std::string_view name, char (&buffer)[kMaxStackHostLength],
                          std::string& heap) {
  char* out = buffer;
  if (name.size() > kMaxStackHostLength) {
    heap.resize(name.size());
    out = heap.data();
  }
  std::transform(name.begin(), name.end(), out, to_lower_ascii);
  return {out, name.size()};
}

std::size_t prefix_length_of(std::string_view path) {
  std::size_t end = path.size();
  while (end > 0 && path[end - 1] == '/') --end;
  return end;
}

}  // namespace

Router::Router() = default;
Router::~Router() = default;

const Router& Router::empty() {
  static const std::unique_ptr<const Router> none = build(model::Config{}, {}, nullptr);
  return *none;
}

std::unique_ptr<const Router> Router::build(const model::Config& config, std::string_view listener,
                                            std::string* error) {
  // A copy of only what this listener's router points into.
  auto owned = std::make_unique<model::Config>();
  for (const auto& [key, virtual_host] : config.virtual_hosts) {
    if (virtual_host.listener == listener) owned->virtual_hosts.emplace(key, virtual_host);
  }
  if (listener.empty()) owned->default_route = config.default_route;
  std::unique_ptr<Router> router = compile(*owned, listener, error);
  if (router) router->owned_ = std::move(owned);
  return router;
}

std::unique_ptr<const Router> Router::build_borrowing(const model::Config& config,
                                                      std::string_view listener,
                                                      std::string* error) {
  return compile(config, listener, error);
}

std::unique_ptr<Router> Router::compile(const model::Config& config, std::string_view listener,
                                        std::string* error) {
  std::unique_ptr<Router> router(new Router());
  if (listener.empty()) router->virtual_hosts_.reserve(config.virtual_hosts.size());
  std::optional<std::size_t> catch_all;

  const auto precedes = [](const model::Route* a, const model::Route* b) {
    return model::route_precedes(*a, *b);
  };
  std::vector<const model::Route*> routes;
  for (const auto& [key, virtual_host] : config.virtual_hosts) {
    if (virtual_host.listener != listener) continue;
    VirtualHostTable table;
    table.host = virtual_host.host;
    table.falls_through = virtual_host.falls_through;
    // In model::sort_routes order (stable: equal routes keep the configuration's order).
    routes.clear();
    for (const model::Route& route : virtual_host.routes) routes.push_back(&route);
    if (!std::is_sorted(routes.begin(), routes.end(), precedes)) {
      std::stable_sort(routes.begin(), routes.end(), precedes);
    }
    table.routes.reserve(routes.size());
    for (const model::Route* route_ptr : routes) {
      const model::Route& route = *route_ptr;
      CompiledRoute compiled;
      compiled.route_ptr = route_ptr;
      switch (route.match) {
        case model::PathMatch::kExact:
          break;
        case model::PathMatch::kPrefix:
          compiled.prefix_length = prefix_length_of(route.path);
          break;
        case model::PathMatch::kRegex: {
          re2::RE2::Options options;
          options.set_log_errors(false);
          compiled.regex = std::make_unique<re2::RE2>(route.path, options);
          if (!compiled.regex->ok()) {
            if (error != nullptr) {
              *error = "host " + virtual_host.host + ": invalid regex \"" + route.path +
                       "\": " + compiled.regex->error();
            }
            return nullptr;
          }
          break;
        }
      }
      compiled.has_conditions =
          !route.method.empty() || !route.headers.empty() || !route.query.empty();
      auto compile_values = [&](const auto& conditions,
                                std::vector<std::unique_ptr<re2::RE2>>& out) {
        for (const auto& c : conditions) {
          if (c.match != model::ValueMatch::kRegex) {
            out.push_back(nullptr);
            continue;
          }
          re2::RE2::Options options;
          options.set_log_errors(false);
          auto re = std::make_unique<re2::RE2>(c.value, options);
          if (!re->ok()) {
            if (error != nullptr) {
              *error = "host " + virtual_host.host + ": invalid regex \"" + c.value +
                       "\" in a condition: " + re->error();
            }
            return false;
          }
          out.push_back(std::move(re));
        }
        return true;
      };
      if (!compile_values(route.headers, compiled.header_regexes) ||
          !compile_values(route.query, compiled.query_regexes)) {
        return nullptr;
      }
      table.routes.push_back(std::move(compiled));
    }

    const std::size_t index = router->virtual_hosts_.size();
    const std::string_view host = table.host;
    if (host == "*") {
      catch_all = index;
    } else if (host.starts_with("**.")) {
      router->deep_wildcard_suffixes_.emplace(host.substr(3), index);
    } else if (host.starts_with("*.")) {
      router->wildcard_suffixes_.emplace(host.substr(2), index);
    } else {
      router->exact_hosts_.emplace(host, index);
    }
    router->virtual_hosts_.push_back(std::move(table));
  }

  // Taken only once virtual_hosts_ no longer grows.
  if (catch_all) router->catch_all_ = &router->virtual_hosts_[*catch_all];
  if (listener.empty() && config.default_route) router->default_route_ = &*config.default_route;
  return router;
}

template <class Visit>
void Router::visit_virtual_hosts(std::string_view host, bool ip_literal, Visit&& visit) const {
  if (host.empty()) {
    if (catch_all_) visit(*catch_all_);
    return;
  }
  if (auto it = exact_hosts_.find(host); it != exact_hosts_.end()) {
    if (visit(virtual_hosts_[it->second])) return;
  }
  if (!ip_literal) {
    // "*.suffix" stands for exactly one non-empty label: drop the first label and look up the
    // rest as it is, never a shorter suffix.
    std::size_t dot = host.find('.');
    if (dot != std::string_view::npos && dot > 0 && dot + 1 < host.size()) {
      if (auto it = wildcard_suffixes_.find(host.substr(dot + 1)); it != wildcard_suffixes_.end()) {
        if (visit(virtual_hosts_[it->second])) return;
      }
    }
    // "**.suffix": one or more labels, the longest suffix first.
    if (!deep_wildcard_suffixes_.empty()) {
      // Every label non-empty: an empty one ("a..bar.com") ends the search.
      while (dot != std::string_view::npos && dot > 0 && dot + 1 < host.size() &&
             host[dot + 1] != '.') {
        if (auto it = deep_wildcard_suffixes_.find(host.substr(dot + 1));
            it != deep_wildcard_suffixes_.end()) {
          if (visit(virtual_hosts_[it->second])) return;
        }
        dot = host.find('.', dot + 1);
      }
    }
  }
  if (catch_all_) visit(*catch_all_);
}

Match Router::match(std::string_view raw_host, std::string_view path,
                    const RequestView* request) const {
  // Defensive: the caller should already have removed the query string.
  path = path.substr(0, path.find('?'));

  const HostName name = split_host(raw_host);
  char buffer[kMaxStackHostLength];
  std::string heap;  // stays empty (no allocation) unless the host is longer than the buffer
  const std::string_view host = to_lower(name.name, buffer, heap);

  Match result;
  // The most specific virtual host owns the request, unless it falls through (Gateway API
  // hosts): then a request none of its routes takes goes on to the next one.
  visit_virtual_hosts(host, name.ip_literal, [&](const VirtualHostTable& virtual_host) {
    if (result.virtual_host.empty()) result.virtual_host = virtual_host.host;
    for (const CompiledRoute& route : virtual_host.routes) {
      if (route.matches(path) && route.conditions_hold(request)) {
        result.route = &route.route();
        result.virtual_host = virtual_host.host;
        return true;
      }
    }
    return !virtual_host.falls_through;
  });
  if (result.route != nullptr) return result;
  if (default_route_ != nullptr) {
    result.route = default_route_;
    result.is_default = true;
  }
  return result;
}

void Router::for_each_route(
    const std::function<void(std::string_view virtual_host, const model::Route&)>& visit) const {
  for (const VirtualHostTable& table : virtual_hosts_) {
    for (const CompiledRoute& route : table.routes) visit(table.host, route.route());
  }
  if (default_route_ != nullptr) visit({}, *default_route_);
}

}  // namespace tidegate::dataplane::router
