#include "admin/admin_server.h"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace tidegate::dataplane::admin {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

class AdminSession : public std::enable_shared_from_this<AdminSession> {
 public:
  AdminSession(tcp::socket socket, const runtime::Publisher& publisher,
               const observability::Metrics* metrics)
      : stream_(std::move(socket)), publisher_(publisher), metrics_(metrics) {}

  void start() { do_read(); }

 private:
  void do_read() {
    request_ = {};
    stream_.expires_after(std::chrono::seconds(30));
    http::async_read(stream_, buffer_, request_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return;
                       self->respond();
                     });
  }

  void respond() {
    response_ = {};
    response_.version(request_.version());
    response_.keep_alive(request_.keep_alive());
    response_.set(http::field::content_type, "text/plain; charset=utf-8");
    auto target = request_.target();
    if (request_.method() != http::verb::get && request_.method() != http::verb::head) {
      response_.result(http::status::method_not_allowed);
      response_.body() = "method not allowed\n";
    } else if (target == "/healthz") {
      response_.result(http::status::ok);
      response_.body() = "ok\n";
    } else if (target == "/readyz") {
      bool ready = publisher_.ready();
      response_.result(ready ? http::status::ok : http::status::service_unavailable);
      response_.body() = ready ? "ready\n" : "no configuration yet\n";
    } else if (target == "/version") {
      response_.result(http::status::ok);
      response_.body() = std::to_string(publisher_.version()) + "\n";
    } else if (target == "/metrics" && metrics_ != nullptr) {
      response_.result(http::status::ok);
      response_.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      response_.body() = metrics_->scrape();
    } else {
      response_.result(http::status::not_found);
      response_.body() = "not found\n";
    }
    response_.prepare_payload();
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec || !self->response_.keep_alive()) {
                          beast::error_code ignored;
                          self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
                          return;
                        }
                        self->do_read();
                      });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::empty_body> request_;
  http::response<http::string_body> response_;
  const runtime::Publisher& publisher_;
  const observability::Metrics* metrics_;
};

}  // namespace

AdminServer::AdminServer(asio::io_context& io, const runtime::Publisher& publisher,
                         const observability::Metrics* metrics)
    : io_(io), publisher_(publisher), metrics_(metrics), acceptor_(io) {}

tcp::endpoint AdminServer::listen(const tcp::endpoint& at, boost::system::error_code& ec) {
  acceptor_.open(at.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(at, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return {};
  do_accept();
  return acceptor_.local_endpoint(ec);
}

void AdminServer::stop() {
  boost::system::error_code ec;
  acceptor_.close(ec);
}

void AdminServer::do_accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) std::make_shared<AdminSession>(std::move(socket), publisher_, metrics_)->start();
    do_accept();
  });
}

}  // namespace tidegate::dataplane::admin
