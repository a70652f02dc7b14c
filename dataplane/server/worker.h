#pragma once
// A worker: one thread running one io_context, its own SO_REUSEPORT listeners (HTTP and HTTPS),
// its own upstream connection pool, its own certificate cache and its own pointer to the current
// configuration snapshot. Connections never move between workers, so nothing on the request path
// is shared with another thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "observability/access_log.h"
#include "observability/metrics.h"
#include "ratelimit/cidr_set.h"
#include "runtime/snapshot.h"
#include "server/downstream.h"
#include "server/limits.h"
#include "server/response_cache.h"
#include "server/route_table.h"
#include "server/substitution.h"
#include "tls/certificate_cache.h"
#include "upstream/http2_client.h"
#include "upstream/pool.h"

namespace tidegate::dataplane::server {

// What the worker needs from any session (worker thread only): to drain it, and to close it
// when it waits for a request head and the connection limit needs its place.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Stop taking requests: an idle connection closes now, a busy one after its response; a
  // tunnel is left alone until `close_now()`.
  virtual void drain() = 0;
  virtual void close_now() = 0;

 private:
  friend class Worker;
  bool waiting_ = false;
  std::list<SessionBase*>::iterator waiting_at_;
};

class Worker {
 public:
  // `tls` may be null (no HTTPS listener); it must outlive the worker.
  Worker(size_t id, const Limits& limits, boost::asio::ssl::context* tls,
         const tls::ServerSettings& tls_settings);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Bind a listener (SO_REUSEPORT, so every worker binds the same address); returns the bound
  // endpoint or sets ec.
  boost::asio::ip::tcp::endpoint listen(const boost::asio::ip::tcp::endpoint& at,
                                        boost::system::error_code& ec);
  boost::asio::ip::tcp::endpoint listen_tls(const boost::asio::ip::tcp::endpoint& at,
                                            boost::system::error_code& ec);
  void start();  // starts the thread
  void stop();   // stops at once
  // Graceful: stop accepting, close idle connections, let requests finish, close what is left
  // (tunnels included) at `deadline`; the thread ends when no connection is left.
  void drain(std::chrono::steady_clock::time_point deadline);
  void join();

  // Before start(): where this worker records metrics and access log lines (its own shard and
  // queue; either may be null: nothing recorded).
  void observe(observability::WorkerMetrics* metrics, observability::AccessLogProducer* log) {
    metrics_ = metrics;
    access_log_ = log;
  }

  // Before start(): the proxies (--trusted-proxies) whose X-Forwarded-For names the client for
  // ip_hash, $remote_addr, source ranges and rate limits (ratelimit/client_address.h). Empty
  // (the default): the connection's peer is the client.
  void trust_proxies(ratelimit::CidrSet proxies) { trusted_proxies_ = std::move(proxies); }

  // Called from the control thread: the new snapshot reaches this worker through its own queue,
  // with the compiled per-route data of its routing table (may be null; see route_table.h).
  void publish(std::shared_ptr<const runtime::Snapshot> snapshot,
               std::shared_ptr<const RouteTable> routes = nullptr);

  // Worker-thread only.
  const std::shared_ptr<const runtime::Snapshot>& snapshot() const { return snapshot_; }
  // The routing table published with snapshot() (null when metrics and policies need none). An
  // exchange looks its route up in the table it took with its snapshot (Exchange::routes_), not
  // here: this one may be newer than the route it routed with.
  const std::shared_ptr<const RouteTable>& routes() const { return routes_; }
  // Null when metrics are off; otherwise this worker's shard.
  observability::WorkerMetrics* metrics() const { return metrics_; }
  // Null when access logs are off.
  observability::AccessLogProducer* access_log() const { return access_log_; }
  upstream::Pool& pool() { return pool_; }
  // enable-cache: this worker's shard of the response cache (docs/annotations.md).
  ResponseCache& cache() { return cache_; }
  upstream::Http2Pool& http2_pool() { return http2_pool_; }
  tls::CertificateCache& certificates() { return certificates_; }
  // Body substitution: the memo and the counters (docs/substitutions.md).
  SubstitutionWorkerState& substitution() { return substitution_; }
  size_t id() const { return id_; }
  const Limits& limits() const { return limits_; }
  const ratelimit::CidrSet& trusted_proxies() const { return trusted_proxies_; }
  boost::asio::io_context& io() { return io_; }
  uint64_t next_random();  // request ids
  // Mirrored requests of this worker in flight (server/mirror.h).
  size_t mirrors_in_flight() const { return mirrors_in_flight_; }
  void mirror_started() { ++mirrors_in_flight_; }
  void mirror_ended() { --mirrors_in_flight_; }
  // Requests of this worker whose bodies are being kept for their copies (Exchange).
  bool take_mirror_capture() {
    if (mirror_captures_ >= Limits::kMaxMirrorCaptures) return false;
    ++mirror_captures_;
    return true;
  }
  void end_mirror_capture() { --mirror_captures_; }
  void add_session(SessionBase* s) { sessions_.insert(s); }
  void remove_session(SessionBase* s);
  // A session waits for a request head (idle keep-alive, or a head that has not arrived yet):
  // at the connection limit the one that has waited longest is closed to make room.
  void waiting_for_request(SessionBase* s);
  void not_waiting(SessionBase* s);
  // `timeout` as the connection pressure leaves it (Limits::max_connections): unchanged below
  // kPressureStart, shrinking linearly to kPressureMinTimeout at kPressureFull.
  std::chrono::milliseconds under_pressure(std::chrono::milliseconds timeout) const;

  // The SSL ex_data slot that carries the Worker* for the SNI callback.
  static int ssl_ex_index();
  // The slot that carries a Gateway listener's name (const std::string*; unset: the data
  // plane's own HTTPS listener) for the SNI callback.
  static int listener_ex_index();
  // The SNI callback installed on the default context (see main.cc).
  static int on_server_name(SSL* ssl, int* alert, void* arg);
  // The client-hello callback installed on the default context (see main.cc): asks for a client
  // certificate when the SNI names a host with client certificates (tls/client_auth.h).
  static int on_client_hello(SSL* ssl, int* alert, void* arg);

  // Any thread: counters.
  std::atomic<uint64_t> active_connections{0};
  std::atomic<uint64_t> total_requests{0};
  std::atomic<uint64_t> tls_handshakes{0};
  std::atomic<uint64_t> tls_handshake_failures{0};
  std::atomic<uint64_t> open_tunnels{0};

 private:
  using Acceptor = boost::asio::ip::tcp::acceptor;
  std::unique_ptr<Acceptor> bind(const boost::asio::ip::tcp::endpoint& at,
                                 boost::system::error_code& ec);
  // Accepts on the HTTP (tls false) or HTTPS listener, one connection at a time, for ever.
  void do_accept(bool tls);
  // Gateway listeners (model::Listener): opened on the HTTP listener's address when a snapshot
  // first names them, closed when one no longer does (the connections they accepted stay).
  struct GatewayListener {
    model::Listener spec;
    ListenerName name;
    std::unique_ptr<Acceptor> acceptor;
    boost::asio::ip::tcp::endpoint peer;
  };
  void sync_gateway_listeners();
  void do_accept(const std::shared_ptr<GatewayListener>& listener);
  void close_gateway_listeners();
  // Before a new connection: makes room at the limit. False: the new one must be closed.
  bool admit();
  // Accept errors (EMFILE, ...): counted, logged at most once a second, accepting paused briefly.
  void accept_failed(const boost::system::error_code& ec, bool tls);
  void arm_sweep();

  size_t id_;
  Limits limits_;
  ResponseCache cache_{limits_.cache_bytes_per_worker, limits_.cache_max_item_bytes};
  ratelimit::CidrSet trusted_proxies_;
  boost::asio::ssl::context* tls_;
  // Declared before io_ so that they outlive it: destroying io_ destroys pending handlers, and
  // with them sessions, whose destructors unregister here.
  std::unordered_set<SessionBase*> sessions_;
  std::list<SessionBase*> waiting_;  // longest-waiting first
  // Rate-limited reports (at most one line a second each).
  struct Report {
    std::chrono::steady_clock::time_point last{};
    uint64_t count = 0;
  };
  Report accept_errors_;
  Report evictions_;
  Report refusals_;
  bool draining_ = false;
  bool destroying_ = false;
  // Before io_: a mirrored request still pending when io_ goes is destroyed with it.
  size_t mirrors_in_flight_ = 0;
  size_t mirror_captures_ = 0;
  // Only this worker's thread performs I/O on its sockets and timers; other threads reach it
  // through post() (snapshots, stop, drain), which keeps the scheduler's lock. So the reactor's
  // per-descriptor locking can go (measured: pthread_mutex_lock in the request path's profile).
  boost::asio::io_context io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  std::unique_ptr<Acceptor> acceptor_;
  std::unique_ptr<Acceptor> tls_acceptor_;
  std::optional<boost::asio::ip::address> listen_address_;  // of the HTTP listener
  std::map<std::string, std::shared_ptr<GatewayListener>, std::less<>> gateway_listeners_;
  std::set<std::string, std::less<>> failed_listeners_;  // reported once until they go away
  // Where each acceptor writes the address of the connection it accepts.
  boost::asio::ip::tcp::endpoint accept_peer_;
  boost::asio::ip::tcp::endpoint tls_accept_peer_;
  boost::asio::steady_timer sweep_timer_;
  boost::asio::steady_timer drain_timer_;
  std::shared_ptr<const runtime::Snapshot> snapshot_;
  std::shared_ptr<const RouteTable> routes_;
  observability::WorkerMetrics* metrics_ = nullptr;
  observability::AccessLogProducer* access_log_ = nullptr;
  upstream::Pool pool_;
  upstream::Http2Pool http2_pool_;
  tls::CertificateCache certificates_;
  SubstitutionWorkerState substitution_;
  uint64_t rng_state_;
  std::thread thread_;
};

}  // namespace tidegate::dataplane::server
