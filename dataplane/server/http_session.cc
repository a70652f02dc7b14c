#include "server/http_session.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <limits>

#include <boost/asio/write.hpp>

#include "balancer/request_view.h"
#include "log/log.h"
#include "ratelimit/client_address.h"
#include "server/canary.h"
#include "server/headers.h"
#include "server/http1_policy.h"
#include "server/substitution.h"
#include "server/worker.h"

namespace tidegate::dataplane::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {
// Boost 1.74's parser compares lengths against an optional limit, and boost::none compares as
// less than every length, so "no limit" must be the largest value instead.
constexpr std::uint64_t kUnlimitedBody = std::numeric_limits<std::uint64_t>::max();

// The policy of requests that matched no route: the defaults (equal to server::Limits).
const model::RoutePolicy kDefaultPolicy{};

// RequestView::header over the request's fields (names given in lower case; Beast compares
// case-insensitively).
std::string_view request_field(const void* context, std::string_view name) {
  const auto& fields = *static_cast<const Fields*>(context);
  auto it = fields.find(name);
  return it == fields.end() ? std::string_view() : it->value();
}

// X-Forwarded-For lines read for the client address; past it only the last ones (the hops
// nearest to us) are read.
constexpr size_t kMaxForwardedForLines = 16;

std::string_view host_without_port(std::string_view host) {
  if (!host.empty() && host.front() == '[') {
    auto close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(0, close + 1);
  }
  auto colon = host.find(':');
  return colon == std::string_view::npos ? host : host.substr(0, colon);
}
}  // namespace

template <class S>
HttpSession<S>::HttpSession(Worker& worker, runtime::Socket socket,
                            const asio::ip::tcp::endpoint& peer, asio::ssl::context* tls)
    : worker_(worker), client_(make_client(std::move(socket), tls)) {
  client_buffer_.reserve(Limits::kClientReadBufferBytes);
  const asio::ip::address address = peer.address();
  if (address.is_v4()) {
    // IpAddress formats IPv4 by hand: asio's to_string goes through inet_ntop (sprintf).
    peer_ip_ = ratelimit::IpAddress::v4(address.to_v4().to_uint());
    peer_address_ = peer_ip_->to_string();
  } else {
    peer_address_ = address.to_string();
    peer_ip_ = ratelimit::IpAddress::parse(peer_address_);
  }
  worker_.active_connections.fetch_add(1, std::memory_order_relaxed);
  if (auto* m = worker_.metrics()) m->connection_opened();
  worker_.add_session(this);
}

template <class S>
HttpSession<S>::~HttpSession() {
  end_attempt(false);
  worker_.active_connections.fetch_sub(1, std::memory_order_relaxed);
  if (auto* m = worker_.metrics()) m->connection_closed();
  worker_.remove_session(this);
}

template <class S>
void HttpSession<S>::start() {
  if constexpr (kTls) {
    // The SNI callback finds the worker (and through it the current snapshot) here.
    SSL_set_ex_data(client_.native_handle(), Worker::ssl_ex_index(), &worker_);
    lowest().expires_after(worker_.limits().tls_handshake_timeout);
    client_.async_handshake(
        asio::ssl::stream_base::server,
        [self = this->shared_from_this()](error_code ec) { self->on_handshake(ec); });
  } else {
    do_read_header();
  }
}

template <class S>
void HttpSession<S>::on_handshake(error_code ec) {
  if (ec) {
    worker_.tls_handshake_failures.fetch_add(1, std::memory_order_relaxed);
    if (auto* m = worker_.metrics()) m->tls_handshake(false);
    TG_DEBUG("tls", "handshake with " << peer_address_ << " failed: " << ec.message());
    close_client();
    return;
  }
  worker_.tls_handshakes.fetch_add(1, std::memory_order_relaxed);
  if (auto* m = worker_.metrics()) m->tls_handshake(true);
  do_read_header();
}

template <class S>
void HttpSession<S>::drain() {
  draining_ = true;
  if ((state_ == State::kIdle && client_buffer_.size() == 0) || state_ == State::kLingering) {
    close_client();
  }
}

template <class S>
void HttpSession<S>::close_now() {
  if (state_ == State::kTunnel) {
    end_tunnel();  // keeps the tunnel count right
    return;
  }
  connection_.reset();
  close_client();
}

template <class S>
void HttpSession<S>::do_read_header() {
  if (draining_) {
    close_client();
    return;
  }
  state_ = State::kIdle;
  response_.reset();
  request_.reset();
  fields_arena_.release();
  request_.emplace(std::piecewise_construct, std::make_tuple(),
                   std::make_tuple(FieldsAllocator(&fields_arena_)));
  request_->header_limit(static_cast<std::uint32_t>(worker_.limits().max_request_header_bytes));
  request_->body_limit(kUnlimitedBody);  // bodies stream; per-route limits come with annotations
  error_response_.reset();
  end_attempt(false);
  snapshot_.reset();
  upstream_ = nullptr;
  attempts_ = 0;
  request_body_started_ = false;
  response_started_ = false;
  expect_continue_ = false;
  upgrade_ = false;
  upgrade_allowed_ = false;
  substitution_ = nullptr;
  sub_stream_.reset();
  cors_ = nullptr;
  cors_origin_.clear();
  lowest().expires_after(worker_.limits().client_header_timeout);
  http::async_read_header(client_, client_buffer_, *request_,
                          [self = this->shared_from_this()](error_code ec, std::size_t n) {
                            self->on_read_header(ec, n);
                          });
}

template <class S>
void HttpSession<S>::on_read_header(error_code ec, std::size_t header_bytes) {
  if (ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::eof ||
        ec == asio::error::operation_aborted) {
      close_client();
      return;
    }
    if (ec == http::error::header_limit) {
      // A request line over its own limit is 414, not 431 (docs/proxy.md, "Strict HTTP/1.1").
      if (header_overflow_status(request_->get(), worker_.limits().request_rules) == 414) {
        send_error(414, "request target too long\n", true);
      } else {
        send_error(431, "request header fields too large\n", true);
      }
      return;
    }
    if (is_http_parse_error(ec)) {
      send_error(400, "bad request\n", true);
      return;
    }
    close_client();
    return;
  }
  state_ = State::kBusy;
  worker_.total_requests.fetch_add(1, std::memory_order_relaxed);
  begin_observation(header_bytes);
  handle_request();
}

template <class S>
void HttpSession<S>::redirect_to_https(const RequestTarget& target) {
  // Keep path and query; an absolute-form target ("http://host/p?q") keeps its own.
  std::string location = "https://";
  auto host = host_without_port(target.host);
  location.append(host.data(), host.size());
  auto rest = target.path_and_query;
  if (rest.empty() || rest.front() != '/') location += '/';
  location.append(rest.data(), rest.size());
  send_error(308, "redirecting to HTTPS\n", !request_->is_done(), location);
}

template <class S>
void HttpSession<S>::handle_request() {
  auto& req = request_->get();
  client_version_ = req.version();
  client_keep_alive_ = req.keep_alive();
  head_request_ = req.method() == http::verb::head;
  idempotent_ = is_idempotent(req.method());
  resolve_client();

  // The framing, Host, target and path rules (server/http1_policy.h): a refusal closes the
  // connection; an accepted request is edited so that routing, policies and the backend all see
  // the same normalized origin-form target and the same Host.
  RequestVerdict verdict = check_request(req, worker_.limits().request_rules);
  if (verdict.status != 0) {
    send_error(verdict.status, verdict.reason, true);
    return;
  }
  if (verdict.replace_host) req.set(http::field::host, verdict.host);
  if (verdict.replace_target) req.target(verdict.target);
  if (verdict.canonical_chunked) req.set(http::field::transfer_encoding, "chunked");
  upgrade_allowed_ = verdict.websocket_upgrade;

  snapshot_ = worker_.snapshot();
  if (!snapshot_) {
    send_error(503, "no configuration yet\n", !request_->is_done());
    return;
  }
  RequestTarget target = split_target(req.target(), req[http::field::host]);
  auto match = snapshot_->router->match(target.host, target.path);
  if constexpr (!kTls) {
    if (!match.virtual_host.empty() && !snapshot_->ssl_redirect_hosts.empty() &&
        snapshot_->ssl_redirect_hosts.contains(match.virtual_host)) {
      redirect_to_https(target);
      return;
    }
  }
  const model::Route* route = match.route;
  route_ = route;
  if (route == nullptr) {
    send_error(404, "no route\n", !request_->is_done());
    return;
  }
  if (!apply_route_policy(target)) return;  // answered by the policy (403, 413, redirects)
  upstream_ = choose_upstream();
  if (upstream_ == nullptr || upstream_->endpoints.empty()) {
    send_error(503, "no endpoints available\n", !request_->is_done());
    return;
  }
  substitution_ = snapshot_->substitution_for(route);
  if (substitution_ != nullptr) {
    // The memo's resource: the host as the client sent it (port and case ignored) and the target.
    auto host = host_without_port(target.host);
    memo_resource_.assign(host.data(), host.size());
    for (auto& c : memo_resource_)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    memo_resource_.append(target.path_and_query.data(), target.path_and_query.size());
  }
  start_balancing();  // before the request is edited: hash keys read it as received
  prepare_upstream_request();
  if (const auto& p = policy(); !p.rewrite_target.empty() || !p.upstream_vhost.empty()) {
    rewrite_upstream_request(target);
  }
  connect_endpoint(pick_endpoint());
}

template <class S>
void HttpSession<S>::resolve_client() {
  client_ip_ = peer_ip_;
  const ratelimit::CidrSet& trusted = worker_.trusted_proxies();
  if (!peer_ip_ || trusted.empty() || !trusted.contains(*peer_ip_)) return;
  const auto& req = request_->get();
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
      *peer_ip_, std::span<const std::string_view>(lines.data(), n), trusted);
}

template <class S>
const model::RoutePolicy& HttpSession<S>::policy() const {
  return route_ != nullptr ? route_->policy : kDefaultPolicy;
}

template <class S>
bool HttpSession<S>::apply_route_policy(const RequestTarget& target) {
  const model::RoutePolicy& p = route_->policy;
  if (p.source_ranges) {
    // whitelist-source-range: the connection's peer must be inside one of the ranges. A set
    // that is missing or failed to compile denies (a broken allow list never opens a route).
    const CompiledRoute* compiled = worker_.compiled(route_);
    const auto& peer = client_ip_;
    bool allowed = compiled != nullptr && compiled->source_ranges && peer &&
                   compiled->source_ranges->contains(*peer);
    if (!allowed) {
      send_error(403, "forbidden\n", !request_->is_done());
      return false;
    }
  }
  if (p.rate_limits.rps || p.rate_limits.connections) {
    // limit-rps and limit-connections per client address; limit-allowlist exempts. Refused:
    // 429 (or limit-status-code) with Retry-After, the connection kept.
    const CompiledRoute* compiled = worker_.compiled(route_);
    const auto& peer = client_ip_;
    bool exempt = compiled == nullptr || !peer ||
                  (compiled->limit_allowlist && compiled->limit_allowlist->contains(*peer));
    if (!exempt) {
      const unsigned status = p.rate_limits.status_code;
      if (compiled->rate_limiter) {
        auto decision = compiled->rate_limiter->check(*peer, std::chrono::steady_clock::now());
        if (!decision.allowed) {
          if (auto* m = worker_.metrics()) m->record_rate_limited(worker_.route_labels(route_));
          send_error(status, "too many requests\n", !request_->is_done(), {},
                     decision.retry_after_seconds());
          return false;
        }
      }
      if (compiled->connection_limiter) {
        connection_lease_ = compiled->connection_limiter->acquire(*peer);
        if (!connection_lease_) {
          if (auto* m = worker_.metrics()) m->record_rate_limited(worker_.route_labels(route_));
          send_error(status, "too many connections\n", !request_->is_done(), {}, 1);
          return false;
        }
      }
    }
  }
  if (p.cors && apply_cors()) return false;  // a preflight, answered here
  if (p.redirect) {
    send_error(p.redirect->code, "redirecting\n", !request_->is_done(), p.redirect->url);
    return false;
  }
  if (!p.app_root.empty() && target.path == "/") {
    send_error(302, "redirecting\n", !request_->is_done(), p.app_root);
    return false;
  }
  if (p.max_body_bytes) {
    // proxy-body-size: a declared length past the limit is refused before anything goes
    // upstream; a chunked body is cut off by the parser's limit (on_read_request_body).
    auto length = request_->content_length();
    if (length && *length > *p.max_body_bytes) {
      send_error(413, "request body too large\n", true);
      return false;
    }
    request_->body_limit(*p.max_body_bytes);
  }
  return true;
}

template <class S>
void HttpSession<S>::rewrite_upstream_request(const RequestTarget& target) {
  auto& req = request_->get();
  const model::RoutePolicy& p = policy();
  if (!p.rewrite_target.empty()) {
    const CompiledRoute* compiled = worker_.compiled(route_);
    auto pq = target.path_and_query;
    auto question = pq.find('?');
    auto query = question == std::string_view::npos ? std::string_view{} : pq.substr(question + 1);
    req.target(rewrite_path(p.rewrite_target, compiled ? compiled->rewrite_regex.get() : nullptr,
                            target.path, query));
  }
  // upstream-vhost: the Host the backend sees (X-Forwarded-Host keeps the client's).
  if (!p.upstream_vhost.empty()) req.set(http::field::host, p.upstream_vhost);
}

template <class S>
void HttpSession<S>::prepare_upstream_request() {
  auto& req = request_->get();
  auto expect = req[http::field::expect];
  expect_continue_ = beast::iequals(expect, "100-continue");
  if (!expect.empty()) req.erase(http::field::expect);
  // A WebSocket upgrade keeps its Upgrade and Connection fields for the upstream; any other
  // (h2c, ...) loses them with the hop-by-hop fields and goes up as a normal request.
  upgrade_ = upgrade_allowed_ && request_->upgrade() && request_->is_done();
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
  if (substitution_ != nullptr) req.erase(http::field::accept_encoding);
  add_forwarded_headers(req, peer_address_, kTls ? "https" : "http");
  ensure_request_id(req, worker_);
}

template <class S>
void HttpSession<S>::start_balancing() {
  balancer_ = &upstream_->balancer->worker(worker_.id());
  tried_ = {};
  timed_attempts_ = balancer_->method() == balancer::Method::kEwma;
  const auto& req = request_->get();
  const balancer::EndpointTable& table = balancer_->table();
  const Fields& fields = req;
  balancer::RequestView view{client_ip_.value_or(ratelimit::IpAddress()), req.target(),
                             &request_field, &fields};
  balance_key_ = balancer::request_key(table, view);
  cookie_endpoint_ = upstream_->affinity
                         ? upstream_->affinity->endpoint_for(table, req[http::field::cookie])
                         : kNoEndpoint;
}

template <class S>
uint32_t HttpSession<S>::pick_endpoint() {
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

template <class S>
void HttpSession<S>::connect_endpoint(uint32_t index) {
  if (index >= upstream_->endpoints.size()) {  // nothing to pick from (not expected here)
    send_error(503, "no endpoints available\n", !request_->is_done());
    return;
  }
  ++attempts_;
  if (attempts_ == 1 && observing()) upstream_started_ = std::chrono::steady_clock::now();
  endpoint_index_ = index;
  tried_.add(index);
  balancer_->on_start(index);
  attempt_open_ = true;
  attempt_failed_ = false;
  attempt_latency_ = std::chrono::nanoseconds(-1);
  if (timed_attempts_) attempt_started_ = std::chrono::steady_clock::now();
  const auto& ep = upstream_->endpoints[index];
  // An upgrade gets a fresh connection: it will never come back to the pool.
  if (!upgrade_) connection_ = worker_.pool().take(ep, upstream_->tls_key);
  if (connection_) {
    send_request();
    return;
  }
  connection_ = std::make_unique<upstream::Connection>(
      lowest().get_executor(), ep, upstream_->tls_key, Limits::kUpstreamReadBufferBytes);
  if (worker_.metrics()) connect_started_ = std::chrono::steady_clock::now();
  connection_->stream.expires_after(attempt_connect_timeout());
  connection_->stream.async_connect(
      ep, [self = this->shared_from_this()](error_code ec) { self->on_connect(ec); });
}

template <class S>
std::chrono::milliseconds HttpSession<S>::attempt_connect_timeout() const {
  const model::RoutePolicy& p = policy();
  // attempts_ and tried_ already count this attempt.
  const bool another_left = p.next_upstream.timeout && attempts_ < p.next_upstream_tries &&
                            tried_.size() < upstream_->endpoints.size();
  return another_left ? std::min(p.connect_timeout, Limits::kFailoverConnectTimeout)
                      : p.connect_timeout;
}

template <class S>
void HttpSession<S>::end_attempt(bool failed) {
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

template <class S>
bool HttpSession<S>::retry_on_status(unsigned status) {
  const model::NextUpstream& next = policy().next_upstream;
  const bool listed = (status == 502 && next.http_502) || (status == 503 && next.http_503) ||
                      (status == 504 && next.http_504);
  if (!listed) return false;
  attempt_failed_ = true;  // also when it is forwarded: the balancer hears of a failure
  // The same rule as for errors (upstream_failed): a body that was streamed up cannot be sent
  // again, and a non-idempotent request moves only with non_idempotent.
  if (request_body_started_ || attempts_ >= policy().next_upstream_tries ||
      !(idempotent_ || next.non_idempotent)) {
    return false;
  }
  const uint32_t index = pick_endpoint();
  if (index == kNoEndpoint) return false;  // every endpoint tried: forward this answer
  TG_DEBUG("http", "upstream " << connection_->endpoint << " answered " << status << ", retrying");
  end_attempt(true);
  // Discard the answer. A connection whose response ended with its header may serve again;
  // any other is closed rather than drained (as nginx does): draining would delay the retry.
  const auto& current = worker_.snapshot();
  if (response_->is_done() && response_->keep_alive() && upstream_out_.done() &&
      connection_->buffer.size() == 0 && current &&
      current->all_endpoints.contains(connection_->endpoint)) {
    connection_->reused = false;
    worker_.pool().put(std::move(connection_));
  }
  connection_.reset();
  connect_endpoint(index);
  return true;
}

template <class S>
void HttpSession<S>::add_affinity_cookie(http::response_header<Fields>& res) {
  // affinity: cookie. Pin the client to the endpoint that answered unless its cookie already
  // names that one.
  if (!upstream_->affinity || endpoint_index_ == cookie_endpoint_) return;
  res.insert(http::field::set_cookie,
             upstream_->affinity->set_cookie(balancer_->table(), endpoint_index_,
                                             runtime::affinity_cookie_path(*upstream_, route_)));
}

template <class S>
void HttpSession<S>::on_connect(error_code ec) {
  if (ec) {
    upstream_failed(ec, "connect");
    return;
  }
  if (auto* m = worker_.metrics()) {
    m->record_upstream_connect(labels(), std::chrono::steady_clock::now() - connect_started_);
  }
  error_code opt_ec;
  connection_->stream.socket().set_option(asio::ip::tcp::no_delay(true), opt_ec);
  if (upstream_->tls_context) {
    start_upstream_tls();
    return;
  }
  send_request();
}

template <class S>
void HttpSession<S>::start_upstream_tls() {
  auto& c = *connection_;
  c.tls = std::make_unique<upstream::TlsStream>(std::move(c.stream), *upstream_->tls_context);
  SSL* ssl = c.tls->native_handle();
  const std::string& name = upstream_->tls_server_name;
  error_code not_ip;
  asio::ip::make_address(name, not_ip);
  // SNI carries host names only (RFC 6066 section 3); an IP address is verified as one.
  if (!name.empty() && not_ip) SSL_set_tlsext_host_name(ssl, name.c_str());
  if (upstream_->tls_verify && !name.empty()) {
    if (not_ip) {
      SSL_set1_host(ssl, name.c_str());
    } else {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
    }
  }
  c.lowest().expires_after(policy().connect_timeout);
  c.tls->async_handshake(asio::ssl::stream_base::client,
                         [self = this->shared_from_this()](error_code ec) {
                           if (ec) {
                             self->upstream_failed(ec, "TLS handshake");
                             return;
                           }
                           self->send_request();
                         });
}

template <class S>
void HttpSession<S>::send_request() {
  upstream_out_.start(request_->get(), request_->get().chunked());
  if (request_->is_done()) {
    write_request(nullptr, 0, true);
    return;
  }
  if (expect_continue_ && !request_body_started_) {
    // We took over the client's Expect: tell it to go on now that an upstream is ready.
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    expect_continue_ = false;
    lowest().expires_after(worker_.limits().client_send_timeout);
    asio::async_write(client_, asio::buffer(kContinue.data(), kContinue.size()),
                      [self = this->shared_from_this()](error_code ec, std::size_t) {
                        if (ec) {
                          self->close_client();
                          return;
                        }
                        self->read_request_body();
                      });
    return;
  }
  read_request_body();
}

template <class S>
void HttpSession<S>::read_request_body() {
  auto& body = request_->get().body();
  body.data = relay_buffer_.data();
  body.size = relay_buffer_.size();
  request_body_started_ = true;
  lowest().expires_after(worker_.limits().client_body_timeout);
  http::async_read_some(client_, client_buffer_, *request_,
                        [self = this->shared_from_this()](error_code ec, std::size_t) {
                          self->on_read_request_body(ec);
                        });
}

template <class S>
void HttpSession<S>::on_read_request_body(error_code ec) {
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    // The client went away or sent a broken body: nothing useful can be answered upstream.
    TG_DEBUG("http", "request body read failed: " << ec.message());
    connection_.reset();
    if (ec == http::error::body_limit) {
      send_error(413, "request body too large\n", true);
      return;
    }
    if (is_http_parse_error(ec) && ec != http::error::end_of_stream) {
      send_error(400, "bad request body\n", true);
    } else {
      close_client();
    }
    return;
  }
  auto& body = request_->get().body();
  size_t n = relay_buffer_.size() - body.size;
  if (n == 0 && !request_->is_done()) {
    read_request_body();
    return;
  }
  bytes_in_ += n;
  write_request(relay_buffer_.data(), n, request_->is_done());
}

template <class S>
void HttpSession<S>::write_request(const char* data, std::size_t n, bool last) {
  connection_->lowest().expires_after(policy().send_timeout);
  auto buffers = upstream_out_.next(data, n, last);
  connection_->with_stream([&](auto& stream) {
    asio::async_write(stream, buffers,
                      [self = this->shared_from_this()](error_code ec, std::size_t) {
                        self->upstream_out_.written();
                        self->on_write_request(ec);
                      });
  });
}

template <class S>
void HttpSession<S>::on_write_request(error_code ec) {
  if (ec) {
    upstream_failed(ec, "send");
    return;
  }
  if (!upstream_out_.done()) {
    read_request_body();
    return;
  }
  read_response_header();
}

template <class S>
void HttpSession<S>::read_response_header() {
  response_.emplace(std::piecewise_construct, std::make_tuple(),
                    std::make_tuple(FieldsAllocator(&fields_arena_)));
  response_->header_limit(static_cast<std::uint32_t>(worker_.limits().max_response_header_bytes));
  response_->body_limit(kUnlimitedBody);
  if (head_request_) response_->skip(true);
  connection_->lowest().expires_after(policy().read_timeout);
  connection_->with_stream([&](auto& stream) {
    http::async_read_header(stream, connection_->buffer, *response_,
                            [self = this->shared_from_this()](error_code ec, std::size_t) {
                              self->on_response_header(ec);
                            });
  });
}

template <class S>
void HttpSession<S>::on_response_header(error_code ec) {
  if (ec) {
    upstream_failed(ec, "response header");
    return;
  }
  auto& res = response_->get();
  if (const ResponseVerdict v = check_response(res); v.status != 0) {
    // Ambiguous framing from a backend is never relayed (server/http1_policy.h).
    TG_WARN("http", "upstream " << connection_->endpoint << ": " << v.reason);
    end_attempt(true);
    connection_.reset();
    send_error(502, "upstream sent a malformed response\n", !request_->is_done());
    return;
  }
  unsigned status = res.result_int();
  if (timed_attempts_ && attempt_latency_.count() < 0) {
    attempt_latency_ = std::chrono::steady_clock::now() - attempt_started_;
  }
  if (status >= 502 && status <= 504 && retry_on_status(status)) return;
  if (status < 100 || status >= 200 || status == 101) {
    status_sent_ = status;
    upstream_endpoint_ = connection_->endpoint;
    if (observing()) upstream_answered_ = std::chrono::steady_clock::now();
  }
  if (status == 101) {
    if (!upgrade_) {
      end_attempt(true);
      connection_.reset();
      send_error(502, "upstream switched protocols unexpectedly\n", true);
      return;
    }
    auto protocol = std::string(res[http::field::upgrade]);
    remove_hop_by_hop(res);
    res.set(http::field::upgrade, protocol.empty() ? upgrade_protocol_ : protocol);
    res.set(http::field::connection, "upgrade");
    res.version(11);
    add_affinity_cookie(res);
    client_out_.start(res, false);
    response_started_ = true;
    lowest().expires_after(worker_.limits().client_send_timeout);
    asio::async_write(client_, client_out_.head_only(),
                      [self = this->shared_from_this()](error_code ec, std::size_t n) {
                        self->client_out_.written();
                        self->bytes_out_ += n;
                        if (ec) {
                          self->close_now();
                          return;
                        }
                        self->end_observation();  // the exchange is the 101
                        self->start_tunnel();
                      });
    return;
  }
  if (status >= 100 && status < 200) {
    // Interim responses (103 Early Hints, a stray 100) are not forwarded yet; read the final one.
    read_response_header();
    return;
  }
  remove_hop_by_hop(res);
  res.version(client_version_);
  bool body_expected = !head_request_ && status != 204 && status != 304;
  bool framed = response_->chunked() || response_->content_length().has_value();
  if (substitution_ != nullptr && begin_substitution(body_expected, status)) {
    // The header is rewritten (chunked or close-delimited); the body goes through the engine.
    if (client_version_ < 11) client_keep_alive_ = false;
  } else if (body_expected && !framed) {
    // A close-delimited upstream body: chunk it for HTTP/1.1 clients so the client connection
    // can stay open; HTTP/1.0 clients get it close-delimited too.
    if (client_version_ >= 11) {
      res.chunked(true);
    } else {
      client_keep_alive_ = false;
    }
  }
  if (client_version_ < 11 && response_->chunked()) {
    res.chunked(false);
    client_keep_alive_ = false;
  }
  if (!request_->is_done()) client_keep_alive_ = false;  // upstream answered before the body ended
  if (draining_) client_keep_alive_ = false;
  res.keep_alive(client_keep_alive_);
  // custom-headers: set on the backend's responses (not on the proxy's own answers).
  for (const auto& h : policy().response_headers) res.set(h.name, h.value);
  add_cors_fields(res);
  add_affinity_cookie(res);
  client_out_.start(res, res.chunked());
  if (!body_expected) {
    // HEAD, 204 and 304 carry no body whatever their framing fields say: write the header only
    // (a chunked header would otherwise be followed by a last-chunk).
    response_started_ = true;
    lowest().expires_after(worker_.limits().client_send_timeout);
    asio::async_write(client_, client_out_.head_only(),
                      [self = this->shared_from_this()](error_code ec, std::size_t n) {
                        self->client_out_.written();
                        self->bytes_out_ += n;
                        if (ec) {
                          self->connection_.reset();
                          self->close_client();
                          return;
                        }
                        self->finish_exchange();
                      });
    return;
  }
  relay_response();
}

template <class S>
void HttpSession<S>::relay_response() {
  if (sub_stream_) {
    if (!response_->is_done()) {
      read_response_body();
      return;
    }
    sub_stream_->finish();  // the whole body came with the header
    pump_substitution();
    return;
  }
  if (response_->is_done()) {
    write_response(nullptr, 0, true);
    return;
  }
  read_response_body();
}

template <class S>
void HttpSession<S>::read_response_body() {
  auto& body = response_->get().body();
  body.data = relay_buffer_.data();
  body.size = relay_buffer_.size();
  connection_->lowest().expires_after(policy().read_timeout);
  connection_->with_stream([&](auto& stream) {
    http::async_read_some(stream, connection_->buffer, *response_,
                          [self = this->shared_from_this()](error_code ec, std::size_t) {
                            self->on_read_response_body(ec);
                          });
  });
}

template <class S>
void HttpSession<S>::on_read_response_body(error_code ec) {
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    TG_WARN("http", "upstream " << connection_->endpoint << " failed mid-body: " << ec.message());
    end_attempt(true);
    connection_.reset();
    if (!response_started_) {
      send_error(502, "upstream failed\n", true);
    } else {
      close_client();  // the status line is out; only closing tells the client
    }
    return;
  }
  auto& body = response_->get().body();
  size_t n = relay_buffer_.size() - body.size;
  if (n == 0 && !response_->is_done()) {
    read_response_body();
    return;
  }
  if (sub_stream_) {
    sub_stream_->write(std::string_view(relay_buffer_.data(), n));
    if (response_->is_done()) sub_stream_->finish();
    pump_substitution();
    return;
  }
  write_response(relay_buffer_.data(), n, response_->is_done());
}

template <class S>
void HttpSession<S>::write_response(const char* data, std::size_t n, bool last) {
  response_started_ = true;
  lowest().expires_after(worker_.limits().client_send_timeout);
  asio::async_write(client_, client_out_.next(data, n, last),
                    [self = this->shared_from_this()](error_code ec, std::size_t n) {
                      self->client_out_.written();
                      self->bytes_out_ += n;
                      self->on_write_response(ec);
                    });
}

template <class S>
void HttpSession<S>::on_write_response(error_code ec) {
  if (ec) {
    connection_.reset();  // the upstream response is unfinished: not reusable
    close_client();
    return;
  }
  if (!client_out_.done()) {
    read_response_body();
    return;
  }
  finish_exchange();
}

// --- Body substitution -------------------------------------------------------------------
// A processed body flows: upstream read (at most one relay buffer) -> stream.write() -> slices of
// process(sub_slice_) -> each slice's output written to the client before the next slice. Between
// two slices that produced nothing to write, the session yields to the worker's io_context with
// asio::post, so other connections on the worker run between any two slices; a write or a read
// yields by itself. Memory per response: the held bytes (<= max_buffer), the queued input (at most
// one relay buffer) and the output of one slice.

template <class S>
bool HttpSession<S>::begin_substitution(bool body_expected, unsigned status) {
  auto& res = response_->get();
  auto& state = worker_.substitution();
  ResponseFacts facts{body_expected, status, res[http::field::content_type],
                      res[http::field::content_encoding], std::nullopt};
  if (auto length = response_->content_length()) facts.content_length = *length;
  switch (decide_substitution(*substitution_, facts)) {
    case SubstitutionAction::kPass:
      return false;
    case SubstitutionAction::kPassCompressed:
      ++state.counters.compressed_passthrough;
      if (auto* m = worker_.metrics()) {
        m->record_substitution(compressed_observation(worker_.route_labels(route_)));
      }
      TG_DEBUG("substitution", memo_resource_ << ": Content-Encoding " << facts.content_encoding
                                              << ", relayed untouched (worker " << worker_.id()
                                              << " compressed_passthrough="
                                              << state.counters.compressed_passthrough << ")");
      return false;
    case SubstitutionAction::kSubstitute:
      break;
  }
  memo_validator(res, &memo_validator_);
  SubstitutionPlan plan = state.plan(*substitution_, memo_resource_, memo_validator_, status);
  if (plan.pass) {
    // The same representation matched no rule last time: relay it as it is (its bytes are the
    // upstream's, so Content-Length and a strong ETag stay right).
    if (auto* m = worker_.metrics()) {
      m->record_substitution(
          memo_skip_observation(worker_.route_labels(route_), plan.rules_skipped));
    }
    TG_DEBUG("substitution", memo_resource_ << ": memo skip (worker " << worker_.id()
                                            << " memo_skips=" << state.counters.memo_skips << ")");
    return false;
  }
  rewrite_substituted_header(res, client_version_);
  sub_out_.clear();
  sub_slice_ = kSubstitutionSliceBytes;
  // The route's rules, or only those the memo says matched this representation last time.
  sub_stream_.emplace(std::move(plan.rules), &sub_out_,
                      filters::SubstitutionStreamOptions{substitution_->max_buffer});
  ++state.counters.responses;
  return true;
}

template <class S>
void HttpSession<S>::pump_substitution() {
  const size_t queued = sub_stream_->queued_bytes();
  const auto before = sub_stream_->stats().engine_time;
  // The time limit backs up the slice size where the cost per byte jumps within a slice.
  bool more = sub_stream_->process(sub_slice_, 2 * kSubstitutionSliceTime);
  const auto spent = sub_stream_->stats().engine_time - before;  // timed by the stream
  // Keep a turn near the time budget and the output near one slice (see kSubstitutionSliceTime).
  // A call cut at its deadline took only part of its slice (its speed is unknown): halve it.
  sub_slice_ = sub_stream_->interrupted()
                   ? std::max(kSubstitutionMinSliceBytes, sub_slice_ / 2)
                   : next_substitution_slice(sub_slice_, queued - sub_stream_->queued_bytes(),
                                             spent, sub_out_.size());
  if (!sub_out_.empty() || sub_stream_->done()) {
    write_substituted(more);
    return;
  }
  if (more) {
    ++worker_.substitution().counters.yields;
    asio::post(lowest().get_executor(),
               [self = this->shared_from_this()] { self->pump_substitution(); });
    return;
  }
  read_response_body();  // everything queued is processed; the rest is held for more input
}

template <class S>
void HttpSession<S>::write_substituted(bool more) {
  response_started_ = true;
  const bool last = sub_stream_->done();
  lowest().expires_after(worker_.limits().client_send_timeout);
  asio::async_write(client_, client_out_.next(sub_out_.data(), sub_out_.size(), last),
                    [self = this->shared_from_this(), more](error_code ec, std::size_t) {
                      self->client_out_.written();
                      if (ec) {
                        self->connection_.reset();  // the upstream response is unfinished
                        self->close_client();
                        return;
                      }
                      self->sub_out_.clear();
                      if (self->client_out_.done()) {
                        self->end_substitution();
                        self->finish_exchange();
                      } else if (more) {
                        self->pump_substitution();
                      } else {
                        self->read_response_body();
                      }
                    });
}

template <class S>
void HttpSession<S>::end_substitution() {
  auto& state = worker_.substitution();
  auto& c = state.counters;
  const auto& st = sub_stream_->stats();
  const size_t ran = sub_stream_->rules() != nullptr ? sub_stream_->rules()->size() : 0;
  const size_t rules_skipped = substitution_->rules->size() - ran;
  if (auto* m = worker_.metrics()) {
    m->record_substitution(completed_observation(worker_.route_labels(route_), st, rules_skipped));
  }
  const bool remember = state.learn(*substitution_, memo_resource_, memo_validator_,
                                    response_->get().result_int(), st);
  if (st.abandoned != 0) {
    // At most one line per response, and such a response has cost at least the budget's 50 ms.
    TG_WARN("substitution",
            memo_resource_
                << ": the rules took more than their CPU budget ("
                << std::chrono::duration_cast<std::chrono::milliseconds>(st.engine_time).count()
                << " ms for " << st.bytes_in
                << " bytes); the rest of the body went out unmodified");
  }
  TG_DEBUG(
      "substitution",
      memo_resource_ << ": " << st.bytes_in << " -> " << st.bytes_out << " bytes, "
                     << st.replacements << " replacements, " << st.forced_releases
                     << " forced releases, " << ran << " of " << substitution_->rules->size()
                     << " rules" << (remember ? ", remembered" : "") << " (worker " << worker_.id()
                     << " responses=" << c.responses << " replacements=" << c.replacements
                     << " forced_releases=" << c.forced_releases << " abandoned=" << c.abandoned
                     << " memo_stores=" << c.memo_stores << " memo_skips=" << c.memo_skips
                     << " memo_subsets=" << c.memo_subsets << " rules_skipped=" << c.rules_skipped
                     << " subset_compiles=" << c.subset_compiles << " yields=" << c.yields << ")");
  sub_stream_.reset();
  // One slice of output is the usual high-water mark; give back what an expanding body grew.
  if (sub_out_.capacity() > 4 * kSubstitutionSliceBytes) std::string().swap(sub_out_);
}

template <class S>
void HttpSession<S>::finish_exchange() {
  end_attempt(false);
  end_observation();
  // The upstream connection goes back to the pool only if it is clean and its endpoint is still
  // configured in the worker's *current* snapshot (an endpoint that left gets no new requests).
  const auto& current = worker_.snapshot();
  // Bytes already read past the response's end would be read as the next request's response
  // (response queue poisoning): such a connection is closed.
  bool reusable = connection_ && response_->keep_alive() && response_->is_done() &&
                  upstream_out_.done() && connection_->buffer.size() == 0 && current &&
                  current->all_endpoints.contains(connection_->endpoint);
  if (reusable) {
    connection_->reused = false;
    worker_.pool().put(std::move(connection_));
  }
  connection_.reset();
  if (!client_keep_alive_ || draining_) {
    close_client();
    return;
  }
  do_read_header();
}

template <class S>
void HttpSession<S>::upstream_failed(error_code ec, const char* stage) {
  bool reused = connection_ && connection_->reused;
  auto endpoint = connection_ ? connection_->endpoint : runtime::Endpoint{};
  connection_.reset();
  bool timed_out = ec == beast::error::timeout;
  bool nothing_sent =
      std::string_view(stage) == "connect" || std::string_view(stage) == "TLS handshake";
  // A pooled connection the server closed meanwhile, or a connect failure, is safe to retry; any
  // other failure before a response byte only for idempotent requests whose body we still have.
  // proxy-next-upstream decides which failures move on ("error", "timeout"; "off": none) and
  // whether non-idempotent requests may; proxy-next-upstream-tries bounds the attempts. A read
  // timeout after the request went out is not retried (the backend may still be working on it).
  const model::NextUpstream& next = policy().next_upstream;
  bool allowed = nothing_sent ? (timed_out ? next.timeout : next.error)
                              : (!timed_out && next.error && (idempotent_ || next.non_idempotent));
  bool can_retry = !request_body_started_ && attempts_ < policy().next_upstream_tries &&
                   ((reused && !next.off()) || allowed);
  if (can_retry && reused) {
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
  const uint32_t index = can_retry ? pick_endpoint() : kNoEndpoint;
  if (index != kNoEndpoint) {
    TG_DEBUG("http", "upstream " << endpoint << " " << stage << " failed (" << ec.message()
                                 << "), retrying");
    connect_endpoint(index);
    return;
  }
  TG_WARN("http", "upstream " << endpoint << " " << stage << " failed: " << ec.message());
  if (timed_out) {
    send_error(504, "upstream timed out\n", true);
  } else {
    send_error(502, "upstream unavailable\n", true);
  }
}

template <class S>
bool HttpSession<S>::apply_cors() {
  const CompiledRoute* compiled = worker_.compiled(route_);
  if (compiled == nullptr || !compiled->cors) return false;
  auto& req = request_->get();
  auto origin = req[http::field::origin];
  if (!compiled->cors->allows(origin)) return false;  // no CORS fields; a preflight goes upstream
  cors_ = &*compiled->cors;
  cors_origin_.assign(origin.data(), origin.size());
  if (req.method() != http::verb::options ||
      req.find(http::field::access_control_request_method) == req.end()) {
    return false;
  }
  // A preflight from an allowed origin: answered here, 204 with what may be sent.
  auto& res = error_response_.emplace(http::status::no_content, client_version_);
  add_cors_fields(res);
  res.set(http::field::access_control_allow_methods, cors_->allow_methods());
  if (!cors_->allow_headers().empty()) {
    res.set(http::field::access_control_allow_headers, cors_->allow_headers());
  }
  res.set(http::field::access_control_max_age, cors_->max_age());
  res.set(http::field::server, "tidegate");
  if (!request_->is_done()) client_keep_alive_ = false;
  res.keep_alive(client_keep_alive_ && !draining_);
  write_local_response();
  return true;
}

template <class S>
template <class Fields>
void HttpSession<S>::add_cors_fields(http::header<false, Fields>& res) const {
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

template <class S>
const runtime::UpstreamState* HttpSession<S>::choose_upstream() {
  const auto& canary = route_->canary;
  if (!canary) return snapshot_->upstream(route_->upstream);
  auto& req = request_->get();
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
  auto choice = canary_by_request(*canary, header_value, cookie_value);
  if (choice == CanaryChoice::kUndecided) {
    const CompiledRoute* compiled = worker_.compiled(route_);
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

template <class S>
observability::LabelSetId HttpSession<S>::labels() const {
  const CompiledRoute* c = worker_.compiled(route_);
  if (c == nullptr) return observability::kNoRouteLabels;
  return canary_chosen_ ? c->canary_labels : c->labels;
}

template <class S>
void HttpSession<S>::send_error(unsigned status, std::string_view text, bool close,
                                std::string_view location, long retry_after_seconds) {
  end_attempt(false);  // ended by the request (a body error), not by the endpoint
  if (close) client_keep_alive_ = false;
  auto& res = error_response_.emplace(static_cast<http::status>(status), client_version_);
  if (!location.empty()) res.set(http::field::location, location);
  if (retry_after_seconds > 0)
    res.set(http::field::retry_after, std::to_string(retry_after_seconds));
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.set(http::field::server, "tidegate");
  add_cors_fields(res);  // a browser then sees the proxy's error instead of a CORS failure
  res.body().assign(text.data(), text.size());
  res.keep_alive(client_keep_alive_ && !draining_);
  res.prepare_payload();
  if (head_request_) res.body().clear();
  write_local_response();
}

template <class S>
void HttpSession<S>::write_local_response() {
  auto& res = *error_response_;
  response_started_ = true;
  lowest().expires_after(worker_.limits().client_send_timeout);
  status_sent_ = res.result_int();
  http::async_write(client_, res, [self = this->shared_from_this()](error_code ec, std::size_t n) {
    self->bytes_out_ += n;
    self->end_observation();
    self->on_error_written(ec, !self->client_keep_alive_);
  });
}

template <class S>
void HttpSession<S>::on_error_written(error_code ec, bool close) {
  if (!ec && close && request_ && !request_->is_done() && !draining_) {
    linger();  // the client may still be sending the body we refused
    return;
  }
  if (ec || close) {
    close_client();
    return;
  }
  do_read_header();
}

// Lingering close, as nginx's lingering_close: closing with unread bytes makes the kernel reset
// the connection, and across a network a reset can destroy the answer before the client reads
// it. So our side is shut (the FIN follows the answer) and what the client still sends is read
// and dropped, until it closes, for at most kLingerTime, and kLingerTimeout without a byte.
template <class S>
void HttpSession<S>::linger() {
  end_attempt(false);
  end_observation();
  state_ = State::kLingering;
  snapshot_.reset();
  connection_.reset();  // an upstream connection, if one was in use, is not needed any more
  error_code ec;
  lowest().socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  if (ec) {
    close_client();
    return;
  }
  linger_read(std::chrono::steady_clock::now() + Limits::kLingerTime);
}

template <class S>
void HttpSession<S>::linger_read(std::chrono::steady_clock::time_point deadline) {
  const auto now = std::chrono::steady_clock::now();
  if (state_ != State::kLingering || now >= deadline) {
    close_client();
    return;
  }
  lowest().expires_after(
      std::min<std::chrono::steady_clock::duration>(Limits::kLingerTimeout, deadline - now));
  // Raw bytes, below TLS: they are dropped, never read.
  lowest().async_read_some(asio::buffer(relay_buffer_),
                           [self = this->shared_from_this(), deadline](error_code ec, std::size_t) {
                             if (ec) {
                               self->close_client();
                               return;
                             }
                             self->linger_read(deadline);
                           });
}

template <class S>
void HttpSession<S>::close_client() {
  end_attempt(false);
  tunnel_balancer_.reset();
  if (state_ == State::kClosed) return;
  end_observation();  // an exchange cut short is still recorded
  state_ = State::kClosed;
  // close() alone: it sends the FIN after what is queued, as shutdown(SHUT_WR) would, and a
  // separate shutdown first cost ~2.5% of the CPU of a new TLS connection (docs/benchmarks.md).
  lowest().close();
}

// --- Tunnel --------------------------------------------------------------------------------
// After a 101 the connection is two byte pumps. It keeps no snapshot (configuration changes and
// the release of old snapshots never wait for it) and closes when either side closes, on an
// error, or after tunnel_idle_timeout without a byte in either direction.

template <class S>
void HttpSession<S>::start_tunnel() {
  state_ = State::kTunnel;
  // proxy-read-timeout of the route that admitted it: kept, as the route may go away.
  tunnel_idle_ = policy().read_timeout;
  // The attempt lasts as long as the tunnel (least_conn counts it); its balancer must outlive
  // the snapshot, which the tunnel lets go.
  if (attempt_open_) tunnel_balancer_ = upstream_->balancer;
  route_ = nullptr;
  snapshot_.reset();
  upstream_ = nullptr;
  worker_.open_tunnels.fetch_add(1, std::memory_order_relaxed);
  if (auto* m = worker_.metrics()) m->tunnel_opened();
  tunnel_buffer_ = std::make_unique<std::array<char, Limits::kRelayBufferBytes>>();
  auto idle = tunnel_idle_;
  lowest().expires_after(idle);
  connection_->lowest().expires_after(idle);
  auto self = this->shared_from_this();
  // Bytes that arrived behind the request or the 101 header go first.
  if (client_buffer_.size() > 0) {
    connection_->with_stream([&](auto& stream) {
      asio::async_write(stream, client_buffer_.data(), [self](error_code ec, std::size_t n) {
        if (ec) return self->end_tunnel();
        self->client_buffer_.consume(n);
        self->tunnel_client_to_upstream();
      });
    });
  } else {
    tunnel_client_to_upstream();
  }
  if (connection_->buffer.size() > 0) {
    asio::async_write(client_, connection_->buffer.data(), [self](error_code ec, std::size_t n) {
      if (ec) return self->end_tunnel();
      self->connection_->buffer.consume(n);
      self->tunnel_upstream_to_client();
    });
  } else {
    tunnel_upstream_to_client();
  }
}

template <class S>
void HttpSession<S>::tunnel_client_to_upstream() {
  client_.async_read_some(asio::buffer(relay_buffer_),
                          [self = this->shared_from_this()](error_code ec, std::size_t n) {
                            if (ec || !self->connection_) return self->end_tunnel();
                            auto idle = self->tunnel_idle_;
                            self->lowest().expires_after(idle);
                            self->connection_->lowest().expires_after(idle);
                            self->connection_->with_stream([&](auto& stream) {
                              asio::async_write(stream, asio::buffer(self->relay_buffer_.data(), n),
                                                [self](error_code ec, std::size_t) {
                                                  if (ec) return self->end_tunnel();
                                                  self->tunnel_client_to_upstream();
                                                });
                            });
                          });
}

template <class S>
void HttpSession<S>::tunnel_upstream_to_client() {
  if (!connection_) return end_tunnel();
  connection_->with_stream([&](auto& stream) {
    stream.async_read_some(asio::buffer(*tunnel_buffer_), [self = this->shared_from_this()](
                                                              error_code ec, std::size_t n) {
      if (ec) return self->end_tunnel();
      auto idle = self->tunnel_idle_;
      self->lowest().expires_after(idle);
      if (self->connection_) self->connection_->lowest().expires_after(idle);
      asio::async_write(self->client_, asio::buffer(self->tunnel_buffer_->data(), n),
                        [self](error_code ec, std::size_t) {
                          if (ec) return self->end_tunnel();
                          self->tunnel_upstream_to_client();
                        });
    });
  });
}

template <class S>
void HttpSession<S>::end_tunnel() {
  if (state_ != State::kTunnel) return;
  worker_.open_tunnels.fetch_sub(1, std::memory_order_relaxed);
  if (auto* m = worker_.metrics()) m->tunnel_closed();
  if (connection_) {
    error_code ec;
    connection_->lowest().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    connection_->lowest().close();
  }
  close_client();
}

// --- Observation: metrics and the access log ---------------------------------------------

template <class S>
bool HttpSession<S>::observing() const {
  return worker_.metrics() != nullptr || worker_.access_log() != nullptr;
}

template <class S>
void HttpSession<S>::begin_observation(std::size_t header_bytes) {
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
}

template <class S>
void HttpSession<S>::end_observation() {
  if (!exchange_open_) return;
  exchange_open_ = false;
  connection_lease_.reset();
  if (!observing()) return;
  auto now = std::chrono::steady_clock::now();
  auto upstream_duration = upstream_answered_ == std::chrono::steady_clock::time_point{}
                               ? std::chrono::nanoseconds(-1)
                               : std::chrono::nanoseconds(upstream_answered_ - upstream_started_);
  const auto& req = request_->get();
  if (auto* m = worker_.metrics()) {
    m->record_request({labels(), req.method(), status_sent_, bytes_in_, bytes_out_, now - started_,
                       upstream_duration});
  }
  auto* log = worker_.access_log();
  if (log == nullptr) return;
  observability::AccessLogRecord r;
  r.time = started_wall_;
  r.request_id = req["X-Request-ID"];
  r.peer = peer_address_;
  r.client = peer_address_;
  // The client behind a trusted proxy, as $remote_addr is with nginx's realip module.
  char client_text[ratelimit::IpAddress::kMaxTextBytes];
  if (client_ip_ && peer_ip_ && !(*client_ip_ == *peer_ip_)) {
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
  r.http_version = req.version();
  if (log->wants(observability::LogField::kUserAgent)) r.user_agent = req[http::field::user_agent];
  if (log->wants(observability::LogField::kReferer)) r.referer = req[http::field::referer];
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

template class HttpSession<runtime::Stream>;
template class HttpSession<TlsStream>;

}  // namespace tidegate::dataplane::server
