#pragma once
// One downstream HTTP/1.1 connection, plain or TLS. Requests are handled one at a time in arrival
// order (so pipelined requests are answered in order); each exchange picks an upstream
// connection, streams the request body up and the response body down through one fixed relay
// buffer, then returns the upstream connection to the worker's pool. An accepted upgrade (101)
// turns the connection into a byte tunnel that no configuration change closes. Every
// asynchronous operation holds shared_from_this(); errors are answered (4xx/5xx with a short
// body) or close the connection, never thrown.

#include <array>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "balancer/balancer.h"
#include "filters/substitution/stream.h"
#include "observability/metrics.h"
#include "ratelimit/connection_limiter.h"
#include "runtime/io_types.h"
#include "runtime/snapshot.h"
#include "server/cors.h"
#include "server/headers.h"
#include "server/limits.h"
#include "server/wire.h"
#include "tls/server_stream.h"
#include "upstream/pool.h"

namespace tidegate::dataplane::server {

class Worker;

// TLS termination: OpenSSL over the TCP stream with our own BIO (tls/server_stream.h).
using TlsStream = tls::ServerStream;

// What the worker needs from any session to drain it (worker thread only).
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Stop taking requests: an idle connection closes now, a busy one after its response; a
  // tunnel is left alone until `close_now()`.
  virtual void drain() = 0;
  virtual void close_now() = 0;
};

template <class ClientStream>
class HttpSession : public SessionBase,
                    public std::enable_shared_from_this<HttpSession<ClientStream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<ClientStream, runtime::Stream>;

  // `tls` is used (and required) only by the TLS instantiation.
  // `peer`: the client's address, as accept returned it.
  HttpSession(Worker& worker, runtime::Socket socket, const boost::asio::ip::tcp::endpoint& peer,
              boost::asio::ssl::context* tls = nullptr);
  ~HttpSession() override;
  void start();
  void drain() override;
  void close_now() override;

 private:
  using error_code = boost::system::error_code;
  using RequestParser =
      boost::beast::http::request_parser<boost::beast::http::buffer_body, FieldsAllocator>;
  using ResponseParser =
      boost::beast::http::response_parser<boost::beast::http::buffer_body, FieldsAllocator>;
  // kLingering: an error answer is sent and our side shut; the client's unread bytes are read
  // and dropped until it closes (linger()).
  enum class State { kIdle, kBusy, kTunnel, kLingering, kClosed };

  runtime::Stream& lowest() { return boost::beast::get_lowest_layer(client_); }
  static ClientStream make_client(runtime::Socket&& socket, boost::asio::ssl::context* tls) {
    if constexpr (kTls) {
      return ClientStream(runtime::Stream(std::move(socket)), *tls);
    } else {
      return ClientStream(std::move(socket));
    }
  }
  void on_handshake(error_code ec);
  void do_read_header();
  void on_read_header(error_code ec, std::size_t header_bytes);
  void handle_request();
  void redirect_to_https(const RequestTarget& target);
  void prepare_upstream_request();
  // The matched route's policy (defaults without a route), applied before the upstream: source
  // ranges (403), redirects, app-root, body size (413). False when it answered the request.
  const model::RoutePolicy& policy() const;
  bool apply_route_policy(const RequestTarget& target);
  void rewrite_upstream_request(const RequestTarget& target);
  // The client address of this request: the peer, or through --trusted-proxies.
  void resolve_client();
  // Load balancing (docs/proxy.md, "Choosing an endpoint"): start_balancing() reads what the
  // balancer needs from the request as received (the hash key, the affinity cookie);
  // pick_endpoint() returns the endpoint for the next attempt (the cookie's while untried, else
  // the balancer's), or kNone when every endpoint was tried; connect_endpoint() starts an
  // attempt on it; end_attempt() reports its end to the balancer (idempotent).
  static constexpr uint32_t kNoEndpoint = balancer::Balancer::kNone;
  void start_balancing();
  uint32_t pick_endpoint();
  // This attempt's connect timeout: Limits::kFailoverConnectTimeout while another endpoint is
  // left for a retry on timeout, else the route's proxy-connect-timeout.
  std::chrono::milliseconds attempt_connect_timeout() const;
  void connect_endpoint(uint32_t index);
  void end_attempt(bool failed);
  // proxy-next-upstream http_502/503/504: true when this response was discarded and the
  // request moved on to another endpoint.
  bool retry_on_status(unsigned status);
  void add_affinity_cookie(boost::beast::http::response_header<Fields>& res);
  void on_connect(error_code ec);
  void start_upstream_tls();
  void send_request();
  void read_request_body();
  void on_read_request_body(error_code ec);
  void write_request(const char* data, std::size_t n, bool last);
  void on_write_request(error_code ec);
  void read_response_header();
  void on_response_header(error_code ec);
  void relay_response();
  void read_response_body();
  void on_read_response_body(error_code ec);
  void write_response(const char* data, std::size_t n, bool last);
  void on_write_response(error_code ec);
  // Body substitution (docs/substitutions.md, "In the proxy").
  bool begin_substitution(bool body_expected, unsigned status);
  void pump_substitution();
  void write_substituted(bool more);
  void end_substitution();
  void finish_exchange();
  void upstream_failed(error_code ec, const char* stage);
  // A short plain-text answer from the proxy itself (errors, redirects).
  void send_error(unsigned status, std::string_view text, bool close,
                  std::string_view location = {}, long retry_after_seconds = 0);
  // Writes error_response_ (prepared by the caller) and ends the exchange when it is written.
  void write_local_response();
  void on_error_written(error_code ec, bool close);
  // enable-cors: answers a preflight from an allowed origin (true: answered); otherwise notes
  // the origin for the response fields (add_cors_fields).
  bool apply_cors();
  template <class Fields>
  void add_cors_fields(boost::beast::http::header<false, Fields>& res) const;
  // The route's backend for this request: the main one or its canary (docs/annotations.md).
  const runtime::UpstreamState* choose_upstream();
  // The metric labels of this exchange: the route's, or its canary's when the canary serves it.
  observability::LabelSetId labels() const;
  void close_client();
  void linger();
  void linger_read(std::chrono::steady_clock::time_point deadline);
  // Tunnel (after a 101).
  void start_tunnel();
  void tunnel_client_to_upstream();
  void tunnel_upstream_to_client();
  void end_tunnel();
  // Metrics and the access log: one record per exchange, whichever way it ends.
  bool observing() const;
  void begin_observation(std::size_t header_bytes);
  void end_observation();

  Worker& worker_;
  ClientStream client_;
  boost::beast::flat_buffer client_buffer_;
  std::string peer_address_;
  std::optional<ratelimit::IpAddress> peer_ip_;
  // The client of the current request (source ranges, rate limits, ip_hash): peer_ip_, or the
  // address X-Forwarded-For gives when the peer is a trusted proxy.
  std::optional<ratelimit::IpAddress> client_ip_;
  State state_ = State::kIdle;
  bool draining_ = false;

  // The header fields of one exchange (request and response) live here; released when the next
  // request starts. Headers past the inline block spill to the heap, also released then.
  std::array<std::byte, 4096> fields_block_;
  std::pmr::monotonic_buffer_resource fields_arena_{fields_block_.data(), fields_block_.size()};

  // One exchange.
  std::optional<RequestParser> request_;
  std::optional<ResponseParser> response_;
  OutgoingMessage upstream_out_;  // the request as it goes to the upstream
  OutgoingMessage client_out_;    // the response as it goes to the client
  std::optional<boost::beast::http::response<boost::beast::http::string_body>> error_response_;
  std::shared_ptr<const runtime::Snapshot> snapshot_;  // the one snapshot this exchange reads
  const runtime::UpstreamState* upstream_ = nullptr;
  std::unique_ptr<upstream::Connection> connection_;
  unsigned attempts_ = 0;
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
  bool client_keep_alive_ = false;
  bool expect_continue_ = false;
  bool request_body_started_ = false;
  bool response_started_ = false;
  bool idempotent_ = false;
  bool head_request_ = false;
  bool upgrade_ = false;
  // The request may go up as an upgrade (RequestVerdict::websocket_upgrade).
  bool upgrade_allowed_ = false;
  std::string upgrade_protocol_;
  unsigned client_version_ = 11;
  // enable-cors: the route's compiled settings and the request's allowed Origin (empty: no CORS
  // fields on the response).
  const CompiledCors* cors_ = nullptr;
  bool canary_chosen_ = false;
  std::string cors_origin_;

  // Body substitution of this exchange: the route's rules (null when it has none), the memo key
  // ("host" + request target, the upstream's validator), the stream while a body is processed
  // and its output, drained to the client after each slice. sub_out_ keeps its capacity between
  // exchanges (about one slice).
  const runtime::CompiledSubstitution* substitution_ = nullptr;
  std::string memo_resource_;
  std::string memo_validator_;
  std::optional<filters::SubstitutionStream> sub_stream_;
  std::string sub_out_;
  size_t sub_slice_ = 0;

  std::array<char, Limits::kRelayBufferBytes> relay_buffer_;
  // The upstream-to-client direction of a tunnel needs its own buffer.
  std::unique_ptr<std::array<char, Limits::kRelayBufferBytes>> tunnel_buffer_;
  bool tunnel_half_closed_ = false;
  // limit-connections: held for the exchange (released when it is recorded as ended).
  std::optional<ratelimit::ConnectionLimiter::Lease> connection_lease_;
  std::chrono::milliseconds tunnel_idle_{60'000};

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

extern template class HttpSession<runtime::Stream>;
extern template class HttpSession<TlsStream>;

}  // namespace tidegate::dataplane::server
