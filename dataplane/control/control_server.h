#pragma once
// The control socket: a Unix stream socket the controller connects to. Frames are decoded,
// applied through the Publisher (all or nothing) and answered with ACK or NACK. Runs on the
// control thread's io_context, never on a worker.
//
// Who may connect (docs/proxy.md, "The control socket"): the socket file is created 0600 (owner
// only; there is no moment at which it exists with wider permissions), and every accepted peer's
// credentials (SO_PEERCRED) are checked: its UID must be ours or one of `allowed_uids`; any
// other peer is logged and closed before a byte is read.

#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include "observability/metrics.h"
#include "runtime/publisher.h"

namespace tidegate::dataplane::control {

class ControlServer {
 public:
  // `metrics` (may be null) counts ACKs and NACKs and records the generation and apply time.
  // `allowed_uids`: UIDs besides our own that may connect (--control-allowed-uids).
  ControlServer(boost::asio::io_context& io, std::string path, runtime::Publisher& publisher,
                observability::ConfigMetrics* metrics = nullptr,
                std::vector<uid_t> allowed_uids = {});
  ~ControlServer();
  bool listen(std::string* error);
  void stop();

 private:
  void do_accept();
  // True when the peer of this accepted socket may talk to us; logs the refusal otherwise.
  bool peer_allowed(boost::asio::local::stream_protocol::socket& socket);

  boost::asio::io_context& io_;
  std::string path_;
  runtime::Publisher& publisher_;
  observability::ConfigMetrics* metrics_;
  std::vector<uid_t> allowed_uids_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
};

// Parses --control-allowed-uids: comma-separated decimal UIDs ("" is none). False with `error`
// set on anything else.
bool parse_uid_list(const std::string& text, std::vector<uid_t>* out, std::string* error);

}  // namespace tidegate::dataplane::control
