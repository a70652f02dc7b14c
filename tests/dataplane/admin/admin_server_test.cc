// Tests for the admin listener: /metrics serves the Prometheus text of the Metrics it was given
// (and 404 without one); /healthz, /readyz and /version answer as before.

#include "admin/admin_server.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "observability/metrics.h"
#include "runtime/publisher.h"

namespace tidegate::dataplane::admin {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

class AdminServerTest : public ::testing::Test {
 protected:
  void start(const observability::Metrics* metrics) {
    server_ = std::make_unique<AdminServer>(io_, publisher_, metrics);
    boost::system::error_code ec;
    at_ = server_->listen(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0), ec);
    ASSERT_FALSE(ec) << ec.message();
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    if (server_) asio::post(io_, [this] { server_->stop(); });
    if (thread_.joinable()) thread_.join();
  }

  http::response<http::string_body> get(const std::string& target) {
    asio::io_context io;
    tcp::socket socket(io);
    socket.connect(at_);
    http::request<http::empty_body> req(http::verb::get, target, 11);
    req.set(http::field::host, "localhost");
    req.keep_alive(false);
    http::write(socket, req);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    return res;
  }

  asio::io_context io_{1};
  runtime::Publisher publisher_{1};
  std::unique_ptr<AdminServer> server_;
  tcp::endpoint at_;
  std::thread thread_;
};

TEST_F(AdminServerTest, MetricsServesTheScrapeText) {
  observability::Metrics metrics(1);
  auto id = metrics.intern({"web", "shop", "foo.com", "web"});
  metrics.worker(0).record_request(
      {id, http::verb::get, 204, 1, 2, std::chrono::milliseconds(1), std::chrono::nanoseconds(-1)});
  start(&metrics);
  auto res = get("/metrics");
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res[http::field::content_type], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(
      res.body().find(
          R"(tidegate_requests_total{ingress="web",namespace="shop",host="foo.com",service="web",method="GET",status="2xx"} 1)"),
      std::string::npos)
      << res.body();
  EXPECT_NE(res.body().find("tidegate_connections_active 0"), std::string::npos);

  // The other endpoints are unchanged.
  EXPECT_EQ(get("/healthz").body(), "ok\n");
  EXPECT_EQ(get("/readyz").result(), http::status::service_unavailable);
  EXPECT_EQ(get("/version").body(), "0\n");
  EXPECT_EQ(get("/nothing").result(), http::status::not_found);
}

TEST_F(AdminServerTest, NoMetricsMeansNotFound) {
  start(nullptr);
  EXPECT_EQ(get("/metrics").result(), http::status::not_found);
  EXPECT_EQ(get("/healthz").result(), http::status::ok);
}

}  // namespace
}  // namespace tidegate::dataplane::admin
