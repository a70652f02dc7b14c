#pragma once
// The control socket: a Unix stream socket the controller connects to. Frames are decoded,
// applied through the Publisher (all or nothing) and answered with ACK or NACK. Runs on the
// control thread's io_context, never on a worker.

#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include "observability/metrics.h"
#include "runtime/publisher.h"

namespace tidegate::dataplane::control {

class ControlServer {
 public:
  // `metrics` (may be null) counts ACKs and NACKs and records the generation and apply time.
  ControlServer(boost::asio::io_context& io, std::string path, runtime::Publisher& publisher,
                observability::ConfigMetrics* metrics = nullptr);
  ~ControlServer();
  bool listen(std::string* error);
  void stop();

 private:
  void do_accept();

  boost::asio::io_context& io_;
  std::string path_;
  runtime::Publisher& publisher_;
  observability::ConfigMetrics* metrics_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
};

}  // namespace tidegate::dataplane::control
