#include "control/control_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <deque>

#include <boost/asio/write.hpp>

#include "log/log.h"
#include "protocol/protocol.h"

namespace tidegate::dataplane::control {

namespace asio = boost::asio;
using local = asio::local::stream_protocol;

namespace {

class ControlSession : public std::enable_shared_from_this<ControlSession> {
 public:
  ControlSession(local::socket socket, runtime::Publisher& publisher,
                 observability::ConfigMetrics* metrics)
      : socket_(std::move(socket)), publisher_(publisher), metrics_(metrics) {}

  void start() { do_read(); }

 private:
  void do_read() {
    socket_.async_read_some(asio::buffer(buffer_),
                            [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                              self->on_read(ec, n);
                            });
  }

  void on_read(boost::system::error_code ec, size_t n) {
    if (ec) {
      if (ec != asio::error::eof) TG_WARN("control", "connection error: " << ec.message());
      TG_INFO("control",
              "controller disconnected; keeping configuration version " << publisher_.version());
      return;
    }
    reader_.append(buffer_.data(), n);
    while (auto payload = reader_.next()) handle(*payload);
    if (!reader_.error().empty()) {
      TG_ERROR("control", "closing connection: " << reader_.error());
      return;
    }
    do_read();
  }

  void handle(const std::string& payload) {
    auto decoded = protocol::decode_json(payload);
    if (!decoded.message) {
      TG_WARN("control", "rejected message: " << decoded.error);
      send(protocol::Nack{0, decoded.error});
      return;
    }
    auto& msg = *decoded.message;
    if (auto* hello = std::get_if<protocol::Hello>(&msg)) {
      TG_INFO("control",
              "controller connected (" << hello->node << ", protocol " << hello->protocol << ")");
      if (hello->protocol != protocol::kProtocolVersion) {
        send(protocol::Nack{0, "unsupported protocol version " + std::to_string(hello->protocol)});
        return;
      }
      send(protocol::HelloReply{protocol::kProtocolVersion, publisher_.version()});
    } else if (auto* snap = std::get_if<protocol::Snapshot>(&msg)) {
      answer(snap->version, publisher_.apply_snapshot(*snap));
    } else if (auto* delta = std::get_if<protocol::DeltaMsg>(&msg)) {
      answer(delta->version, publisher_.apply_delta(*delta));
    } else {
      send(protocol::Nack{0, "unexpected message type"});
    }
  }

  void answer(uint64_t version, const std::string& error) {
    if (error.empty()) {
      send(protocol::Ack{version});
    } else {
      TG_WARN("control", "NACK version " << version << ": " << error);
      send(protocol::Nack{version, error});
    }
  }

  void send(const protocol::Message& m) {
    if (metrics_ != nullptr) {
      if (const auto* ack = std::get_if<protocol::Ack>(&m)) {
        metrics_->applied(ack->version);
      } else if (std::holds_alternative<protocol::Nack>(m)) {
        metrics_->rejected();
      }
    }
    bool idle = out_.empty();
    out_.push_back(protocol::encode_frame(m));
    if (idle) do_write();
  }

  void do_write() {
    asio::async_write(socket_, asio::buffer(out_.front()),
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        if (ec) return;
                        self->out_.pop_front();
                        if (!self->out_.empty()) self->do_write();
                      });
  }

  local::socket socket_;
  runtime::Publisher& publisher_;
  observability::ConfigMetrics* metrics_;
  protocol::FrameReader reader_;
  std::array<char, 64 * 1024> buffer_;
  std::deque<std::string> out_;
};

}  // namespace

ControlServer::ControlServer(asio::io_context& io, std::string path, runtime::Publisher& publisher,
                             observability::ConfigMetrics* metrics)
    : io_(io), path_(std::move(path)), publisher_(publisher), metrics_(metrics), acceptor_(io) {}

ControlServer::~ControlServer() { stop(); }

bool ControlServer::listen(std::string* error) {
  ::unlink(path_.c_str());  // a stale socket from a previous run
  boost::system::error_code ec;
  local::endpoint ep(path_);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    *error = "control socket " + path_ + ": " + ec.message();
    return false;
  }
  ::chmod(path_.c_str(), 0660);  // the controller runs as the same user or group
  do_accept();
  return true;
}

void ControlServer::stop() {
  if (acceptor_.is_open()) {
    boost::system::error_code ec;
    acceptor_.close(ec);
    ::unlink(path_.c_str());
  }
}

void ControlServer::do_accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, local::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) std::make_shared<ControlSession>(std::move(socket), publisher_, metrics_)->start();
    do_accept();
  });
}

}  // namespace tidegate::dataplane::control
