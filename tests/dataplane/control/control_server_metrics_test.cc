// The control server reports every ACK and NACK it sends to ConfigMetrics: the generation and
// apply time move only on an ACK.

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "control/control_server.h"
#include "observability/metrics.h"
#include "protocol/protocol.h"
#include "runtime/publisher.h"

namespace tidegate::dataplane::control {
namespace {

class Client {
 public:
  explicit Client(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path.c_str());
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&sun), sizeof sun) == 0;
  }
  ~Client() { ::close(fd_); }
  bool connected() const { return connected_; }

  void send_raw(const std::string& bytes) {
    ASSERT_EQ(::write(fd_, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  protocol::Message exchange(const protocol::Message& m) { return exchange_raw(encode_frame(m)); }
  protocol::Message exchange_raw(const std::string& frame) {
    send_raw(frame);
    char buf[4096];
    for (;;) {
      if (auto payload = reader_.next()) return *protocol::decode_json(*payload).message;
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) return protocol::Nack{0, "connection closed"};
      reader_.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  bool connected_ = false;
  protocol::FrameReader reader_;
};

TEST(ControlServerMetricsTest, AcksAndNacksAreCounted) {
  const std::string path = "/tmp/tg-ctl-metrics-" + std::to_string(::getpid()) + ".sock";
  boost::asio::io_context io{1};
  runtime::Publisher publisher(1);
  observability::Metrics metrics(1);
  ControlServer server(io, path, publisher, &metrics.config());
  std::string error;
  ASSERT_TRUE(server.listen(&error)) << error;
  std::thread thread([&] { io.run(); });

  {
    Client client(path);
    ASSERT_TRUE(client.connected());
    EXPECT_TRUE(std::holds_alternative<protocol::HelloReply>(client.exchange(protocol::Hello{})));

    model::Config config;
    config.upstreams["ns/web:80"] = {"ns/web:80", {{"10.0.0.1", 80}}};
    config.virtual_hosts["foo.com"] = {"foo.com",
                                       {{"/", model::PathMatch::kPrefix, "ns/web:80", "ns/web"}}};
    const auto before = std::chrono::system_clock::now();
    auto reply = client.exchange(protocol::Snapshot{5, config});
    ASSERT_TRUE(std::holds_alternative<protocol::Ack>(reply));
    EXPECT_EQ(metrics.config().acks(), 1u);
    EXPECT_EQ(metrics.config().generation(), 5u);
    EXPECT_GE(
        metrics.config().last_apply_ms(),
        std::chrono::duration_cast<std::chrono::milliseconds>(before.time_since_epoch()).count() -
            1);

    // A delta on the wrong base: NACK; the generation stays.
    reply = client.exchange(protocol::DeltaMsg{7, 6, {}});
    ASSERT_TRUE(std::holds_alternative<protocol::Nack>(reply));
    // An undecodable message: NACK too.
    std::string bad = "not json";
    std::string frame(4, '\0');
    const uint32_t n = static_cast<uint32_t>(bad.size());
    frame[0] = static_cast<char>(n >> 24);
    frame[1] = static_cast<char>(n >> 16);
    frame[2] = static_cast<char>(n >> 8);
    frame[3] = static_cast<char>(n);
    reply = client.exchange_raw(frame + bad);
    ASSERT_TRUE(std::holds_alternative<protocol::Nack>(reply));
    EXPECT_EQ(metrics.config().nacks(), 2u);
    EXPECT_EQ(metrics.config().acks(), 1u);
    EXPECT_EQ(metrics.config().generation(), 5u);
  }
  boost::asio::post(io, [&] {
    server.stop();
    io.stop();
  });
  thread.join();
}

}  // namespace
}  // namespace tidegate::dataplane::control
