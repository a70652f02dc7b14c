#include "server/exchange.h"

#include <algorithm>
#include <charconv>
#include <chrono>

#include <boost/asio/post.hpp>

#include "balancer/request_view.h"
#include "log/log.h"
#include "ratelimit/client_address.h"
#include "server/canary.h"
#include "server/route_filters.h"
#include "server/worker.h"
#include "text/text.h"

namespace tidegate::dataplane::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {
// The policy of requests that matched no route: the defaults (equal to server::Limits).
const model::RoutePolicy kDefaultPolicy{};

// RequestView::header over the request's fields (names given in lower case; Beast compares
// case-insensitively).
std::string_view request_field(const void* context, std::string_view name) {
  const auto& fields = *static_cast<const Fields*>(context);
  auto it = fields.find(name);
  return it == fields.end() ? std::string_view() : std::string_view(it->value());
}

// X-Forwarded-For lines read for the client address; past it only the last ones (the hops
// nearest to us) are read.
constexpr size_t kMaxForwardedForLines = 16;

}  // namespace

Exchange::Exchange(Worker& worker, Downstream& downstream)
    : worker_(worker), downstream_(downstream), substitution_(worker) {
  filters_.add(&substitution_);
  filters_.add(&compression_);
}

Exchange::~Exchange() {
  if (mirror_body_wanted_) worker_.end_mirror_capture();
  end_cache_fill();
  end_attempt(false);
  end_auth_attempt(false);
}

void Exchange::reset() {
  end_cache_fill();
  cache_state_ = CacheState::kOff;
  cache_request_fields_.clear();
  if (cache_timer_) cache_timer_->cancel();
  cancelled_ = false;
  grpc_ = false;
  challenge_ = nullptr;
  call_deadline_.reset();
  grpc_code_.reset();
  grpc_status_sent_ = -1;
  up_.reset();
  end_auth_attempt(false);
  upstream::discard(auth_up_.connection());
  auth_up_.reset();
  auth_request_.reset();
  auth_upstream_ = nullptr;
  auth_ = nullptr;
  auth_cookies_.clear();
  local_fields_.clear();
  fields_arena_.release();
  local_response_.reset();
  end_attempt(false);
  snapshot_.reset();
  routes_.reset();
  upstream_ = nullptr;
  attempts_ = 0;
  retry_deadline_.reset();
  error_page_ = false;
  no_backend_ = false;
  original_target_.clear();
  request_body_started_ = false;
  duplex_ = false;
  response_pump_started_ = false;
  body_replayable_ = true;
  body_bytes_in_buffer_ = 0;
  response_started_ = false;
  expect_continue_ = false;
  upgrade_ = false;
  filters_.reset();
  cors_ = nullptr;
  cors_origin_.clear();
  client_auth_ = nullptr;
  client_verdict_ = nullptr;
  client_peer_ = nullptr;
  file_.reset();
  sendfile_ = false;
  // Requests not mirrored: their body never became whole.
  skip_mirrors();
  if (mirror_body_.capacity() > 4096) {
    std::string().swap(mirror_body_);  // an idle connection keeps no large body buffer
  } else {
    mirror_body_.clear();
  }
}

void Exchange::begin(std::size_t header_bytes) {
  exchange_open_ = true;
  route_ = nullptr;
  canary_chosen_ = false;
  status_sent_ = 0;
  bytes_in_ = header_bytes;
  bytes_out_ = 0;
  upstream_endpoint_ = {};
  if (observing()) {
    started_ = std::chrono::steady_clock::now();
    upstream_started_ = upstream_answered_ = {};
  }
  if (worker_.access_log()) started_wall_ = std::chrono::system_clock::now();
  const auto method = downstream_.request().method();
  head_request_ = method == http::verb::head;
  idempotent_ = is_idempotent(method);
  grpc_ = is_grpc_request(downstream_.request(), downstream_.http_version());
  resolve_client();
}

namespace {

// The request head as the router's conditions read it (Gateway API matches).
class RequestHeadView final : public router::RequestView {
 public:
  RequestHeadView(const RequestMessage& req, std::string_view path_and_query)
      : req_(req), path_and_query_(path_and_query) {}
  std::string_view method() const override { return req_.method_string(); }
  std::string_view query() const override {
    const std::size_t q = path_and_query_.find('?');
    return q == std::string_view::npos ? std::string_view{} : path_and_query_.substr(q + 1);
  }
  std::optional<std::string_view> header(std::string_view lower_name,
                                         std::string& scratch) const override {
    auto [first, last] = req_.equal_range(lower_name);
    if (first == last) return std::nullopt;
    if (std::next(first) == last) return first->value();
    scratch.clear();
    for (auto it = first; it != last; ++it) {
      if (!scratch.empty()) scratch += ", ";
      scratch.append(it->value().data(), it->value().size());
    }
    return std::string_view(scratch);
  }

 private:
  const RequestMessage& req_;
  std::string_view path_and_query_;
};

// The bytes of the request path a route's Prefix (or Exact) path matched: its path without
// trailing slashes (the Gateway API's ReplacePrefixMatch replaces them).
std::size_t matched_prefix_length(const model::Route& route) {
  std::size_t n = route.path.size();
  if (route.match == model::PathMatch::kPrefix) {
    while (n > 0 && route.path[n - 1] == '/') --n;
  }
  return n;
}

}  // namespace

void Exchange::route() {
  snapshot_ = worker_.snapshot();
  routes_ = worker_.routes();  // published together with the snapshot
  if (!snapshot_) {
    respond(503, "no configuration yet\n", !downstream_.request_complete());
    return;
  }
  auto& req = downstream_.request();
  RequestTarget target = split_target(req.target(), req[http::field::host]);
  const RequestHeadView view(req, target.path_and_query);
  const std::string_view listener = downstream_.listener();
  auto match = snapshot_->router_for(listener).match(target.host, target.path, &view);
  if (!match.virtual_host.empty() && listener.empty()) {
    const auto& redirects = snapshot_->routing->host_redirects;
    if (!redirects.empty()) {
      if (auto it = redirects.find(match.virtual_host); it != redirects.end()) {
        redirect_to_host(target, it->second);
        return;
      }
    }
    if (!client_https_ && !snapshot_->ssl_redirect_hosts.empty() &&
        snapshot_->ssl_redirect_hosts.contains(match.virtual_host)) {
      redirect_to_https(target);
      return;
    }
  }
  if ((snapshot_->routing->client_auth || snapshot_->routing->passthrough) && listener.empty() &&
      !check_client_certificate(target)) {
    return;
  }
  route_ = match.route;
  if (route_ == nullptr) {
    respond(404, "no route\n", !downstream_.request_complete());
    return;
  }
  if (!apply_route_policy(target)) return;  // answered by the policy (403, 413, redirects)
  if (route_->policy->external_auth) {
    start_external_auth();
    return;
  }
  proceed_to_backend();
}

void Exchange::proceed_to_backend() {
  if (route_->policy->cache && lookup_cache()) return;
  go_to_backend();
}

void Exchange::go_to_backend() {
  auto& req = downstream_.request();
  // x-sendfile-directories in effect (the operator's --x-sendfile-roots allow them): decided
  // once, read when the request goes up and when the answer comes back.
  sendfile_ = route_->policy->sendfile &&
              sendfile_allowed(*route_->policy->sendfile, worker_.limits().sendfile_roots);
  RequestTarget target = split_target(req.target(), req[http::field::host]);
  if (!route_->policy->error_codes.empty()) original_target_ = std::string(req.target());
  upstream_ = choose_upstream();
  if ((upstream_ == nullptr || upstream_->endpoints.empty()) &&
      !route_->fallback_upstream.empty()) {
    // default-backend: serves the route while its own backend has no endpoints.
    if (const auto* f = snapshot_->upstream(route_->fallback_upstream); f != nullptr) upstream_ = f;
  }
  if (upstream_ == nullptr && no_backend_) {
    // A Gateway API rule without a usable backend (an unknown Service, a reference not
    // granted): 500, as the Gateway API asks; 503 stays "a backend without endpoints". A gRPC
    // client gets UNAVAILABLE (GRPCRoute's rule for backends that cannot be used).
    grpc_code_ = GrpcStatus::kUnavailable;
    respond(500, "no backend for this route\n", !downstream_.request_complete());
    return;
  }
  if (upstream_ == nullptr || upstream_->endpoints.empty()) {
    respond(503, "no endpoints available\n", !downstream_.request_complete());
    return;
  }
  substitution_.configure(snapshot_->substitution_for(route_), host_without_port(target.host),
                          target.path_and_query);
  if (grpc_) {
    // grpc-timeout: the proxy gives up when the client would (and answers DEADLINE_EXCEEDED);
    // the header goes up unchanged, as nginx and Envoy (by default) pass it.
    if (auto it = req.find("grpc-timeout"); it != req.end()) {
      if (auto t = parse_grpc_timeout(it->value())) {
        call_deadline_ = std::chrono::steady_clock::now() +
                         std::min<std::chrono::nanoseconds>(*t, std::chrono::hours(24 * 365));
      }
    }
  }
  // The Gateway API's timeouts.request: every wait on the backend ends by then (504 before the
  // response head; a response cut short after it), as a gRPC deadline does.
  if (const auto t = policy().request_timeout; t.count() > 0) {
    const auto deadline = std::chrono::steady_clock::now() + t;
    if (!call_deadline_ || deadline < *call_deadline_) call_deadline_ = deadline;
  }
  // Read before the request is edited (substitution drops Accept-Encoding on the way up).
  compression_.configure(route_->policy->compression ? &*route_->policy->compression : nullptr,
                         req[http::field::accept_encoding],
                         req.find(http::field::cookie) != req.end() ||
                             req.find(http::field::authorization) != req.end());
  start_balancing();  // before the request is edited: hash keys read it as received
  prepare_upstream_request();
  if (const auto& p = policy(); !p.rewrite_target.empty() || !p.upstream_vhost.empty() ||
                                p.path_rewrite || p.request_header_modifier) {
    rewrite_upstream_request(target);
  }
  // An upgrade (a WebSocket) is never mirrored: its copy would turn a pooled connection into
  // a tunnel.
  if (!route_->policy->mirrors.empty() && !upgrade_) plan_mirrors();
  connect_endpoint(pick_endpoint());
}

void Exchange::skip_mirrors() {
  if (auto* metrics = worker_.metrics()) {
    for (size_t i = 0; i < mirror_targets_.size(); ++i) metrics->mirror_skipped();
  }
  mirror_targets_.clear();
  mirror_body_.clear();
  if (mirror_body_wanted_) worker_.end_mirror_capture();
  mirror_body_wanted_ = false;
}

void Exchange::plan_mirrors() {
  skip_mirrors();
  auto* metrics = worker_.metrics();
  for (const auto& m : route_->policy->mirrors) {
    if (m.numerator < m.denominator && worker_.next_random() % m.denominator >= m.numerator) {
      continue;  // not in the mirror's share
    }
    const runtime::UpstreamState* up = snapshot_->upstream(m.upstream);
    if (up == nullptr || up->endpoints.empty()) {
      if (metrics) metrics->mirror_skipped();
      continue;
    }
    mirror_targets_.push_back(up);
  }
  if (mirror_targets_.empty()) return;
  if (downstream_.request_complete()) {
    send_mirrors();  // no body
    return;
  }
  // The copies go once the body is whole (a copy is a whole request); a body known to be too
  // long is not kept at all.
  if (auto length = downstream_.request_content_length();
      length && *length > Limits::kMaxMirrorBodyBytes) {
    skip_mirrors();
    return;
  }
  if (!worker_.take_mirror_capture()) {
    skip_mirrors();  // the worker keeps as many bodies as it may
    return;
  }
  mirror_body_wanted_ = true;
}

void Exchange::send_mirrors() {
  const model::RoutePolicy& p = policy();
  const MirrorTimeouts timeouts{p.connect_timeout, p.send_timeout, p.read_timeout};
  for (const runtime::UpstreamState* up : mirror_targets_) {
    send_mirror(worker_, snapshot_, *up, downstream_.request(), mirror_body_, timeouts);
  }
  mirror_targets_.clear();
  mirror_body_.clear();
  if (mirror_body_wanted_) worker_.end_mirror_capture();
  mirror_body_wanted_ = false;
}

void Exchange::redirect_to_https(const RequestTarget& target) {
  // Keep path and query; an absolute-form target ("http://host/p?q") keeps its own.
  std::string location = "https://";
  auto host = host_without_port(target.host);
  location.append(host.data(), host.size());
  auto rest = target.path_and_query;
  if (rest.empty() || rest.front() != '/') location += '/';
  location.append(rest.data(), rest.size());
  respond(308, "redirecting to HTTPS\n", !downstream_.request_complete(), location);
}

void Exchange::redirect_to_host(const RequestTarget& target, std::string_view host) {
  std::string location = client_https_ ? "https://" : "http://";
  location.append(host.data(), host.size());
  // The port the client named (a non-default one: it reached us through it).
  const std::string_view named = host_without_port(target.host);
  if (named.size() < target.host.size()) {
    const std::string_view port = target.host.substr(named.size());
    const bool digits =
        port.size() > 1 && port.size() <= 6 && port.front() == ':' &&
        std::all_of(port.begin() + 1, port.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) location.append(port.data(), port.size());
  }
  auto rest = target.path_and_query;
  if (rest.empty() || rest.front() != '/') location += '/';
  location.append(rest.data(), rest.size());
  respond(308, "redirecting\n", !downstream_.request_complete(), location);
}

void Exchange::resolve_client() {
  const auto& peer_ip = downstream_.peer_ip();
  client_ip_ = peer_ip;
  client_https_ = downstream_.is_tls();
  const ratelimit::CidrSet& trusted = worker_.trusted_proxies();
  if (!peer_ip || trusted.empty() || !trusted.contains(*peer_ip)) return;
  const auto& req = downstream_.request();
  // A trusted proxy's X-Forwarded-Proto names the client's scheme (as ingress-nginx's
  // use-forwarded-headers): a TLS-terminating load balancer in front is not redirected forever.
  if (auto proto = req["X-Forwarded-Proto"]; !proto.empty()) {
    if (text::iequals_ascii(proto, "https")) {
      client_https_ = true;
    } else if (text::iequals_ascii(proto, "http")) {
      client_https_ = false;
    }
  }
  auto range = req.equal_range("X-Forwarded-For");
  size_t skip = static_cast<size_t>(std::distance(range.first, range.second));
  skip = skip > kMaxForwardedForLines ? skip - kMaxForwardedForLines : 0;
  std::array<std::string_view, kMaxForwardedForLines> lines;
  size_t n = 0;
  for (auto it = range.first; it != range.second; ++it) {
    if (skip > 0) {
      --skip;
      continue;
    }
    lines[n++] = it->value();
  }
  client_ip_ = ratelimit::resolve_client_address(
      *peer_ip, std::span<const std::string_view>(lines.data(), n), trusted);
}

const model::RoutePolicy& Exchange::policy() const {
  return route_ != nullptr ? *route_->policy : kDefaultPolicy;
}

bool Exchange::apply_route_policy(const RequestTarget& target) {
  const model::RoutePolicy& p = *route_->policy;
  const bool incomplete = !downstream_.request_complete();
  if (p.deny_ranges) {
    // denylist-source-range: before the allow list (an address in both is denied).
    const CompiledRoute* compiled = compiled_route();
    const auto& peer = client_ip_;
    const bool denied = compiled == nullptr || compiled->deny_all || !peer ||
                        (compiled->deny_ranges && compiled->deny_ranges->contains(*peer));
    if (denied) {
      respond(403, "forbidden\n", incomplete);
      return false;
    }
  }
  if (p.source_ranges) {
    // whitelist-source-range: the connection's peer must be inside one of the ranges. A set
    // that is missing or failed to compile denies (a broken allow list never opens a route).
    const CompiledRoute* compiled = compiled_route();
    const auto& peer = client_ip_;
    bool allowed = compiled != nullptr && compiled->source_ranges && peer &&
                   compiled->source_ranges->contains(*peer);
    if (!allowed) {
      respond(403, "forbidden\n", incomplete);
      return false;
    }
  }
  if (p.rate_limits.rps || p.rate_limits.rpm || p.rate_limits.connections) {
    // limit-rps and limit-connections per client address; limit-allowlist exempts. Refused:
    // 429 (or limit-status-code) with Retry-After, the connection kept.
    const CompiledRoute* compiled = compiled_route();
    const auto& peer = client_ip_;
    bool exempt = compiled == nullptr || !peer ||
                  (compiled->limit_allowlist && compiled->limit_allowlist->contains(*peer));
    if (!exempt) {
      const unsigned status = p.rate_limits.status_code;
      for (ratelimit::RateLimiter* limiter :
           {compiled->rate_limiter.get(), compiled->rpm_limiter.get()}) {
        if (limiter == nullptr) continue;
        auto decision = limiter->check(*peer, std::chrono::steady_clock::now());
        if (!decision.allowed) {
          if (auto* m = worker_.metrics()) m->record_rate_limited(route_labels());
          grpc_code_ = GrpcStatus::kResourceExhausted;
          respond(status, "too many requests\n", incomplete, {}, decision.retry_after_seconds());
          return false;
        }
      }
      if (compiled->connection_limiter) {
        connection_lease_ = compiled->connection_limiter->acquire(*peer);
        if (!connection_lease_) {
          if (auto* m = worker_.metrics()) m->record_rate_limited(route_labels());
          grpc_code_ = GrpcStatus::kResourceExhausted;
          respond(status, "too many connections\n", incomplete, {}, 1);
          return false;
        }
      }
    }
  }
  if (p.cors && apply_cors()) return false;  // a preflight, answered here
  if (p.redirect) {
    respond(p.redirect->code, "redirecting\n", incomplete, p.redirect->url);
    return false;
  }
  if (p.request_redirect) {
    auto pq = target.path_and_query;
    auto question = pq.find('?');
    auto query = question == std::string_view::npos ? std::string_view{} : pq.substr(question + 1);
    respond(p.request_redirect->code, "redirecting\n", incomplete,
            redirect_location(*p.request_redirect, client_https_, target.host, target.path, query,
                              matched_prefix_length(*route_)));
    return false;
  }
  if (!p.app_root.empty() && target.path == "/") {
    respond(302, "redirecting\n", incomplete, p.app_root);
    return false;
  }
  if (p.basic_auth) {
    // auth-type: basic (after redirects, as nginx's access phase follows its rewrites; a CORS
    // preflight was answered above, as ingress-nginx answers it before auth_basic).
    const CompiledRoute* compiled = compiled_route();
    const auto verdict = compiled != nullptr && compiled->basic_auth
                             ? compiled->basic_auth->check(
                                   downstream_.request()[http::field::authorization], worker_.id())
                             : BasicAuthCheck::Verdict::kUnconfigured;
    if (verdict == BasicAuthCheck::Verdict::kUnconfigured) {
      respond(503, "authentication is not configured\n", incomplete);
      return false;
    }
    if (verdict == BasicAuthCheck::Verdict::kDenied) {
      challenge_ = &compiled->basic_auth->challenge();
      respond(401, "authentication required\n", incomplete);
      return false;
    }
  }
  if (p.max_body_bytes) {
    // proxy-body-size: a declared length past the limit is refused before anything goes
    // upstream; a longer body is cut off by the codec (Downstream::limit_request_body).
    auto length = downstream_.request_content_length();
    if (length && *length > *p.max_body_bytes) {
      respond(413, "request body too large\n", true);
      return false;
    }
    downstream_.limit_request_body(*p.max_body_bytes);
  }
  return true;
}

void Exchange::rewrite_upstream_request(const RequestTarget& target) {
  auto& req = downstream_.request();
  const model::RoutePolicy& p = policy();
  if (!p.rewrite_target.empty()) {
    const CompiledRoute* compiled = compiled_route();
    auto pq = target.path_and_query;
    auto question = pq.find('?');
    auto query = question == std::string_view::npos ? std::string_view{} : pq.substr(question + 1);
    req.target(rewrite_path(p.rewrite_target, compiled ? compiled->rewrite_regex.get() : nullptr,
                            target.path, query));
  }
  if (p.path_rewrite) {
    // The Gateway API's URLRewrite path: the query string stays.
    auto pq = target.path_and_query;
    auto question = pq.find('?');
    std::string rewritten =
        modify_path(*p.path_rewrite, target.path, matched_prefix_length(*route_));
    if (question != std::string_view::npos) rewritten.append(pq.substr(question));
    req.target(rewritten);
  }
  // upstream-vhost: the Host the backend sees (X-Forwarded-Host keeps the client's).
  if (!p.upstream_vhost.empty()) req.set(http::field::host, p.upstream_vhost);
  // The Gateway API's RequestHeaderModifier: after the proxy's own fields, so that it can
  // change them too (as Envoy applies request_headers_to_add last).
  if (p.request_header_modifier) apply_header_modifier(*p.request_header_modifier, req);
}

void Exchange::prepare_upstream_request() {
  auto& req = downstream_.request();
  auto expect = req[http::field::expect];
  expect_continue_ = beast::iequals(expect, "100-continue");
  if (!expect.empty()) req.erase(http::field::expect);
  // A WebSocket upgrade keeps its Upgrade and Connection fields for the upstream; any other
  // (h2c, ...) loses them with the hop-by-hop fields and goes up as a normal request.
  upgrade_ = downstream_.upgrade_requested();
  if (!upgrade_) {
    // allow-upgrade: another protocol the route lets through as an upgrade.
    const std::string_view other = downstream_.other_upgrade_requested();
    const auto& allowed = policy().upgrade_protocols;
    upgrade_ = !other.empty() && std::find(allowed.begin(), allowed.end(), other) != allowed.end();
  }
  if (upgrade_) upgrade_protocol_ = std::string(req[http::field::upgrade]);
  remove_hop_by_hop(req);
  req.version(11);
  if (upgrade_) {
    req.set(http::field::upgrade, upgrade_protocol_);
    req.set(http::field::connection, "upgrade");
  } else {
    req.keep_alive(true);
  }
  // Rules apply to bodies as sent: ask for identity so that they arrive uncompressed (no
  // Accept-Encoding means any coding is acceptable in theory, identity in practice; nginx's
  // sub_filter setups clear it the same way).
  if (substitution_.configured()) req.erase(http::field::accept_encoding);
  add_forwarded_headers(req, downstream_.peer_address(), client_https_ ? "https" : "http");
  // X-Real-IP: the client's address, as ingress-nginx sets it ($remote_addr after its real-ip
  // module): the peer, or the client a --trusted-proxies peer named. A client's own is replaced.
  if (const auto& peer_ip = downstream_.peer_ip();
      client_ip_ && peer_ip && !(*client_ip_ == *peer_ip)) {
    req.set("X-Real-IP", client_ip_->to_string());
  } else {
    req.set("X-Real-IP", downstream_.peer_address());
  }
  if (client_auth_ != nullptr) add_client_certificate_fields(req);
  ensure_request_id(req, worker_);
  if (sendfile_) {
    // x-sendfile-directories: the backend may hand files over (Rack::Sendfile reads this field,
    // as behind Thruster). A client's own X-Accel-Mapping would let it choose how Rack maps
    // paths: never forwarded on these routes.
    // Servers that map "_" to "-" (Unicorn, Thin, older Puma) would read X_Accel_Mapping as
    // the same field: every spelling goes.
    // Compared in place: '_' as '-', letters without case.
    auto is = [](std::string_view name, std::string_view want) {
      if (name.size() != want.size()) return false;
      for (size_t i = 0; i < name.size(); ++i) {
        char c = name[i] == '_' ? '-' : name[i];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (c != want[i]) return false;
      }
      return true;
    };
    for (auto it = req.begin(); it != req.end();) {
      if (is(it->name_string(), "x-accel-mapping") || is(it->name_string(), "x-sendfile-type")) {
        it = req.erase(it);
      } else {
        ++it;
      }
    }
    req.set("X-Sendfile-Type", "X-Sendfile");
  }
  // x-forwarded-prefix: the path prefix the client saw, for backends behind a rewrite.
  if (const auto& prefix = policy().forwarded_prefix; !prefix.empty()) {
    req.set("X-Forwarded-Prefix", prefix);
  }
}

// --- Balancing, attempts and retries -------------------------------------------------------

void Exchange::start_balancing() {
  balancer_ = &upstream_->balancer->worker(worker_.id());
  tried_ = {};
  timed_attempts_ = balancer_->method() == balancer::Method::kEwma;
  const auto& req = downstream_.request();
  const balancer::EndpointTable& table = balancer_->table();
  const Fields& fields = req;
  balancer::RequestView view{client_ip_.value_or(ratelimit::IpAddress()), req.target(),
                             &request_field, &fields};
  balance_key_ = balancer::request_key(table, view);
  cookie_endpoint_ = upstream_->affinity
                         ? upstream_->affinity->endpoint_for(table, req[http::field::cookie])
                         : kNoEndpoint;
}

uint32_t Exchange::pick_endpoint() {
  // affinity: the cookie's endpoint while it is in the table and untried (a failed one moves
  // the client, and the response re-pins it).
  if (cookie_endpoint_ != kNoEndpoint && !tried_.contains(cookie_endpoint_)) {
    return cookie_endpoint_;
  }
  balancer::PickContext ctx;
  ctx.tried = &tried_;
  ctx.key = &balance_key_;
  if (timed_attempts_) ctx.now = std::chrono::steady_clock::now();
  return balancer_->pick(ctx);
}

void Exchange::connect_endpoint(uint32_t index) {
  if (index >= upstream_->endpoints.size()) {  // nothing to pick from (not expected here)
    respond(503, "no endpoints available\n", !downstream_.request_complete());
    return;
  }
  ++attempts_;
  if (attempts_ == 1) {
    if (observing()) upstream_started_ = std::chrono::steady_clock::now();
    if (policy().next_upstream_timeout.count() > 0) {
      retry_deadline_ = std::chrono::steady_clock::now() + policy().next_upstream_timeout;
    }
  }
  endpoint_index_ = index;
  tried_.add(index);
  balancer_->on_start(index);
  attempt_open_ = true;
  attempt_failed_ = false;
  attempt_latency_ = std::chrono::nanoseconds(-1);
  if (timed_attempts_) attempt_started_ = std::chrono::steady_clock::now();
  const auto& ep = upstream_->endpoints[index];
  // An upgrade gets a fresh connection: it will never come back to the pool. Upgrades always
  // go over HTTP/1.1 (Extended CONNECT to backends is not implemented).
  up_.use_http2(upstream_->http2 && !upgrade_);
  if (!upgrade_ && up_.take_pooled(worker_.pool(), worker_.http2_pool(), ep, upstream_->tls_key)) {
    send_request();
    return;
  }
  if (worker_.metrics()) connect_started_ = std::chrono::steady_clock::now();
  up_.connect(worker_.http2_pool(), downstream_.executor(), *upstream_, ep,
              attempt_connect_timeout(),
              [self = downstream_.hold(), this](error_code ec) { on_connect(ec); });
}

std::chrono::milliseconds Exchange::attempt_connect_timeout() const {
  const model::RoutePolicy& p = policy();
  // attempts_ and tried_ already count this attempt.
  const bool another_left = timeout_can_move_on(p.next_upstream, p.next_upstream_tries, attempts_,
                                                tried_.size(), upstream_->endpoints.size());
  return within_deadline(another_left ? std::min(p.connect_timeout, Limits::kFailoverConnectTimeout)
                                      : p.connect_timeout);
}

std::chrono::milliseconds Exchange::read_timeout() const {
  return within_deadline(policy().read_timeout);
}

bool Exchange::past_deadline() const {
  return call_deadline_ && std::chrono::steady_clock::now() >= *call_deadline_;
}

std::chrono::milliseconds Exchange::within_deadline(std::chrono::milliseconds timeout) const {
  if (!call_deadline_) return timeout;
  // grpc-timeout: the client's deadline for the whole call caps every wait (at least 1 ms, so
  // that a deadline already past still fails through the timer, as DEADLINE_EXCEEDED).
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*call_deadline_ -
                                                                 std::chrono::steady_clock::now());
  return std::clamp(left, std::chrono::milliseconds(1), timeout);
}

void Exchange::end_attempt(bool failed) {
  if (!attempt_open_) return;
  attempt_open_ = false;
  std::chrono::nanoseconds latency(0);
  balancer::TimePoint now{};
  if (timed_attempts_) {
    // Only ewma reads latencies: the other methods cost no clock read here.
    now = std::chrono::steady_clock::now();
    latency = attempt_latency_.count() >= 0 ? attempt_latency_ : now - attempt_started_;
  }
  balancer_->on_finish(endpoint_index_, latency, failed || attempt_failed_, now);
}

RetryState Exchange::retry_state() const {
  // While every body byte read so far is in the buffer, the body can be sent again.
  const bool out_of_time = retry_deadline_ && std::chrono::steady_clock::now() >= *retry_deadline_;
  return RetryState{idempotent_, request_body_started_ && !body_replayable_, attempts_,
                    out_of_time};
}

bool Exchange::retry_on_status(unsigned status) {
  const model::NextUpstream& next = policy().next_upstream;
  if (!is_retryable_status(next, status)) return false;
  attempt_failed_ = true;  // also when it is forwarded: the balancer hears of a failure
  if (!may_retry_status(next, policy().next_upstream_tries, retry_state())) return false;
  const uint32_t index = pick_endpoint();
  if (index == kNoEndpoint) return false;  // every endpoint tried: forward this answer
  TG_DEBUG("http", "upstream " << up_.endpoint() << " answered " << status << ", retrying");
  end_attempt(true);
  // Discard the answer. A connection whose response ended with its header may serve again;
  // any other is closed rather than drained (as nginx does): draining would delay the retry.
  up_.release(worker_.pool(), worker_.snapshot().get());
  connect_endpoint(index);
  return true;
}

bool Exchange::serve_error_page(unsigned status) {
  const auto& codes = policy().error_codes;
  if (error_page_ || duplex_ || upgrade_ || grpc_ || !downstream_.request_complete() ||
      !std::binary_search(codes.begin(), codes.end(), status)) {
    return false;
  }
  const runtime::UpstreamState* pages = snapshot_->upstream(route_->fallback_upstream);
  if (pages == nullptr || pages->endpoints.empty()) return false;
  TG_DEBUG("http", "upstream " << up_.endpoint() << " answered " << status
                               << ", asking the default backend for its page");
  end_attempt(false);
  up_.release(worker_.pool(), worker_.snapshot().get());
  error_page_ = true;
  // As ingress-nginx asks its default backend: GET (HEAD stays HEAD), no body, and what the
  // page needs to know.
  auto& req = downstream_.request();
  if (req.method() != http::verb::head) req.method(http::verb::get);
  req.erase(http::field::content_length);
  req.erase(http::field::transfer_encoding);
  req.set("X-Code", std::to_string(status));
  const std::string accept(req[http::field::accept]);
  req.set("X-Format", accept.empty() ? std::string_view("text/html") : std::string_view(accept));
  req.set("X-Original-URI", original_target_);
  const std::string_view ingress = route_->ingress;
  const auto slash = ingress.find('/');
  if (slash != std::string_view::npos) {
    req.set("X-Namespace", ingress.substr(0, slash));
    req.set("X-Ingress-Name", ingress.substr(slash + 1));
  }
  // Upstream names are "namespace/service:port" (+h2, +https).
  std::string_view service = route_->upstream;
  service = service.substr(service.find('/') + 1);
  const auto colon = service.find(':');
  if (colon != std::string_view::npos) {
    std::string_view port = service.substr(colon + 1);
    port = port.substr(0, port.find('+'));
    req.set("X-Service-Name", service.substr(0, colon));
    req.set("X-Service-Port", port);
  }
  head_request_ = req.method() == http::verb::head;
  request_body_started_ = false;
  body_bytes_in_buffer_ = 0;
  body_replayable_ = true;
  attempts_ = 0;
  retry_deadline_.reset();
  upstream_ = pages;
  start_balancing();
  const uint32_t index = pick_endpoint();
  if (index == kNoEndpoint) {
    respond(503, "no endpoints available\n", false);
    return true;
  }
  connect_endpoint(index);
  return true;
}

void Exchange::upstream_failed(error_code ec, const char* stage) {
  const bool reused = up_.retry_safe();
  auto endpoint = up_.endpoint();
  up_.drop();
  AttemptFailure failure;
  failure.timed_out = ec == beast::error::timeout;
  failure.nothing_sent =
      std::string_view(stage) == "connect" || std::string_view(stage) == "TLS handshake";
  failure.reused = reused;
  const RetryDecision decision = decide_after_failure(
      policy().next_upstream, policy().next_upstream_tries, retry_state(), failure);
  if (decision == RetryDecision::kSameEndpoint) {
    // A stale pooled connection is not the endpoint's fault: the same endpoint again, on
    // another connection, without counting an attempt.
    TG_DEBUG("http", "upstream " << endpoint << " " << stage << " failed on a pooled connection ("
                                 << ec.message() << "), retrying");
    --attempts_;
    end_attempt(false);
    connect_endpoint(endpoint_index_);
    return;
  }
  end_attempt(true);
  // Another endpoint, never one this request tried: with every endpoint tried the answer is the
  // error, as nginx gives once its tries exceed the servers.
  const uint32_t index = decision == RetryDecision::kNextEndpoint ? pick_endpoint() : kNoEndpoint;
  if (index != kNoEndpoint) {
    TG_DEBUG("http", "upstream " << endpoint << " " << stage << " failed (" << ec.message()
                                 << "), retrying");
    connect_endpoint(index);
    return;
  }
  TG_WARN("http", "upstream " << endpoint << " " << stage << " failed: " << ec.message());
  // custom-http-errors also covers the proxy's own 502 and 504, as nginx's error_page does.
  if (!policy().error_codes.empty() && serve_error_page(failure.timed_out ? 504 : 502)) return;
  if (failure.timed_out) {
    respond(504, "upstream timed out\n", true);
  } else {
    respond(502, "upstream unavailable\n", true);
  }
}

void Exchange::add_affinity_cookie(ResponseMessage& res) {
  // affinity: cookie. Pin the client to the endpoint that answered unless its cookie already
  // names that one.
  if (!upstream_->affinity || endpoint_index_ == cookie_endpoint_) return;
  res.insert(http::field::set_cookie,
             upstream_->affinity->set_cookie(balancer_->table(), endpoint_index_,
                                             runtime::affinity_cookie_path(*upstream_, route_)));
}

// --- The request upstream ------------------------------------------------------------------

void Exchange::on_connect(error_code ec) {
  if (cancelled_) return;  // the client side ended the exchange: nothing to act on
  if (ec) {
    upstream_failed(ec, "connect");
    return;
  }
  if (auto* m = worker_.metrics()) {
    m->record_upstream_connect(labels(), std::chrono::steady_clock::now() - connect_started_);
  }
  up_.connected();
  if (up_.needs_handshake(*upstream_)) {
    up_.handshake(*upstream_, within_deadline(policy().connect_timeout),
                  [self = downstream_.hold(), this](error_code ec) {
                    if (cancelled_) return;
                    if (ec) {
                      upstream_failed(ec, "TLS handshake");
                      return;
                    }
                    send_request();
                  });
    return;
  }
  send_request();
}

void Exchange::send_request() {
  up_.start_request(downstream_.request(), &fields_arena_,
                    worker_.limits().max_response_header_bytes, head_request_);
  response_pump_started_ = false;
  if (request_body_started_) {
    // Another attempt (retry_state() allowed it): what was read of the body is still in the
    // buffer; it goes first, then the rest as it comes. A read of the last attempt still
    // pending is dropped (its bytes will be read again into the right place).
    downstream_.cancel_request_body_read();
    write_request(request_buffer().data(), body_bytes_in_buffer_, downstream_.request_complete());
    return;
  }
  if (downstream_.request_complete()) {
    write_request(nullptr, 0, true);
    return;
  }
  // HTTP/2 on both sides: the request and the response flow side by side (streaming calls).
  // The stream opens now, before any body byte, since the backend may speak first.
  duplex_ = up_.http2() && downstream_.http_version() >= 20;
  if (duplex_) {
    expect_continue_ = false;  // HTTP/2 clients do not wait for a 100 here
    write_request(nullptr, 0, false);
    return;
  }
  if (expect_continue_ && !request_body_started_) {
    // We took over the client's Expect: tell it to go on now that an upstream is ready.
    expect_continue_ = false;
    downstream_.send_continue();
    return;
  }
  read_request_body();
}

void Exchange::on_continue_sent(error_code ec) {
  if (ec) {
    downstream_.close();
    return;
  }
  read_request_body();
}

std::span<char> Exchange::request_buffer() {
  if (!duplex_) return relay_buffer_;
  // The response uses the relay buffer at the same time.
  if (!duplex_buffer_) duplex_buffer_ = std::make_unique<std::array<char, kDuplexBufferBytes>>();
  return *duplex_buffer_;
}

void Exchange::read_request_body() {
  request_body_started_ = true;
  auto buffer = request_buffer();
  if (body_replayable_) {
    // Every byte so far is in the relay buffer from its start: the next ones go after them,
    // while they fit, so that the whole body can be sent again (see retry_state()).
    if (body_bytes_in_buffer_ < buffer.size()) {
      buffer = buffer.subspan(body_bytes_in_buffer_);
    } else {
      body_replayable_ = false;
    }
  }
  read_to_ = buffer.data();
  downstream_.read_request_body(buffer.data(), buffer.size());
}

void Exchange::on_request_body(std::size_t n) {
  // A duplex exchange's response may have ended the attempt while the body was read.
  if (duplex_ && (cancelled_ || !up_.attached())) return;
  const bool complete = downstream_.request_complete();
  if (body_replayable_) body_bytes_in_buffer_ += n;
  bytes_in_ += n;
  if (mirror_body_wanted_) {
    if (mirror_body_.size() + n > Limits::kMaxMirrorBodyBytes) {
      skip_mirrors();  // longer than a mirror takes (a chunked body): not mirrored
    } else {
      mirror_body_.append(read_to_, n);
      if (complete) send_mirrors();
    }
  }
  write_request(read_to_, n, complete);
}

void Exchange::write_request(const char* data, std::size_t n, bool last) {
  // An HTTP/2 upstream gets the client's request trailers after the last DATA.
  if (last && up_.http2()) up_.set_request_trailers(&downstream_.request_trailers());
  if (past_deadline()) return on_write_request(beast::error::timeout);
  up_.write(data, n, last, within_deadline(policy().send_timeout),
            [self = downstream_.hold(), this](error_code ec) { on_write_request(ec); });
}

void Exchange::on_write_request(error_code ec) {
  if (cancelled_) return;  // the client side ended the exchange: nothing to act on
  if (ec) {
    upstream_failed(ec, "send");
    return;
  }
  if (duplex_) {
    // Two pumps: the response is read from the first write on; request bytes that flow keep
    // the wait for it alive.
    if (!response_pump_started_) {
      response_pump_started_ = true;
      read_response_header();
    } else {
      up_.touch_read(read_timeout());
    }
    if (!up_.request_sent()) read_request_body();
    return;
  }
  if (!up_.request_sent()) {
    read_request_body();
    return;
  }
  read_response_header();
}

// --- The response --------------------------------------------------------------------------

void Exchange::read_response_header() {
  if (past_deadline()) return on_response_header(beast::error::timeout);
  up_.read_header(&fields_arena_, worker_.limits().max_response_header_bytes, head_request_,
                  read_timeout(),
                  [self = downstream_.hold(), this](error_code ec) { on_response_header(ec); });
}

void Exchange::on_response_header(error_code ec) {
  if (cancelled_) return;  // the client side ended the exchange: nothing to act on
  if (ec) {
    upstream_failed(ec, "response header");
    return;
  }
  auto& res = up_.response();
  if (const ResponseVerdict v = up_.check_response(); v.status != 0) {
    // Ambiguous framing from a backend is never relayed (server/http1_policy.h).
    TG_WARN("http", "upstream " << up_.endpoint() << ": " << v.reason);
    end_attempt(true);
    up_.drop();
    if (!policy().error_codes.empty() && serve_error_page(502)) return;
    respond(502, "upstream sent a malformed response\n", !downstream_.request_complete());
    return;
  }
  unsigned status = res.result_int();
  if (timed_attempts_ && attempt_latency_.count() < 0) {
    attempt_latency_ = std::chrono::steady_clock::now() - attempt_started_;
  }
  if (status >= 502 && status <= 504 && retry_on_status(status)) return;
  if (status >= 400 && !policy().error_codes.empty() && serve_error_page(status)) return;
  if (status < 100 || status >= 200 || status == 101) {
    status_sent_ = status;
    upstream_endpoint_ = up_.endpoint();
    if (observing()) upstream_answered_ = std::chrono::steady_clock::now();
  }
  if (status == 101) {
    end_cache_fill();
    if (!upgrade_ || up_.http2()) {
      end_attempt(true);
      up_.drop();
      respond(502, "upstream switched protocols unexpectedly\n", true);
      return;
    }
    auto protocol = std::string(res[http::field::upgrade]);
    remove_hop_by_hop(res);
    res.set(http::field::upgrade, protocol.empty() ? upgrade_protocol_ : protocol);
    res.set(http::field::connection, "upgrade");
    res.version(11);
    add_affinity_cookie(res);
    response_started_ = true;
    downstream_.send_upgrade(res);
    return;
  }
  if (status >= 100 && status < 200) {
    // Interim responses (103 Early Hints, a stray 100) are not forwarded yet; read the final one.
    read_response_header();
    return;
  }
  if (sendfile_ && serve_file(res)) return;
  remove_hop_by_hop(res);
  note_grpc_status(res);
  ResponseBody body;
  body.expected = !head_request_ && status != 204 && status != 304;
  // An HTTP/2 response that ended with its head (a gRPC trailers-only response) goes to an
  // HTTP/2 client as one HEADERS frame; an HTTP/1.1 client gets an empty body.
  if (up_.ended_with_head() && downstream_.http_version() >= 20) body.expected = false;
  const auto content_length = up_.response_content_length();
  body.framed = up_.response_chunked() || content_length.has_value();
  body.chunked = up_.response_chunked();
  ResponseFilterContext context;
  context.status = status;
  context.body_expected = body.expected;
  if (content_length) context.content_length = *content_length;
  context.client_version = downstream_.http_version();
  context.route_labels = route_labels();
  // A filter that takes the body rewrites the head to match (length, validators).
  body.transformed = filters_.on_headers(res, context);
  // A substituted body is read in larger pieces (kSubstitutionReadBytes).
  if (substitution_.substituting()) up_.widen_reads(kSubstitutionReadBytes);
  if (cache_state_ != CacheState::kOff) {
    start_cache_capture(res, status, body.expected,
                        body.transformed ? std::nullopt : content_length);
  }
  add_response_fields(res, status);
  if (!body.expected) {
    // HEAD, 204 and 304 carry no body whatever their framing fields say: the head goes alone.
    response_started_ = true;
    downstream_.send_response_head(res, body);
    return;
  }
  downstream_.send_response_head(res, body);
  relay_response();
}

void Exchange::add_response_fields(ResponseMessage& res, unsigned status) {
  // custom-headers: set on the backend's responses (not on the proxy's own answers).
  for (const auto& h : policy().response_headers) res.set(h.name, h.value);
  // The Gateway API's ResponseHeaderModifier.
  if (const auto& m = policy().response_header_modifier) apply_header_modifier(*m, res);
  add_cors_fields(res);
  add_hsts(res);
  add_affinity_cookie(res);
  if (!auth_cookies_.empty() && (status < 400 || policy().external_auth->always_set_cookie)) {
    for (const auto& cookie : auth_cookies_) res.insert(http::field::set_cookie, cookie);
  }
}

void Exchange::on_response_head_sent(error_code ec, std::size_t n) {
  bytes_out_ += n;
  if (ec) {
    client_failed();
    return;
  }
  finish();
}

void Exchange::relay_response() {
  if (filters_.active()) {
    if (!up_.response_done()) {
      read_response_body();
      return;
    }
    filters_.on_data({}, true);  // the whole body came with the header
    pump_filters();
    return;
  }
  if (up_.response_done()) {
    write_response(nullptr, 0, true);
    return;
  }
  read_response_body();
}

void Exchange::read_response_body() {
  // A read that finds its bytes already buffered completes before any timer: the deadline is
  // checked here too, so that a fast stream cannot outrun it.
  if (past_deadline()) return on_read_response_body(beast::error::timeout, 0, false);
  // A filter that keeps a window of its input (substitution) has the body read straight into it:
  // one copy less per byte than reading into the relay buffer and handing that over.
  std::span<char> into =
      filters_.active() ? filters_.data_space(kSubstitutionReadBytes) : std::span<char>();
  const bool in_place = !into.empty();
  if (!in_place) into = relay_buffer_;
  up_.read_body(into.data(), into.size(), read_timeout(),
                [self = downstream_.hold(), this, in_place](error_code ec, std::size_t n) {
                  on_read_response_body(ec, n, in_place);
                });
}

void Exchange::on_read_response_body(error_code ec, std::size_t n, bool in_place) {
  if (cancelled_) return;  // the client side ended the exchange: nothing to act on
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    TG_WARN("http", "upstream " << upstream_endpoint_ << " failed mid-body: " << ec.message());
    end_attempt(true);
    up_.drop();
    if (!response_started_) {
      respond(502, "upstream failed\n", true);
    } else {
      downstream_.close();  // the status line is out; only closing tells the client
    }
    return;
  }
  const bool done = up_.response_done();
  if (n == 0 && !done) {
    // Only framing was read (a chunk's size line): substituted output gathered while bytes were
    // waiting goes out before a read that may wait (see pump_filters).
    if (substitution_.substituting() && !filters_.output().empty()) {
      write_filtered(false);  // then the next read
      return;
    }
    read_response_body();
    return;
  }
  if (filters_.active()) {
    if (in_place) {
      filters_.commit_data(n, done);
    } else {
      filters_.on_data(std::string_view(relay_buffer_.data(), n), done);
    }
    pump_filters();
    return;
  }
  write_response(relay_buffer_.data(), n, done);
}

void Exchange::write_response(const char* data, std::size_t n, bool last) {
  if (cache_capture_) capture_body(data, n, last);
  response_started_ = true;
  last_sent_ = last;
  if (last && !up_.trailers().empty()) {
    note_grpc_trailers(up_.trailers());
    downstream_.set_response_trailers(up_.trailers());
  }
  downstream_.send_response_body(data, n, last);
}

void Exchange::on_response_body_sent(error_code ec, std::size_t n) {
  bytes_out_ += n;  // a filtered body counts as written (the filter's output)
  if (ec) {
    client_failed();
    return;
  }
  if (file_) {
    if (last_sent_) {
      file_.reset();
      finish();
    } else {
      send_file_part();
    }
    return;
  }
  if (filters_.active()) {
    filters_.output().clear();
    if (last_sent_) {
      filters_.on_end();
      finish();
    } else if (filter_more_) {
      pump_filters();
    } else {
      read_response_body();
    }
    return;
  }
  if (!last_sent_) {
    read_response_body();
    return;
  }
  finish();
}

void Exchange::pump_filters() {
  if (cancelled_) return;  // the client side ended the exchange: nothing to act on
  const bool more = filters_.process();
  const std::size_t pending = filters_.output().size();
  const bool done = filters_.done();
  // A compressed body is gathered into larger writes (CompressionFilter::kMinWriteBytes); a
  // substituted one too, while its next input is at hand (queued, or readable from the upstream
  // without waiting): what is pending goes out before a read that may wait. Asked only when
  // there is output and more to come (the upstream's answer costs a system call).
  const bool gather =
      pending != 0 && !done &&
      ((compression_.compressing() && pending < CompressionFilter::kMinWriteBytes) ||
       (substitution_.substituting() && pending < kSubstitutionWriteBytes &&
        (more || up_.body_bytes_waiting())));
  if ((pending != 0 && !gather) || done) {
    write_filtered(more);
    return;
  }
  if (more) {
    // Nothing to write yet and input left: let the worker's other connections run first.
    asio::post(downstream_.executor(), [self = downstream_.hold(), this] { pump_filters(); });
    return;
  }
  read_response_body();  // everything queued is processed; the rest is held for more input
}

void Exchange::write_filtered(bool more) {
  filter_more_ = more;
  const std::string& out = filters_.output();
  write_response(out.data(), out.size(), filters_.done());
}

void Exchange::client_failed() {
  up_.drop();  // the upstream response is unfinished: not reusable
  downstream_.close();
}

void Exchange::finish() {
  end_attempt(false);
  end_observation();
  // The upstream connection goes back to the pool only if it is clean and its endpoint is still
  // configured in the worker's *current* snapshot (an endpoint that left gets no new requests).
  up_.release(worker_.pool(), worker_.snapshot().get());
  downstream_.exchange_finished();
}

// --- Answers of the proxy's own --------------------------------------------------------------

void Exchange::respond(unsigned status, std::string_view text, bool close,
                       std::string_view location, long retry_after_seconds) {
  end_attempt(false);  // ended by the request (a body error), not by the endpoint
  if (grpc_) {
    respond_grpc(status, text);
    return;
  }
  auto& res =
      local_response_.emplace(static_cast<http::status>(status), downstream_.http_version());
  if (!location.empty()) res.set(http::field::location, location);
  if (retry_after_seconds > 0)
    res.set(http::field::retry_after, std::to_string(retry_after_seconds));
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.set(http::field::server, "tidegate");
  if (challenge_ != nullptr && status == 401) res.set(http::field::www_authenticate, *challenge_);
  for (const auto& [name, value] : local_fields_) res.insert(name, value);
  add_cors_fields(res);  // a browser then sees the proxy's error instead of a CORS failure
  add_hsts(res);         // and the host stays HTTPS-only whatever the answer (nginx's "always")
  res.body().assign(text.data(), text.size());
  res.prepare_payload();
  if (head_request_) res.body().clear();
  write_local_response(close);
}

void Exchange::respond_grpc(unsigned status, std::string_view text) {
  // gRPC clients read errors from grpc-status, not from the HTTP status: a trailers-only
  // response (HTTP 200, one HEADERS frame that ends the stream) with the gRPC code that the
  // answer means (docs/proxy.md, "gRPC clients").
  const GrpcStatus code = grpc_code_ ? *grpc_code_ : grpc_status_for_http(status);
  auto& res = local_response_.emplace(http::status::ok, downstream_.http_version());
  res.set(http::field::content_type, "application/grpc");
  res.set("grpc-status", std::to_string(static_cast<int>(code)));
  grpc_status_sent_ = static_cast<int>(code);
  res.set("grpc-message", grpc_percent_encode(text));
  res.set(http::field::server, "tidegate");
  add_cors_fields(res);
  add_hsts(res);
  response_started_ = true;
  status_sent_ = status;  // observed as the answer it stands for (access log, metrics)
  downstream_.send_local_response(res, false);
}

namespace {
// A grpc-status value: 0..99, or -1.
int grpc_code(std::string_view v) {
  int code = 0;
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), code);
  return !v.empty() && ec == std::errc() && ptr == v.data() + v.size() && code >= 0 && code <= 99
             ? code
             : -1;
}
}  // namespace

bool Exchange::observes_grpc_status() const {
  if (!grpc_) return false;
  if (worker_.metrics() != nullptr) return true;  // tidegate_grpc_responses_total
  auto* log = worker_.access_log();
  return log != nullptr && log->wants(observability::LogField::kGrpcStatus);
}

void Exchange::note_grpc_status(const ResponseMessage& res) {
  // A backend's trailers-only response carries grpc-status in its head; otherwise it comes in
  // the trailers (note_grpc_trailers). Looked up only when the metrics or the log show it.
  if (!observes_grpc_status()) return;
  if (const int code = grpc_code(res["grpc-status"]); code >= 0) grpc_status_sent_ = code;
}

void Exchange::note_grpc_trailers(const TrailerFields& trailers) {
  if (!observes_grpc_status()) return;
  for (const auto& [name, value] : trailers) {
    if (name != "grpc-status") continue;
    if (const int code = grpc_code(value); code >= 0) grpc_status_sent_ = code;
  }
}

void Exchange::write_local_response(bool close) {
  response_started_ = true;
  status_sent_ = local_response_->result_int();
  downstream_.send_local_response(*local_response_, close);
}

void Exchange::on_local_response_sent(std::size_t n) {
  bytes_out_ += n;
  end_observation();
}

bool Exchange::on_upgrade_sent(error_code ec, std::size_t n) {
  bytes_out_ += n;
  if (ec) return false;
  end_observation();  // the exchange is the 101
  return true;
}

bool Exchange::apply_cors() {
  const CompiledRoute* compiled = compiled_route();
  if (compiled == nullptr || !compiled->cors) return false;
  auto& req = downstream_.request();
  auto origin = req[http::field::origin];
  if (!compiled->cors->allows(origin)) {
    // No CORS fields. A preflight goes upstream, unless the route's CORS answers every one
    // (the Gateway API's filter): then 204 without them, which the browser reads as a refusal.
    if (!compiled->cors->answers_every_preflight() || origin.empty() ||
        req.method() != http::verb::options ||
        req.find(http::field::access_control_request_method) == req.end()) {
      return false;
    }
    auto& res = local_response_.emplace(http::status::no_content, downstream_.http_version());
    res.set(http::field::server, "tidegate");
    write_local_response(!downstream_.request_complete());
    return true;
  }
  cors_ = &*compiled->cors;
  cors_origin_.assign(origin.data(), origin.size());
  if (req.method() != http::verb::options ||
      req.find(http::field::access_control_request_method) == req.end()) {
    return false;
  }
  // A preflight from an allowed origin: answered here, 204 with what may be sent.
  auto& res = local_response_.emplace(http::status::no_content, downstream_.http_version());
  add_cors_fields(res);
  if (auto methods = cors_->allow_methods(req[http::field::access_control_request_method]);
      !methods.empty()) {
    res.set(http::field::access_control_allow_methods, methods);
  }
  if (auto headers = cors_->allow_headers(req[http::field::access_control_request_headers]);
      !headers.empty()) {
    res.set(http::field::access_control_allow_headers, headers);
  }
  res.set(http::field::access_control_max_age, cors_->max_age());
  res.set(http::field::server, "tidegate");
  write_local_response(!downstream_.request_complete());
  return true;
}

template <class Fields>
void Exchange::add_hsts(http::header<false, Fields>& res) const {
  if (!client_https_ || route_ == nullptr) return;
  const CompiledRoute* compiled = compiled_route();
  if (compiled == nullptr || compiled->hsts.empty()) return;
  res.set(http::field::strict_transport_security, compiled->hsts);
}

template <class Fields>
void Exchange::add_cors_fields(http::header<false, Fields>& res) const {
  if (cors_ == nullptr || cors_origin_.empty()) return;
  res.set(http::field::access_control_allow_origin, cors_->allow_origin_value(cors_origin_));
  if (cors_->credentials()) res.set(http::field::access_control_allow_credentials, "true");
  if (!cors_->expose_headers().empty()) {
    res.set(http::field::access_control_expose_headers, cors_->expose_headers());
  }
  if (cors_->varies_by_origin()) {
    // Keep what the backend varies by and add Origin (caches must not mix origins).
    auto vary = res[http::field::vary];
    if (vary.empty()) {
      res.set(http::field::vary, "Origin");
    } else if (vary.find("Origin") == std::string_view::npos && vary != "*") {
      std::string joined(vary);
      joined += ", Origin";
      res.set(http::field::vary, joined);
    }
  }
}

const runtime::UpstreamState* Exchange::choose_upstream() {
  if (!route_->backends.empty()) {
    // Gateway API weighted backendRefs: each worker's turns spread over the weights.
    const CompiledRoute* compiled = compiled_route();
    const uint64_t turn = compiled != nullptr ? compiled->next_canary_turn(worker_.id()) : 0;
    const model::WeightedBackend* b = pick_weighted_backend(route_->backends, turn);
    if (b == nullptr || b->upstream.empty()) {
      no_backend_ = true;
      return nullptr;
    }
    return snapshot_->upstream(b->upstream);
  }
  if (route_->upstream.empty()) {
    no_backend_ = true;
    return nullptr;
  }
  const auto& canary = route_->canary;
  if (!canary) return snapshot_->upstream(route_->upstream);
  auto& req = downstream_.request();
  std::optional<std::string_view> header_value, cookie_value;
  if (!canary->header.empty()) {
    if (auto it = req.find(canary->header); it != req.end()) header_value = it->value();
  }
  if (!canary->cookie.empty()) {
    auto [first, last] = req.equal_range(http::field::cookie);
    for (auto it = first; it != last; ++it) {
      auto v = balancer::find_cookie(it->value(), canary->cookie);
      if (!v.empty()) {
        cookie_value = v;
        break;
      }
    }
  }
  const CompiledRoute* compiled = compiled_route();
  auto choice = canary_by_request(*canary, header_value, cookie_value,
                                  compiled != nullptr ? compiled->canary_pattern.get() : nullptr);
  if (choice == CanaryChoice::kUndecided) {
    uint64_t turn = compiled != nullptr ? compiled->next_canary_turn(worker_.id()) : 0;
    choice = canary_by_weight(turn, canary->weight, canary->weight_total) ? CanaryChoice::kCanary
                                                                          : CanaryChoice::kMain;
  }
  if (choice == CanaryChoice::kCanary) {
    // A canary without endpoints never fails requests the main backend can serve.
    const auto* c = snapshot_->upstream(canary->upstream);
    if (c != nullptr && !c->endpoints.empty()) {
      canary_chosen_ = true;
      return c;
    }
  }
  return snapshot_->upstream(route_->upstream);
}

const CompiledRoute* Exchange::compiled_route() const {
  return routes_ ? routes_->find(route_) : nullptr;
}

observability::LabelSetId Exchange::route_labels() const {
  const CompiledRoute* c = compiled_route();
  return c != nullptr ? c->labels : observability::kNoRouteLabels;
}

observability::LabelSetId Exchange::labels() const {
  const CompiledRoute* c = compiled_route();
  if (c == nullptr) return observability::kNoRouteLabels;
  return canary_chosen_ ? c->canary_labels : c->labels;
}

// --- Ends, tunnels ---------------------------------------------------------------------------

void Exchange::end() {
  cancelled_ = true;
  end_attempt(false);
  end_auth_attempt(false);
  upstream::discard(auth_up_.connection());
  tunnel_balancer_.reset();
  end_observation();  // an exchange cut short is still recorded
}

void Exchange::end_and_release() {
  cancelled_ = true;
  end_attempt(false);
  end_auth_attempt(false);
  upstream::discard(auth_up_.connection());
  end_observation();
  snapshot_.reset();
  routes_.reset();
  up_.drop();  // an upstream connection, if one was in use, is not needed any more
}

std::chrono::milliseconds Exchange::enter_tunnel() {
  // proxy-read-timeout of the route that admitted it: kept, as the route may go away.
  const auto idle = policy().read_timeout;
  // The attempt lasts as long as the tunnel (least_conn counts it); its balancer must outlive
  // the snapshot, which the tunnel lets go.
  if (attempt_open_) tunnel_balancer_ = upstream_->balancer;
  route_ = nullptr;
  snapshot_.reset();
  routes_.reset();
  upstream_ = nullptr;
  return idle;
}

// --- Observation: metrics and the access log ---------------------------------------------

bool Exchange::observing() const {
  return worker_.metrics() != nullptr || worker_.access_log() != nullptr;
}

void Exchange::end_observation() {
  end_cache_fill();  // however the exchange ended, its fill is over
  if (!exchange_open_) return;
  exchange_open_ = false;
  connection_lease_.reset();
  if (!observing()) return;
  auto now = std::chrono::steady_clock::now();
  auto upstream_duration = upstream_answered_ == std::chrono::steady_clock::time_point{}
                               ? std::chrono::nanoseconds(-1)
                               : std::chrono::nanoseconds(upstream_answered_ - upstream_started_);
  const auto& req = downstream_.request();
  if (auto* m = worker_.metrics()) {
    m->record_request({labels(), req.method(), status_sent_, bytes_in_, bytes_out_, now - started_,
                       upstream_duration, downstream_.http_version() >= 20,
                       grpc_ ? grpc_status_sent_ : -1});
  }
  auto* log = worker_.access_log();
  if (log == nullptr || (route_ != nullptr && !route_->policy->access_log)) return;
  observability::AccessLogRecord r;
  r.time = started_wall_;
  r.request_id = req["X-Request-ID"];
  r.peer = downstream_.peer_address();
  r.client = downstream_.peer_address();
  // The client behind a trusted proxy, as $remote_addr is with nginx's realip module.
  char client_text[ratelimit::IpAddress::kMaxTextBytes];
  const auto& peer_ip = downstream_.peer_ip();
  if (client_ip_ && peer_ip && !(*client_ip_ == *peer_ip)) {
    r.client = std::string_view(client_text, client_ip_->format(client_text));
  }
  r.method = req.method_string();
  r.host = req[http::field::host];
  auto target = req.target();
  r.path = target.substr(0, target.find('?'));
  r.status = status_sent_;
  r.bytes_in = bytes_in_;
  r.bytes_out = bytes_out_;
  r.duration = now - started_;
  r.upstream_duration = upstream_duration;
  r.http_version = downstream_.http_version();  // the client's (the request goes up as 1.1)
  if (log->wants(observability::LogField::kUserAgent)) r.user_agent = req[http::field::user_agent];
  if (log->wants(observability::LogField::kReferer)) r.referer = req[http::field::referer];
  if (log->wants(observability::LogField::kGrpcService) ||
      log->wants(observability::LogField::kGrpcMethod) ||
      log->wants(observability::LogField::kGrpcStatus)) {
    r.grpc = grpc_;
    if (r.grpc) r.grpc_status = grpc_status_sent_;
  }
  char upstream[64];
  if (upstream_endpoint_.port() != 0) {
    r.upstream = observability::format_endpoint(upstream_endpoint_, upstream);
  }
  if (route_ != nullptr) {
    r.ingress = route_->ingress;
    r.service = route_->upstream;
  }
  log->log(r);
}

}  // namespace tidegate::dataplane::server
