#include "server/worker.h"

#include <random>

#include <boost/asio/post.hpp>

#include "log/log.h"
#include "server/http_session.h"

namespace tidegate::dataplane::server {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

Worker::Worker(size_t id, const Limits& limits)
    : id_(id), limits_(limits), sweep_timer_(io_), rng_state_(std::random_device{}()) {
  rng_state_ = (rng_state_ << 32) ^ std::random_device{}() ^ (uint64_t{id} << 56);
}

Worker::~Worker() {
  stop();
  join();
}

tcp::endpoint Worker::listen(const tcp::endpoint& at, boost::system::error_code& ec) {
  acceptor_ = std::make_unique<tcp::acceptor>(io_);
  acceptor_->open(at.protocol(), ec);
  if (ec) return {};
  acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;
  acceptor_->set_option(reuse_port(true), ec);
  if (ec) return {};
  acceptor_->bind(at, ec);
  if (ec) return {};
  acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return {};
  return acceptor_->local_endpoint(ec);
}

void Worker::start() {
  asio::post(io_, [this] {
    do_accept();
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
    sweep_timer_.cancel();
    io_.stop();
  });
}

void Worker::join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::publish(std::shared_ptr<const runtime::Snapshot> snapshot) {
  asio::post(io_, [this, snapshot = std::move(snapshot)]() mutable {
    snapshot_ = std::move(snapshot);
    // Idle connections to endpoints that left close now; busy ones finish their exchange and are
    // closed instead of being returned to the pool (see HttpSession::finish_exchange).
    pool_.retain_only(snapshot_->all_endpoints);
  });
}

uint64_t Worker::next_random() {
  // splitmix64: fast, good enough for request ids (not for secrets).
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void Worker::do_accept() {
  acceptor_->async_accept(io_.get_executor(), [this](boost::system::error_code ec,
                                                     runtime::Socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // EMFILE and friends: log, pause briefly, keep accepting.
      TG_WARN("worker", "accept failed: " << ec.message());
      auto t = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(50));
      t->async_wait([this, t](boost::system::error_code) {
        if (acceptor_->is_open()) do_accept();
      });
      return;
    }
    boost::system::error_code opt_ec;
    socket.set_option(tcp::no_delay(true), opt_ec);
    std::make_shared<HttpSession>(*this, std::move(socket))->start();
    do_accept();
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
