#pragma once
// The admin listener: GET /healthz (200 while the process runs), GET /readyz (200 once a first
// configuration is applied, 503 before), GET /version (serving configuration version), GET
// /metrics (Prometheus text exposition, when a Metrics is given; docs/observability.md). Runs on
// the control thread, which is also the thread metric sources read the snapshot from.

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "observability/metrics.h"
#include "runtime/publisher.h"

namespace tidegate::dataplane::admin {

class AdminServer {
 public:
  // `metrics` may be null (then /metrics answers 404); it must outlive the server.
  AdminServer(boost::asio::io_context& io, const runtime::Publisher& publisher,
              const observability::Metrics* metrics = nullptr);
  // Returns the bound endpoint or sets ec.
  boost::asio::ip::tcp::endpoint listen(const boost::asio::ip::tcp::endpoint& at,
                                        boost::system::error_code& ec);
  void stop();

 private:
  void do_accept();

  boost::asio::io_context& io_;
  const runtime::Publisher& publisher_;
  const observability::Metrics* metrics_;
  boost::asio::ip::tcp::acceptor acceptor_;
};

}  // namespace tidegate::dataplane::admin
