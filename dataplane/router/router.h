#pragma once
// Host → virtual host → route matching for one configuration snapshot.
//
// A Router is compiled once from a model::Config (Router::build) and is immutable afterwards:
// match() is const, takes no lock of ours and can be called from any number of threads at once.
// It does not allocate for exact and prefix matching; for hosts longer than kMaxStackHostLength
// it falls back to one heap string. Regex routes are matched with RE2, which keeps a lazily built
// DFA cache behind its own internal synchronisation and may allocate while filling it.
//
// Host (the raw Host header value, optional whitespace already removed by the HTTP parser):
//   - normalised before lookup: a ":port" suffix is removed ("[v6]:port" keeps the literal
//     inside the brackets), one trailing dot is removed ("foo.com." == "foo.com"), and ASCII
//     letters are lower-cased. An empty or malformed host (e.g. "[::1" without "]") takes no
//     exact or wildcard host and goes on to "*".
//   - lookup order: the exact virtual host; then the wildcard "*.suffix" whose "*" stands for
//     exactly ONE non-empty label ("*.foo.com" takes "bar.foo.com", not "foo.com" nor
//     "baz.bar.foo.com"); then the Gateway API's wildcards "**.suffix", whose "**" stands for one
//     or more labels, the longest suffix first ("baz.bar.foo.com" tries "**.bar.foo.com", then
//     "**.foo.com", then "**.com"); then the catch-all virtual host "*" (Ingress rules without a
//     host). IP literals are looked up as exact hosts only.
//   - the first virtual host found OWNS the request: if none of its routes match, there is no
//     fall-through to a wildcard or to "*" — unless it is a Gateway API host
//     (VirtualHost::falls_through), whose unmatched requests go on to the next virtual host in
//     the order above (the Gateway API orders rules by hostname first, then by path). When no
//     route takes the request it gets Config::default_route when set (the Ingress
//     defaultBackend, used whatever its path), otherwise no route (the caller answers 404). The
//     same fallback applies when no virtual host takes the host at all.
//
// Path (the request target's path; matching stops at the first '?' in case the caller left the
// query on). Kubernetes Ingress v1 semantics:
//   - Exact: byte-for-byte equal, case-sensitive. Exact "/foo" does not match "/foo/".
//   - Prefix: element-wise on '/'-separated elements, case-sensitive. Trailing slashes of the
//     route path are ignored ("/foo/" behaves like "/foo"); "/" matches every path; "/foo"
//     matches "/foo", "/foo/" and "/foo/bar" but not "/foobar".
//   - Regex: an RE2 pattern anchored at the START of the path but not at its end ("/api/v[0-9]"
//     matches "/api/v1/users"); add "$" to anchor the end.
//
// Conditions besides the path (Gateway API routes, model/conditions.h): the method compared
// exactly; each header's value (see RequestView::header) and each query parameter's first value
// (raw, not percent-decoded; the name compared byte-for-byte) equal to the condition's, or, for
// RegularExpression, matched as a whole by the RE2 pattern. A route whose path matches but whose
// conditions do not is passed over and the next route is tried.
//
// Precedence within a virtual host: routes are tried in model::sort_routes order (longest path
// text first; on equal length Exact, then Prefix, then Regex; then routes with a method, more
// header conditions, more query conditions first) and the first match wins. build() applies
// model::sort_routes itself (a stable sort), so only routes equal in all of these keep their
// input order.
//
// Pointers and views in a Match point into the Router and stay valid as long as it lives: keep the
// Router in the same immutable snapshot as whatever uses the Match.

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/model.h"

namespace tidegate::dataplane::router {

// Hosts up to this many bytes are normalised in a stack buffer; longer ones use a heap string.
inline constexpr std::size_t kMaxStackHostLength = 255;

// What a route's conditions besides the path read from a request (the Gateway API's method,
// header and query parameter matches, model/conditions.h). Implemented by the caller over its
// request head; only asked for when a candidate route has such conditions.
class RequestView {
 public:
  virtual ~RequestView() = default;
  virtual std::string_view method() const = 0;  // as received ("GET")
  virtual std::string_view query() const = 0;   // after the first '?'; empty when none
  // The value of the request's fields named `lower_name` (lower case): one field's value as it
  // is, several joined with ", " into `scratch`. nullopt when the request has none.
  virtual std::optional<std::string_view> header(std::string_view lower_name,
                                                 std::string& scratch) const = 0;
};

struct Match {
  // The route that takes the request, or nullptr: nothing matched and there is no default
  // route, so the caller answers 404.
  const model::Route* route = nullptr;
  // The virtual host that took the host: "foo.com", "*.foo.com" or "*"; empty when none did.
  // Set even when the route is the default route or nullptr (useful for logs).
  std::string_view virtual_host;
  // True when `route` is Config::default_route.
  bool is_default = false;
};

class Router {
 public:
  // Compiles `config`. Returns nullptr and sets *error (when error != nullptr) if a Regex route
  // does not compile. Otherwise the config is expected to have passed model::validate; build()
  // does not check upstream references or host syntax. The router keeps its own copy of the
  // virtual hosts (and default route) it takes.
  static std::unique_ptr<const Router> build(const model::Config& config, std::string* error) {
    return build(config, {}, error);
  }
  // The router of one listener: the virtual hosts whose VirtualHost::listener is `listener`
  // (empty: the data plane's own listeners, which also get Config::default_route).
  static std::unique_ptr<const Router> build(const model::Config& config, std::string_view listener,
                                             std::string* error);
  // The same without a copy: the router's routes, hosts and Match::route point into `config`,
  // which must outlive the router unchanged (the snapshot keeps both: runtime::Routing). At
  // 100,000 hosts the copy would be about 100 MB.
  static std::unique_ptr<const Router> build_borrowing(const model::Config& config,
                                                       std::string_view listener,
                                                       std::string* error);
  // A router without routes (every request: no match), for a connection whose listener the
  // current snapshot no longer has.
  static const Router& empty();

  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;
  ~Router();

  // `host`: the raw Host header value; `path`: the request path without the query string.
  // `request`: for routes with conditions besides the path; a route with conditions never
  // matches without it.
  Match match(std::string_view host, std::string_view path,
              const RequestView* request = nullptr) const;

  // Calls `visit` once per route a Match can return, with the virtual host that owns it
  // ("" for Config::default_route). The Route references are the same objects match() points
  // to, so callers can key per-snapshot tables (e.g. metric label sets) on them.
  void for_each_route(
      const std::function<void(std::string_view virtual_host, const model::Route&)>& visit) const;

 private:
  struct CompiledRoute;
  struct VirtualHostTable;

  // Keys point into the configuration's host names.
  using HostIndex = std::unordered_map<std::string_view, std::size_t>;

  Router();
  static std::unique_ptr<Router> compile(const model::Config& config, std::string_view listener,
                                         std::string* error);

  // Calls `visit(const VirtualHostTable&)` for each virtual host that takes `host` (already
  // normalised, see above), the most specific first, until it returns true.
  template <class Visit>
  void visit_virtual_hosts(std::string_view host, bool ip_literal, Visit&& visit) const;

  std::vector<VirtualHostTable> virtual_hosts_;
  HostIndex exact_hosts_;             // "foo.com" → index into virtual_hosts_
  HostIndex wildcard_suffixes_;       // "foo.com" (from "*.foo.com") → index into virtual_hosts_
  HostIndex deep_wildcard_suffixes_;  // "foo.com" (from "**.foo.com") → index
  const VirtualHostTable* catch_all_ = nullptr;  // the "*" virtual host, if any
  const model::Route* default_route_ = nullptr;  // Config::default_route, if any
  // build()'s copy of what the router points into; null for build_borrowing().
  std::unique_ptr<const model::Config> owned_;
};

}  // namespace tidegate::dataplane::router
