#include "server/worker.h"

#include <algorithm>
#include <cctype>
#include <random>

#include <boost/asio/post.hpp>

#include "log/log.h"
#include "server/http1_connection.h"

namespace tidegate::dataplane::server {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

Worker::Worker(size_t id, const Limits& limits, asio::ssl::context* tls,
               const tls::ServerSettings& tls_settings)
    : id_(id),
      limits_(limits),
      tls_(tls),
      sweep_timer_(io_),
      drain_timer_(io_),
      certificates_(tls_settings),
      rng_state_(std::random_device{}()) {
  rng_state_ = (rng_state_ << 32) ^ std::random_device{}() ^ (uint64_t{id} << 56);
}

Worker::~Worker() {
  stop();
  join();
  destroying_ = true;
}

std::unique_ptr<Worker::Acceptor> Worker::bind(const tcp::endpoint& at,
                                               boost::system::error_code& ec) {
  auto acceptor = std::make_unique<Acceptor>(io_);
  acceptor->open(at.protocol(), ec);
  if (ec) return nullptr;
  acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;
  acceptor->set_option(reuse_port(true), ec);
  if (ec) return nullptr;
  acceptor->bind(at, ec);
  if (ec) return nullptr;
  acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return nullptr;
  return acceptor;
}

tcp::endpoint Worker::listen(const tcp::endpoint& at, boost::system::error_code& ec) {
  listen_address_ = at.address();
  acceptor_ = bind(at, ec);
  return acceptor_ ? acceptor_->local_endpoint(ec) : tcp::endpoint{};
}

tcp::endpoint Worker::listen_tls(const tcp::endpoint& at, boost::system::error_code& ec) {
  tls_acceptor_ = bind(at, ec);
  return tls_acceptor_ ? tls_acceptor_->local_endpoint(ec) : tcp::endpoint{};
}

void Worker::start() {
  asio::post(io_, [this] {
    if (acceptor_) do_accept(false);
    if (tls_acceptor_ && tls_) do_accept(true);
    arm_sweep();
  });
  thread_ = std::thread([this] {
    // Handlers never throw on purpose; a throw here is a bug, so log it and keep serving.
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        TG_ERROR("worker", "worker " << id_ << ": unexpected exception: " << e.what());
      }
    }
  });
}

void Worker::stop() {
  asio::post(io_, [this] {
    boost::system::error_code ec;
    if (acceptor_) acceptor_->close(ec);
    if (tls_acceptor_) tls_acceptor_->close(ec);
    close_gateway_listeners();
    sweep_timer_.cancel();
    io_.stop();
  });
}

void Worker::drain(std::chrono::steady_clock::time_point deadline) {
  asio::post(io_, [this, deadline] {
    draining_ = true;
    boost::system::error_code ec;
    if (acceptor_) acceptor_->close(ec);
    if (tls_acceptor_) tls_acceptor_->close(ec);
    close_gateway_listeners();
    sweep_timer_.cancel();
    pool_.retain_only({});
    http2_pool_.retain_only({});
    // drain() may close sessions, which removes them from the set: iterate over a copy.
    std::vector<SessionBase*> sessions(sessions_.begin(), sessions_.end());
    for (auto* s : sessions) {
      if (sessions_.contains(s)) s->drain();
    }
    if (sessions_.empty()) {
      io_.stop();
      return;
    }
    drain_timer_.expires_at(deadline);
    drain_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      TG_INFO("worker", "worker " << id_ << ": drain deadline reached, closing " << sessions_.size()
                                  << " connections");
      std::vector<SessionBase*> left(sessions_.begin(), sessions_.end());
      for (auto* s : left) {
        if (sessions_.contains(s)) s->close_now();
      }
      io_.stop();
    });
  });
}

void Worker::remove_session(SessionBase* s) {
  not_waiting(s);
  sessions_.erase(s);
  if (draining_ && !destroying_ && sessions_.empty()) {
    drain_timer_.cancel();
    io_.stop();
  }
}

void Worker::join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::publish(std::shared_ptr<const runtime::Snapshot> snapshot,
                     std::shared_ptr<const RouteTable> routes) {
  asio::post(io_, [this, snapshot = std::move(snapshot), routes = std::move(routes)]() mutable {
    snapshot_ = std::move(snapshot);
    routes_ = std::move(routes);
    sync_gateway_listeners();
    // Idle connections to endpoints that left close now; busy ones finish their exchange and are
    // closed instead of being returned to the pool (see Exchange::finish).
    pool_.retain_only(snapshot_->all_endpoints);
    http2_pool_.retain_only(snapshot_->all_endpoints);
  });
}

uint64_t Worker::next_random() {
  // splitmix64: fast, good enough for request ids (not for secrets).
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int Worker::ssl_ex_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

int Worker::listener_ex_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

int Worker::on_server_name(SSL* ssl, int*, void*) {
  // Runs on the worker thread that owns this connection, inside the handshake.
  auto* worker = static_cast<Worker*>(SSL_get_ex_data(ssl, ssl_ex_index()));
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (worker == nullptr || name == nullptr || !worker->snapshot_) return SSL_TLSEXT_ERR_OK;
  char lower[256];
  size_t n = 0;
  for (; name[n] != '\0'; ++n) {
    if (n + 1 >= sizeof lower) return SSL_TLSEXT_ERR_OK;  // longer than any DNS name
    lower[n] = static_cast<char>(std::tolower(static_cast<unsigned char>(name[n])));
  }
  if (n > 0 && lower[n - 1] == '.') --n;
  const auto* listener = static_cast<const std::string*>(SSL_get_ex_data(ssl, listener_ex_index()));
  const auto* entry = listener == nullptr
                          ? worker->snapshot_->find_tls(std::string_view(lower, n))
                          : worker->snapshot_->find_tls(*listener, std::string_view(lower, n));
  if (entry == nullptr || entry->certificate == nullptr) return SSL_TLSEXT_ERR_OK;  // the default
  SSL_CTX* ctx = worker->certificates_.get(*entry->certificate, entry->fingerprint);
  if (ctx == nullptr) return SSL_TLSEXT_ERR_OK;
  SSL_set_SSL_CTX(ssl, ctx);
  // SSL_set_SSL_CTX replaces the connection's certificate settings, the verify store with them.
  auto* peer =
      static_cast<tls::PeerCertificate*>(SSL_get_ex_data(ssl, tls::peer_certificate_ex_index()));
  if (peer != nullptr && peer->asked_under() != nullptr) peer->asked_under()->restore_store(ssl);
  return SSL_TLSEXT_ERR_OK;
}

int Worker::on_client_hello(SSL* ssl, int*, void*) {
  // Before session resumption is decided, so that the session-id context it sets keeps a
  // session of another host (or of no client certificate) from resuming (tls/client_auth.h).
  auto* worker = static_cast<Worker*>(SSL_get_ex_data(ssl, ssl_ex_index()));
  if (worker == nullptr || !worker->snapshot_ || !worker->snapshot_->routing->client_auth ||
      SSL_get_ex_data(ssl, listener_ex_index()) != nullptr) {  // Gateway listeners: none
    return SSL_CLIENT_HELLO_SUCCESS;
  }
  auto* peer =
      static_cast<tls::PeerCertificate*>(SSL_get_ex_data(ssl, tls::peer_certificate_ex_index()));
  const unsigned char* data = nullptr;
  size_t size = 0;
  if (peer == nullptr ||
      SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &data, &size) != 1) {
    return SSL_CLIENT_HELLO_SUCCESS;
  }
  std::string host;
  if (!tls::sni_from_extension(data, size, &host)) return SSL_CLIENT_HELLO_SUCCESS;
  const auto* entry = worker->snapshot_->find_tls(host);
  if (entry == nullptr || !entry->client_auth || entry->client_auth->broken()) {
    return SSL_CLIENT_HELLO_SUCCESS;
  }
  entry->client_auth->ask_for_certificate(ssl);
  peer->asked(entry->client_auth);
  return SSL_CLIENT_HELLO_SUCCESS;
}

void Worker::waiting_for_request(SessionBase* s) {
  if (s->waiting_) return;
  s->waiting_ = true;
  s->waiting_at_ = waiting_.insert(waiting_.end(), s);
}

void Worker::not_waiting(SessionBase* s) {
  if (!s->waiting_) return;
  s->waiting_ = false;
  waiting_.erase(s->waiting_at_);
}

std::chrono::milliseconds Worker::under_pressure(std::chrono::milliseconds timeout) const {
  const double pressure =
      static_cast<double>(sessions_.size()) / static_cast<double>(limits_.max_connections);
  if (pressure < Limits::kPressureStart) return timeout;
  const double left = std::max(
      0.0, (Limits::kPressureFull - pressure) / (Limits::kPressureFull - Limits::kPressureStart));
  const auto scaled = std::chrono::milliseconds(static_cast<int64_t>(timeout.count() * left));
  return std::max(std::min(timeout, Limits::kPressureMinTimeout), scaled);
}

namespace {

// Once a second at most: a line with how many times `what` happened since the last line.
template <class Report, class Line>
void report_rate_limited(Report& r, Line&& line) {
  ++r.count;
  const auto now = std::chrono::steady_clock::now();
  if (now - r.last < std::chrono::seconds(1)) return;
  line(r.count);
  r.count = 0;
  r.last = now;
}

}  // namespace

bool Worker::admit() {
  if (sessions_.size() < limits_.max_connections) return true;
  if (!waiting_.empty()) {
    // The connection that has waited longest for a request head makes room.
    SessionBase* oldest = waiting_.front();
    not_waiting(oldest);
    oldest->close_now();
    report_rate_limited(evictions_, [this](uint64_t n) {
      TG_WARN("worker", "worker " << id_ << ": at the connection limit (" << limits_.max_connections
                                  << "): closed " << n
                                  << " connection(s) waiting for a request to make room");
    });
    return true;
  }
  report_rate_limited(refusals_, [this](uint64_t n) {
    TG_WARN("worker", "worker " << id_ << ": at the connection limit (" << limits_.max_connections
                                << ") with every connection busy: refused " << n
                                << " new connection(s)");
  });
  return false;
}

void Worker::accept_failed(const boost::system::error_code& ec, bool tls) {
  // EMFILE and friends: count, log at most once a second, pause briefly, keep accepting.
  report_rate_limited(accept_errors_, [&](uint64_t n) {
    TG_WARN("worker", "worker " << id_ << ": accept" << (tls ? " (TLS)" : "") << " failed: "
                                << ec.message() << " (" << n << " time(s) since the last report)");
  });
  auto t = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(50));
  t->async_wait([this, t, tls](boost::system::error_code) {
    if ((tls ? tls_acceptor_ : acceptor_)->is_open()) do_accept(tls);
  });
}

void Worker::do_accept(bool tls) {
  // The peer's address comes with accept (no getpeername per connection).
  Acceptor& acceptor = tls ? *tls_acceptor_ : *acceptor_;
  tcp::endpoint& peer = tls ? tls_accept_peer_ : accept_peer_;
  acceptor.async_accept(io_.get_executor(), peer,
                        [this, tls](boost::system::error_code ec, runtime::Socket socket) {
                          if (ec == asio::error::operation_aborted || draining_) return;
                          if (ec) {
                            accept_failed(ec, tls);
                            return;
                          }
                          if (admit()) {
                            boost::system::error_code opt_ec;
                            socket.set_option(tcp::no_delay(true), opt_ec);
                            if (tls) {
                              std::make_shared<Http1Connection<TlsStream>>(*this, std::move(socket),
                                                                           tls_accept_peer_, tls_)
                                  ->start();
                            } else {
                              std::make_shared<Http1Connection<runtime::Stream>>(
                                  *this, std::move(socket), accept_peer_)
                                  ->start();
                            }
                          }
                          do_accept(tls);
                        });
}

void Worker::sync_gateway_listeners() {
  if (draining_ || !snapshot_ || !listen_address_) return;
  const auto& wanted = snapshot_->routing->config.listeners;
  boost::system::error_code ec;
  for (auto it = gateway_listeners_.begin(); it != gateway_listeners_.end();) {
    auto w = wanted.find(it->first);
    if (w != wanted.end() && w->second == it->second->spec) {
      ++it;
      continue;
    }
    it->second->acceptor->close(ec);  // its pending accept ends with operation_aborted
    if (id_ == 0) {
      TG_INFO("worker", "closed listener " << it->first << " on port " << it->second->spec.port);
    }
    it = gateway_listeners_.erase(it);
  }
  for (auto it = failed_listeners_.begin(); it != failed_listeners_.end();) {
    it = wanted.contains(*it) ? std::next(it) : failed_listeners_.erase(it);
  }
  for (const auto& [name, spec] : wanted) {
    if (gateway_listeners_.contains(name)) continue;
    if (spec.tls && tls_ == nullptr) continue;  // no TLS context: never happens with main.cc
    auto listener = std::make_shared<GatewayListener>();
    listener->spec = spec;
    listener->name = std::make_shared<const std::string>(name);
    listener->acceptor = bind(tcp::endpoint(*listen_address_, spec.port), ec);
    if (!listener->acceptor) {
      // Another process holds the port: reported once; tried again with each snapshot.
      if (failed_listeners_.insert(name).second) {
        TG_ERROR("worker", "worker " << id_ << ": cannot open listener " << name << " on port "
                                     << spec.port << ": " << ec.message());
      }
      continue;
    }
    failed_listeners_.erase(name);
    if (id_ == 0) {
      TG_INFO("worker",
              "opened listener " << name << " on port " << spec.port << (spec.tls ? " (TLS)" : ""));
    }
    gateway_listeners_.emplace(name, listener);
    do_accept(listener);
  }
}

void Worker::close_gateway_listeners() {
  boost::system::error_code ec;
  for (auto& [name, listener] : gateway_listeners_) listener->acceptor->close(ec);
  gateway_listeners_.clear();
}

void Worker::do_accept(const std::shared_ptr<GatewayListener>& listener) {
  listener->acceptor->async_accept(
      io_.get_executor(), listener->peer,
      [this, listener](boost::system::error_code ec, runtime::Socket socket) {
        if (ec == asio::error::operation_aborted || draining_ || !listener->acceptor->is_open()) {
          return;
        }
        if (ec) {
          report_rate_limited(accept_errors_, [&](uint64_t n) {
            TG_WARN("worker", "worker " << id_ << ": accept on " << *listener->name
                                        << " failed: " << ec.message() << " (" << n
                                        << " time(s) since the last report)");
          });
          auto t = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(50));
          t->async_wait([this, t, listener](boost::system::error_code) {
            if (listener->acceptor->is_open()) do_accept(listener);
          });
          return;
        }
        if (admit()) {
          boost::system::error_code opt_ec;
          socket.set_option(tcp::no_delay(true), opt_ec);
          if (listener->spec.tls) {
            std::make_shared<Http1Connection<TlsStream>>(*this, std::move(socket), listener->peer,
                                                         tls_, listener->name)
                ->start();
          } else {
            std::make_shared<Http1Connection<runtime::Stream>>(
                *this, std::move(socket), listener->peer, nullptr, listener->name)
                ->start();
          }
        }
        do_accept(listener);
      });
}

void Worker::arm_sweep() {
  sweep_timer_.expires_after(std::chrono::seconds(5));
  sweep_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    pool_.expire(std::chrono::steady_clock::now());
    arm_sweep();
  });
}

}  // namespace tidegate::dataplane::server
