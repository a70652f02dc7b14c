#pragma once
// The admin listener: GET /healthz (200 while the process runs), GET /readyz (200 once a first
// configuration is applied, 503 before), GET /version (serving configuration version). Runs on
// the control thread.

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "runtime/publisher.h"

namespace tidegate::dataplane::admin {

class AdminServer {
 public:
  AdminServer(boost::asio::io_context& io, const runtime::Publisher& publisher);
  // Returns the bound endpoint or sets ec.
  boost::asio::ip::tcp::endpoint listen(const boost::asio::ip::tcp::endpoint& at,
                                        boost::system::error_code& ec);
  void stop();

 private:
  void do_accept();

  boost::asio::io_context& io_;
  const runtime::Publisher& publisher_;
  boost::asio::ip::tcp::acceptor acceptor_;
};

}  // namespace tidegate::dataplane::admin
