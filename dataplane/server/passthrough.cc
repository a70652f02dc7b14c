#include "server/passthrough.h"

#include <boost/asio/write.hpp>

#include "log/log.h"

namespace tidegate::dataplane::server {

namespace asio = boost::asio;

PassthroughConnection::PassthroughConnection(Worker& worker, runtime::Stream client,
                                             std::string received,
                                             std::vector<runtime::Endpoint> endpoints,
                                             std::string peer, std::string upstream)
    : worker_(worker),
      client_(std::move(client)),
      upstream_(worker.io().get_executor()),
      received_(std::move(received)),
      endpoints_(std::move(endpoints)),
      peer_(std::move(peer)),
      upstream_name_(std::move(upstream)),
      idle_timer_(worker.io().get_executor()) {
  worker_.add_session(this);
}

PassthroughConnection::~PassthroughConnection() {
  if (relaying_) {
    worker_.open_tunnels.fetch_sub(1, std::memory_order_relaxed);
    if (auto* m = worker_.metrics()) m->tunnel_closed();
  }
  worker_.active_connections.fetch_sub(1, std::memory_order_relaxed);
  if (auto* m = worker_.metrics()) m->connection_closed();
  worker_.remove_session(this);
}

void PassthroughConnection::start() {
  if (endpoints_.empty()) {
    TG_INFO("passthrough",
            "no endpoints for " << upstream_name_ << "; closing the connection of " << peer_);
    close();
    return;
  }
  first_ = static_cast<size_t>(worker_.next_random() % endpoints_.size());
  connect(0);
}

void PassthroughConnection::connect(size_t attempt) {
  const Limits& limits = worker_.limits();
  const size_t tries = std::min<size_t>(endpoints_.size(), limits.max_upstream_attempts);
  // Fast failover while another endpoint is left (as for HTTP, docs/proxy.md, "Retries").
  upstream_.expires_after(attempt + 1 < tries
                              ? std::min(limits.upstream_connect_timeout,
                                         std::chrono::milliseconds(Limits::kFailoverConnectTimeout))
                              : limits.upstream_connect_timeout);
  const auto& endpoint = endpoints_[(first_ + attempt) % endpoints_.size()];
  upstream_.async_connect(endpoint, [self = shared_from_this(), attempt](error_code ec) {
    self->on_connect(attempt, ec);
  });
}

void PassthroughConnection::on_connect(size_t attempt, error_code ec) {
  if (closed_) return;
  if (ec) {
    const size_t tries =
        std::min<size_t>(endpoints_.size(), worker_.limits().max_upstream_attempts);
    TG_DEBUG("passthrough", "connect to " << endpoints_[(first_ + attempt) % endpoints_.size()]
                                          << " failed: " << ec.message());
    if (attempt + 1 < tries) {
      upstream_.close();
      connect(attempt + 1);
      return;
    }
    TG_INFO("passthrough", "no endpoint of " << upstream_name_ << " took the connection of "
                                             << peer_ << ": " << ec.message());
    close();
    return;
  }
  error_code opt;
  upstream_.socket().set_option(asio::ip::tcp::no_delay(true), opt);
  relaying_ = true;
  worker_.open_tunnels.fetch_add(1, std::memory_order_relaxed);
  if (auto* m = worker_.metrics()) m->tunnel_opened();
  // The client's stream still carries the handshake deadline it was accepted with.
  client_.expires_never();
  upstream_.expires_never();
  last_active_ = std::chrono::steady_clock::now();
  arm_idle_check();
  // The ClientHello (and whatever came with it) first.
  asio::async_write(upstream_, asio::buffer(received_),
                    [self = shared_from_this()](error_code ec, std::size_t) {
                      if (ec) return self->close();
                      self->received_.clear();
                      self->received_.shrink_to_fit();
                      self->relay(true);
                    });
  relay(false);
}

void PassthroughConnection::arm_idle_check() {
  const auto idle = worker_.limits().passthrough_idle_timeout;
  idle_timer_.expires_after(
      std::min<std::chrono::steady_clock::duration>(idle, std::chrono::seconds(5)));
  idle_timer_.async_wait([self = shared_from_this(), idle](error_code ec) {
    if (ec || self->closed_) return;
    if (std::chrono::steady_clock::now() - self->last_active_ >= idle) {
      TG_DEBUG("passthrough", "idle for " << idle.count() << " ms: closing " << self->peer_);
      self->close();
      return;
    }
    self->arm_idle_check();
  });
}

void PassthroughConnection::direction_ended(bool client_side) {
  error_code ec;
  if (client_side) {
    client_ended_ = true;
    upstream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  } else {
    upstream_ended_ = true;
    client_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  }
  if (client_ended_ && upstream_ended_) close();
}

void PassthroughConnection::relay(bool from_client) {
  runtime::Stream& from = from_client ? client_ : upstream_;
  auto& buffer = from_client ? up_buffer_ : down_buffer_;
  from.async_read_some(asio::buffer(buffer), [self = shared_from_this(), from_client](
                                                 error_code ec, std::size_t n) {
    if (ec == asio::error::eof) return self->direction_ended(from_client);
    if (ec) return self->close();
    self->last_active_ = std::chrono::steady_clock::now();
    runtime::Stream& to = from_client ? self->upstream_ : self->client_;
    auto& data = from_client ? self->up_buffer_ : self->down_buffer_;
    asio::async_write(to, asio::buffer(data, n), [self, from_client](error_code ec, std::size_t) {
      if (ec) return self->close();
      self->relay(from_client);
    });
  });
}

void PassthroughConnection::close() {
  if (closed_) return;
  closed_ = true;
  idle_timer_.cancel();
  error_code ec;
  upstream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  upstream_.close();
  client_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  client_.close();
}

}  // namespace tidegate::dataplane::server
