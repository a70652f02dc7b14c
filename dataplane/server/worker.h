#pragma once
// A worker: one thread running one io_context, its own SO_REUSEPORT listener, its own upstream
// connection pool and its own pointer to the current configuration snapshot. Connections never
// move between workers, so nothing on the request path is shared with another thread.

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "runtime/snapshot.h"
#include "server/limits.h"
#include "upstream/pool.h"

namespace tidegate::dataplane::server {

class Worker {
 public:
  Worker(size_t id, const Limits& limits);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Binds the HTTP listener (SO_REUSEPORT, so every worker binds the same address) and returns
  // the bound endpoint, or sets ec.
  boost::asio::ip::tcp::endpoint listen(const boost::asio::ip::tcp::endpoint& at,
                                        boost::system::error_code& ec);
  void start();  // starts the thread
  void stop();   // asks the thread to finish; join() waits
  void join();

  // Called from the control thread: the new snapshot reaches this worker through its own queue.
  void publish(std::shared_ptr<const runtime::Snapshot> snapshot);

  // Worker-thread only.
  const std::shared_ptr<const runtime::Snapshot>& snapshot() const { return snapshot_; }
  upstream::Pool& pool() { return pool_; }
  size_t id() const { return id_; }
  const Limits& limits() const { return limits_; }
  boost::asio::io_context& io() { return io_; }
  uint64_t next_random();  // request ids

  // Any thread: counters for /metrics-style reporting.
  std::atomic<uint64_t> active_connections{0};
  std::atomic<uint64_t> total_requests{0};

 private:
  void do_accept();
  void arm_sweep();

  size_t id_;
  Limits limits_;
  boost::asio::io_context io_{1};
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  boost::asio::steady_timer sweep_timer_;
  std::shared_ptr<const runtime::Snapshot> snapshot_;
  upstream::Pool pool_;
  uint64_t rng_state_;
  std::thread thread_;
};

}  // namespace tidegate::dataplane::server
