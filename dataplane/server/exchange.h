#pragma once
// One request and its response, protocol-neutral: the client side is a Downstream
// (server/downstream.h), so the HTTP/1.1 connection today and HTTP/2 streams next drive the same
// code. In order: route lookup -> the route's policies (source ranges, rate limits, CORS,
// redirects, app-root, body size) -> the backend (canary or main) and the request as it goes up
// -> balancing, attempts and retries (server/retry_policy.h), each attempt on the upstream
// HTTP/1.1 side (upstream/http1_upstream.h) -> the response head (custom headers, CORS,
// affinity) and body through the response filters (server/response_filter.h) -> observation
// (metrics and the access log: one record per exchange, whichever way it ends).
//
// The codec owns one Exchange per request in flight and reuses the object from one request to
// the next (reset()), so that its buffers (relay buffer, header arena, serialized heads) keep
// their capacity and a request costs no allocation for them. Every pending operation holds
// Downstream::hold(); errors are answered (4xx/5xx with a short body) or end the exchange, never
// thrown.

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <memory_resource>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "balancer/balancer.h"
#include "observability/metrics.h"
#include "ratelimit/connection_limiter.h"
#include "runtime/snapshot.h"
#include "server/compression_filter.h"
#include "server/cors.h"
#include "server/downstream.h"
#include "server/external_auth.h"
#include "server/file_response.h"
#include "server/grpc.h"
#include "server/headers.h"
#include "server/limits.h"
#include "server/mirror.h"
#include "server/response_cache.h"
#include "server/response_filter.h"
#include "server/retry_policy.h"
#include "server/substitution_filter.h"
#include "upstream/attempt.h"

namespace tidegate::dataplane::server {

class Worker;
class RouteTable;
struct CompiledRoute;

class Exchange {
 public:
  using error_code = boost::system::error_code;

  Exchange(Worker& worker, Downstream& downstream);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // --- Driven by the codec
  // The header fields of one exchange (request and response) allocate here; released by reset().
  std::pmr::memory_resource* fields_arena() { return &fields_arena_; }
  // Before the next request's head is read: forgets the last exchange (the codec has already
  // dropped its request head, whose fields live in the arena).
  void reset();
  // A request head has arrived (`header_bytes` of it): the observation starts.
  void begin(std::size_t header_bytes);
  // The codec accepted the head (its framing rules passed): route, policies, upstream.
  void route();
  // A short plain-text answer from the proxy itself (errors, redirects), also for the codec's
  // own refusals. `close`: the connection closes after it.
  void respond(unsigned status, std::string_view text, bool close, std::string_view location = {},
               long retry_after_seconds = 0);
  // Completions of the Downstream's operations.
  // A failed write to the client drops the upstream connection (its response is unfinished)
  // and closes the client (Downstream::close()).
  void on_continue_sent(error_code ec);
  void on_request_body(std::size_t n);
  void on_response_head_sent(error_code ec, std::size_t n);
  void on_response_body_sent(error_code ec, std::size_t n);
  void on_local_response_sent(std::size_t n);
  // True when the tunnel may start; on false the codec closes.
  bool on_upgrade_sent(error_code ec, std::size_t n);
  // The client side failed or is closing: the attempt ends (not as a failure of the endpoint)
  // and the exchange is recorded, cut short.
  void end();
  // As end(), and the snapshot and the upstream connection are let go (lingering close).
  void end_and_release();
  // The client side failed midway: the current attempt's upstream connection is closed or its
  // stream reset (the upstream response is unfinished: not reusable).
  void drop_upstream() { up_.drop(); }
  // The upstream HTTP/1.1 connection of the current attempt, taken over by a tunnel.
  std::shared_ptr<upstream::Connection>& upstream_connection() { return up_.http1_connection(); }
  // A tunnel begins after the 101: the exchange lets go of its route and snapshot (configuration
  // changes never wait for a tunnel) and keeps the attempt open for the balancer (least_conn
  // counts it). Returns the route's proxy-read-timeout, the tunnel's idle timeout.
  std::chrono::milliseconds enter_tunnel();
  // The request and the response flow side by side (HTTP/2 on both sides, a request body).
  bool duplex() const { return duplex_; }
  // The relay buffer, which the codec may borrow while no body is relayed (lingering, tunnels).
  std::span<char> relay_buffer() { return relay_buffer_; }

 private:
  static constexpr uint32_t kNoEndpoint = balancer::Balancer::kNone;

  void redirect_to_https(const RequestTarget& target);
  // Client certificates (server/exchange_client_cert.cc): when the request's host asks for them,
  // the connection's handshake must have run under the host's settings (else 421) and its
  // certificate must pass them (else 400, a 302 to the error page, or 403 for match-cn). False
  // when it answered the request. add_client_certificate_fields() tells the backend the verdict.
  bool check_client_certificate(const RequestTarget& target);
  void add_client_certificate_fields(RequestMessage& req) const;
  // custom-http-errors: the backend answered `status`, one of the route's error codes; the
  // answer is discarded and the route's fallback upstream asked for the page instead. False when
  // that cannot be (no fallback endpoints, a page already being served, a streaming exchange).
  bool serve_error_page(unsigned status);
  // from-to-www-redirect: 308 to the same scheme on `host`, keeping the client's port.
  void redirect_to_host(const RequestTarget& target, std::string_view host);
  // The matched route's policy (defaults without a route), applied before the upstream: source
  // ranges (403), redirects, app-root, body size (413). False when it answered the request.
  const model::RoutePolicy& policy() const;
  bool apply_route_policy(const RequestTarget& target);
  void prepare_upstream_request();
  void rewrite_upstream_request(const RequestTarget& target);
  // What follows the route's policies: the response cache (enable-cache), then the backend
  // chosen, the request prepared, the first attempt (go_to_backend). After the external
  // authentication when the route has one.
  void proceed_to_backend();
  void go_to_backend();
  // Request mirroring (server/mirror.h): which of the route's mirrors take this request (its
  // share drawn), and the copies sent once the request's body is whole (at once without one).
  void plan_mirrors();
  void send_mirrors();
  // The planned copies not sent (counted as skipped), their body and capture let go.
  void skip_mirrors();

  // --- enable-cache (server/exchange_cache.cc)
  // True when the request was answered from the cache or waits for another exchange's fill.
  bool lookup_cache();
  bool cache_lookup_again(bool after_wait);
  void on_cache_wake(uint64_t token);
  void serve_cached(std::shared_ptr<const CachedResponse> entry);
  // The backend's head (after the response filters): X-Cache, and a storable answer's head
  // kept while its body is captured (capture_body, from write_response).
  void start_cache_capture(ResponseMessage& res, unsigned status, bool body_expected,
                           std::optional<uint64_t> content_length);
  void capture_body(const char* data, std::size_t n, bool last);
  void store_capture();
  // This exchange's fill of its key is over (stored or not): the waiters look again.
  void end_cache_fill();

  // --- auth-url (server/exchange_auth.cc): the request to the authentication service, on its
  // own upstream connection, before any byte of the request goes to the backend. 2xx lets the
  // request go on (proceed_to_backend); 401, 403 and every failure answer it.
  void start_external_auth();
  void auth_connect(uint32_t index);
  void auth_send();
  void auth_on_header(error_code ec);
  void auth_drain_body();
  void auth_failed(error_code ec, const char* stage, bool nothing_sent);
  void end_auth_attempt(bool failed);
  // The answer (fresh or from the cache) applied: the request goes on, or is answered.
  void apply_auth_answer(const AuthAnswer& answer);
  void auth_error(unsigned status, std::string_view text);
  TemplateRequest template_request() const;
  // The client address of this request: the peer, or through --trusted-proxies.
  void resolve_client();
  // Load balancing (docs/proxy.md, "Choosing an endpoint"): start_balancing() reads what the
  // balancer needs from the request as received (the hash key, the affinity cookie);
  // pick_endpoint() returns the endpoint for the next attempt (the cookie's while untried, else
  // the balancer's), or kNone when every endpoint was tried; connect_endpoint() starts an
  // attempt on it; end_attempt() reports its end to the balancer (idempotent), which marks a
  // failed endpoint (passive failure marking).
  void start_balancing();
  uint32_t pick_endpoint();
  // This attempt's connect timeout: Limits::kFailoverConnectTimeout while another endpoint is
  // left for a retry on timeout, else the route's proxy-connect-timeout.
  std::chrono::milliseconds attempt_connect_timeout() const;
  // The route's proxy-read-timeout, capped by a gRPC call's deadline.
  std::chrono::milliseconds read_timeout() const;
  // The whole call's deadline (grpc-timeout, timeouts.request) has passed.
  bool past_deadline() const;
  std::chrono::milliseconds within_deadline(std::chrono::milliseconds timeout) const;
  void connect_endpoint(uint32_t index);
  void end_attempt(bool failed);
  // The request's facts the retry policy reads.
  RetryState retry_state() const;
  // proxy-next-upstream http_502/503/504: true when this response was discarded and the
  // request moved on to another endpoint.
  bool retry_on_status(unsigned status);
  void upstream_failed(error_code ec, const char* stage);
  void add_affinity_cookie(ResponseMessage& res);
  void on_connect(error_code ec);
  void send_request();
  void read_request_body();
  // Where request body bytes are read to: the relay buffer, or on a duplex exchange (whose
  // response uses the relay buffer meanwhile) a second buffer made on first use.
  std::span<char> request_buffer();
  void write_request(const char* data, std::size_t n, bool last);
  void on_write_request(error_code ec);
  void read_response_header();
  void on_response_header(error_code ec);
  // The fields every backend response gets on its way out (custom-headers, CORS, HSTS, the
  // affinity cookie, the authentication service's cookies).
  void add_response_fields(ResponseMessage& res, unsigned status);
  // x-sendfile-directories (server/exchange_sendfile.cc): the backend's response names a file
  // (X-Accel-Redirect or X-Sendfile); the file is the answer, or 404 when the route may not
  // serve it. False when the response names none (it is relayed as usual).
  bool serve_file(ResponseMessage& res);
  // The next part of the file: sendfile(2) through the downstream where it can, else read into
  // the relay buffer and sent.
  void send_file_part();
  void relay_response();
  // Reads the next body bytes into the relay buffer, or into the first filter's own window when
  // it offers one (ResponseFilter::data_space; `in_place` then).
  void read_response_body();
  void on_read_response_body(error_code ec, std::size_t n, bool in_place);
  // The response filters' turns: each turn's output is written before the next turn; between
  // turns that produced nothing the exchange yields to the worker (asio::post).
  void pump_filters();
  void write_filtered(bool more);
  // Response body bytes to the client; `last` ends the body (and hands the codec the
  // response's trailers first).
  void write_response(const char* data, std::size_t n, bool last);
  // A write to the client failed: the upstream response is unfinished, the client is closed.
  void client_failed();
  void finish();
  // Writes local_response_ (prepared by the caller).
  void write_local_response(bool close);
  // respond() for a gRPC client: a trailers-only answer carrying the gRPC code.
  void respond_grpc(unsigned status, std::string_view text);
  // A gRPC request's response head: the grpc-status it carries (a trailers-only response), for
  // the metrics and an access log that shows grpc_status (nothing is looked up otherwise).
  void note_grpc_status(const ResponseMessage& res);
  // ... and the grpc-status of a backend's trailers.
  void note_grpc_trailers(const TrailerFields& trailers);
  bool observes_grpc_status() const;
  // enable-cors: answers a preflight from an allowed origin (true: answered); otherwise notes
  // the origin for the response fields (add_cors_fields).
  bool apply_cors();
  template <class Fields>
  void add_cors_fields(boost::beast::http::header<false, Fields>& res) const;
  // hsts: Strict-Transport-Security on the route's responses over TLS (never plain HTTP).
  template <class Fields>
  void add_hsts(boost::beast::http::header<false, Fields>& res) const;
  // The route's backend for this request: the main one or its canary (docs/annotations.md).
  const runtime::UpstreamState* choose_upstream();
  // The metric labels of this exchange: the route's, or its canary's when the canary serves it.
  observability::LabelSetId labels() const;
  // The compiled per-route data of route_ in routes_ (null when none).
  const CompiledRoute* compiled_route() const;
  // The route's own metric labels (never the canary's).
  observability::LabelSetId route_labels() const;
  bool observing() const;
  void end_observation();

  Worker& worker_;
  Downstream& downstream_;

  // The header fields of one exchange (request and response) live here; released when the next
  // request starts. Headers past the inline block spill to the heap, also released then.
  std::array<std::byte, 4096> fields_block_;
  std::pmr::monotonic_buffer_resource fields_arena_{fields_block_.data(), fields_block_.size()};

  std::shared_ptr<const runtime::Snapshot> snapshot_;  // the one snapshot this exchange reads
  // The routing table built from snapshot_, held as long as snapshot_: pointers into it (an
  // external-auth or basic-auth configuration, a metric label id) stay valid across a
  // configuration change that happens while the exchange waits.
  std::shared_ptr<const RouteTable> routes_;
  const runtime::UpstreamState* upstream_ = nullptr;
  upstream::Attempt up_;  // the current attempt's upstream side (HTTP/1.1 or HTTP/2)
  std::optional<LocalResponse> local_response_;
  unsigned attempts_ = 0;
  // proxy-next-upstream-timeout: past it no further endpoint is tried. Unset: no limit.
  std::optional<std::chrono::steady_clock::time_point> retry_deadline_;
  // The client of the current request (source ranges, rate limits, ip_hash): the peer, or the
  // address X-Forwarded-For gives when the peer is a trusted proxy.
  std::optional<ratelimit::IpAddress> client_ip_;
  // The host's client certificate settings (alive with snapshot_) and the connection's verdict
  // under them (alive with the connection); null: the host asks for none.
  const tls::CompiledClientAuth* client_auth_ = nullptr;
  const tls::PeerCertificate::Verdict* client_verdict_ = nullptr;
  tls::PeerCertificate* client_peer_ = nullptr;  // the connection's, for ssl-client-cert
  // The scheme the client used: TLS to us, or (from a trusted proxy) its X-Forwarded-Proto.
  // Decides ssl-redirect and HSTS, and is what X-Forwarded-Proto says upstream.
  bool client_https_ = false;
  // custom-http-errors: the request target as the client sent it (X-Original-URI), kept only on
  // routes with error codes; and whether the current attempt asks for an error page.
  std::string original_target_;
  bool error_page_ = false;
  // The route has no usable backend for this request (a Gateway API rule whose backendRef
  // could not be resolved): answered 500.
  bool no_backend_ = false;
  // Load balancing of this exchange. balancer_ is upstream_'s Balancer of this worker, kept
  // alive by snapshot_ (or, in a tunnel, by tunnel_balancer_) until end_attempt().
  balancer::Balancer* balancer_ = nullptr;
  balancer::Tried tried_;
  balancer::RequestKey balance_key_;
  uint32_t cookie_endpoint_ = kNoEndpoint;  // the endpoint the request's affinity cookie names
  uint32_t endpoint_index_ = kNoEndpoint;   // of the current attempt
  bool attempt_open_ = false;               // on_start called, on_finish not yet
  bool attempt_failed_ = false;             // answered with a proxy-next-upstream status
  bool timed_attempts_ = false;             // ewma: latencies are measured
  std::chrono::steady_clock::time_point attempt_started_;
  std::chrono::nanoseconds attempt_latency_{-1};  // to the response header; -1: none yet
  std::shared_ptr<const balancer::UpstreamBalancer> tunnel_balancer_;
  bool expect_continue_ = false;
  // end() ran (the client side failed or closed): upstream completions still pending return
  // without acting (no retry, no answer, no failure marking). Cleared by reset().
  bool cancelled_ = false;
  // The gRPC code of the next answer of the proxy's own when the HTTP status alone would map
  // to another (a rate limit's 503 is RESOURCE_EXHAUSTED, not UNAVAILABLE).
  std::optional<GrpcStatus> grpc_code_;
  int grpc_status_sent_ = -1;  // the grpc-status in the response head sent; -1: none
  // auth-type basic: the WWW-Authenticate value of the 401 being answered (the route's, alive
  // with the snapshot).
  const std::string* challenge_ = nullptr;
  // A gRPC call's deadline from its grpc-timeout, or the route's request_timeout (the earlier
  // of the two): every upstream wait ends by then.
  std::optional<std::chrono::steady_clock::time_point> call_deadline_;
  bool request_body_started_ = false;
  // HTTP/2 client on an HTTP/2 upstream with a request body: the request and the response are
  // relayed side by side (bidirectional streaming), the request through duplex_buffer_.
  bool duplex_ = false;
  bool response_pump_started_ = false;
  static constexpr std::size_t kDuplexBufferBytes = 16 * 1024;
  std::unique_ptr<std::array<char, kDuplexBufferBytes>> duplex_buffer_;
  // Every request body byte read so far is in the request buffer from its start (reads go one
  // after the other into it while they fit, and no response body has been read into it yet):
  // an attempt that failed before the response may be made again, the buffered bytes first,
  // as if the body had not been started.
  bool body_replayable_ = true;
  std::size_t body_bytes_in_buffer_ = 0;
  char* read_to_ = nullptr;  // where the pending request body read goes
  bool response_started_ = false;
  bool idempotent_ = false;
  bool grpc_ = false;  // a gRPC request (server/grpc.h), decided once in begin()
  bool head_request_ = false;
  bool upgrade_ = false;
  std::string upgrade_protocol_;
  // enable-cors: the route's compiled settings and the request's allowed Origin (empty: no CORS
  // fields on the response).
  const CompiledCors* cors_ = nullptr;
  bool canary_chosen_ = false;
  std::string cors_origin_;
  // limit-connections: held for the exchange (released when it is recorded as ended).
  std::optional<ratelimit::ConnectionLimiter::Lease> connection_lease_;

  // auth-url: the call to the authentication service (exchange_auth.cc).
  const runtime::UpstreamState* auth_upstream_ = nullptr;
  const CompiledExternalAuth* auth_ = nullptr;
  upstream::Http1Upstream auth_up_;
  std::optional<upstream::Http1Upstream::Request> auth_request_;
  balancer::Balancer* auth_balancer_ = nullptr;
  balancer::Tried auth_tried_;
  uint32_t auth_endpoint_ = kNoEndpoint;
  unsigned auth_attempts_ = 0;
  bool auth_attempt_open_ = false;
  std::size_t auth_body_bytes_ = 0;
  AuthAnswer auth_answer_;
  std::string auth_cache_key_;
  // Set-Cookie values of the service's 2xx answer: added to the client's response (2xx/3xx, or
  // any with auth-always-set-cookie); and the fields of an answer of the proxy's own that the
  // service's answer gives (WWW-Authenticate of a 401, its cookies with always-set-cookie).
  std::vector<std::string> auth_cookies_;
  std::vector<std::pair<std::string, std::string>> local_fields_;

  // Request mirroring: the mirrors this request goes to, waiting for its body (kept here, at
  // most Limits::kMaxMirrorBodyBytes) while mirror_body_wanted_.
  std::vector<const runtime::UpstreamState*> mirror_targets_;
  std::string mirror_body_;
  bool mirror_body_wanted_ = false;  // holds one of the worker's mirror captures while true

  // The response body filters: substitution first (docs/substitutions.md, "In the proxy").
  SubstitutionFilter substitution_;
  CompressionFilter compression_;  // after substitution: it compresses the rewritten body
  ResponseFilterChain filters_;
  bool filter_more_ = false;  // the filters had input left after the turn being written
  bool last_sent_ = false;    // the body's end is in the write under way

  // enable-cache: the state of this request, its key, the fill it owns (request collapsing),
  // the request's fields as received (for Vary), the response being captured.
  enum class CacheState { kOff, kBypass, kMiss, kHit };
  static constexpr std::chrono::seconds kCacheLockTimeout{5};
  CacheState cache_state_ = CacheState::kOff;
  std::string cache_key_;
  bool cache_filling_ = false;
  // A wait is woken once, by the fill's end or the timer: the first bumps the token, the other
  // then sees a token that is not its own. Never reset (a late wake-up of an earlier request
  // must not act on the next one).
  uint64_t cache_wait_token_ = 0;
  using CacheTimer =
      boost::asio::basic_waitable_timer<std::chrono::steady_clock,
                                        boost::asio::wait_traits<std::chrono::steady_clock>,
                                        runtime::Executor>;
  std::optional<CacheTimer> cache_timer_;
  FieldList cache_request_fields_;
  std::shared_ptr<CachedResponse> cache_capture_;

  // X-Sendfile: in effect for this request (go_to_backend()); the file being sent, where the
  // next part starts and how much is left.
  bool sendfile_ = false;
  FileHandle file_;
  uint64_t file_offset_ = 0;
  uint64_t file_left_ = 0;
  static constexpr std::size_t kFilePartBytes = 1024 * 1024;  // per sendfile(2) turn

  // 64-byte aligned, as the start of the parser's buffer it is filled from usually is: a copy
  // whose destination lies 1 to 63 bytes past its source modulo 4 KiB runs 2 to 15 times slower
  // (docs/substitutions.md, "Streaming and fairness").
  alignas(64) std::array<char, Limits::kRelayBufferBytes> relay_buffer_;

  // Observation of the current exchange.
  bool exchange_open_ = false;
  const model::Route* route_ = nullptr;
  unsigned status_sent_ = 0;  // 0: nothing sent
  uint64_t bytes_in_ = 0;     // request header block and body
  uint64_t bytes_out_ = 0;    // everything written to the client
  runtime::Endpoint upstream_endpoint_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point upstream_started_;   // first attempt
  std::chrono::steady_clock::time_point upstream_answered_;  // final response header read
  std::chrono::steady_clock::time_point connect_started_;
  std::chrono::system_clock::time_point started_wall_;
};

}  // namespace tidegate::dataplane::server
