#include "control/control_server.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <deque>

#include <boost/asio/write.hpp>

#include "log/log.h"
#include "protocol/protocol.h"

namespace tidegate::dataplane::control {

namespace asio = boost::asio;
using local = asio::local::stream_protocol;

namespace {

// The process's minor page faults so far (the helper threads of a full configuration's
// decoding and build included): its build in a young process is mostly first touches of memory
// (docs/benchmarks.md, start-up at scale).
long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

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
    const auto received = std::chrono::steady_clock::now();
    const long faults_at_start = minor_faults();
    auto decoded = protocol::decode_json(payload);
    const auto decoded_at = std::chrono::steady_clock::now();
    const long faults_decoded = minor_faults();
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
      const uint64_t version = snap->version;
      const size_t hosts = snap->config.virtual_hosts.size();
      const std::string error = publisher_.apply_snapshot(std::move(*snap));
      // Once per connection (and per NACK): where a full configuration's time goes (a start at
      // scale, docs/benchmarks.md).
      auto ms = [](std::chrono::steady_clock::duration d) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
      };
      TG_INFO("control", "snapshot version "
                             << version << " (" << payload.size() << " bytes, " << hosts
                             << " hosts): decoded in " << ms(decoded_at - received)
                             << " ms, built and published in "
                             << ms(std::chrono::steady_clock::now() - decoded_at) << " ms ("
                             << faults_decoded - faults_at_start << " + "
                             << minor_faults() - faults_decoded << " minor page faults)");
      answer(version, error);
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
                             observability::ConfigMetrics* metrics, std::vector<uid_t> allowed_uids)
    : io_(io),
      path_(std::move(path)),
      publisher_(publisher),
      metrics_(metrics),
      allowed_uids_(std::move(allowed_uids)),
      acceptor_(io) {}

ControlServer::~ControlServer() { stop(); }

bool ControlServer::listen(std::string* error) {
  ::unlink(path_.c_str());  // a stale socket from a previous run
  boost::system::error_code ec;
  local::endpoint ep(path_);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) {
    // bind() creates the file with the umask's permissions: owner-only from the first moment,
    // not widened and then narrowed by a chmod (a peer could connect in between). The umask is
    // the process's, so it is restored at once; nothing else creates files at start-up.
    mode_t old = ::umask(0177);
    acceptor_.bind(ep, ec);
    ::umask(old);
  }
  if (!ec && ::chmod(path_.c_str(), 0600) != 0) {
    ec.assign(errno, boost::system::system_category());
  }
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    *error = "control socket " + path_ + ": " + ec.message();
    return false;
  }
  do_accept();
  return true;
}

bool ControlServer::peer_allowed(local::socket& socket) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    TG_WARN("control",
            "refused a connection: its credentials are unknown (" << std::strerror(errno) << ")");
    return false;
  }
  if (cred.uid == ::geteuid() ||
      std::find(allowed_uids_.begin(), allowed_uids_.end(), cred.uid) != allowed_uids_.end()) {
    return true;
  }
  TG_WARN("control", "refused a connection from uid " << cred.uid << " (pid " << cred.pid
                                                      << "): only uid " << ::geteuid()
                                                      << " and --control-allowed-uids may connect");
  return false;
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
    if (!ec && peer_allowed(socket)) {
      std::make_shared<ControlSession>(std::move(socket), publisher_, metrics_)->start();
    }
    do_accept();
  });
}

bool parse_uid_list(const std::string& text, std::vector<uid_t>* out, std::string* error) {
  out->clear();
  if (!text.empty() && text.back() == ',') {
    *error = "not a list of UIDs: \"" + text + "\"";
    return false;
  }
  std::string_view rest = text;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    unsigned long uid = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), uid);
    if (item.empty() || ec != std::errc{} || end != item.data() + item.size() ||
        uid > 0xfffffffeUL) {
      *error = "not a list of UIDs: \"" + text + "\"";
      return false;
    }
    out->push_back(static_cast<uid_t>(uid));
  }
  return true;
}

}  // namespace tidegate::dataplane::control
