#pragma once
// One downstream HTTP/1.1 connection. Requests are handled one at a time in arrival order (so
// pipelined requests are answered in order); each exchange picks an upstream connection, streams
// the request body up and the response body down through one fixed relay buffer, then returns the
// upstream connection to the worker's pool. Every asynchronous operation holds
// shared_from_this(); errors are answered (4xx/5xx with a short body) or close the connection,
// never thrown.

#include <array>
#include <memory>
#include <optional>
#include <string>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "runtime/io_types.h"
#include "runtime/snapshot.h"
#include "server/limits.h"
#include "upstream/pool.h"

namespace tidegate::dataplane::server {

class Worker;

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(Worker& worker, runtime::Socket socket);
  ~HttpSession();
  void start();

 private:
  using error_code = boost::system::error_code;
  using RequestParser = boost::beast::http::request_parser<boost::beast::http::buffer_body>;
  using ResponseParser = boost::beast::http::response_parser<boost::beast::http::buffer_body>;
  using RequestSerializer =
      boost::beast::http::request_serializer<boost::beast::http::buffer_body>;
  using ResponseSerializer =
      boost::beast::http::response_serializer<boost::beast::http::buffer_body>;

  void do_read_header();
  void on_read_header(error_code ec);
  void handle_request();
  void prepare_upstream_request();
  void pick_and_connect();
  void on_connect(error_code ec);
  void send_request();
  void read_request_body();
  void on_read_request_body(error_code ec);
  void write_request();
  void on_write_request(error_code ec);
  void read_response_header();
  void on_response_header(error_code ec);
  void relay_response();
  void read_response_body();
  void on_read_response_body(error_code ec);
  void write_response();
  void on_write_response(error_code ec);
  void finish_exchange();
  // Upstream failed before a response byte reached the client: retry elsewhere when allowed,
  // otherwise answer with `status`.
  void upstream_failed(error_code ec, const char* stage);
  void send_error(unsigned status, std::string_view text, bool close);
  void on_error_written(error_code ec, bool close);
  void close_client();

  Worker& worker_;
  runtime::Stream client_;
  boost::beast::flat_buffer client_buffer_;
  std::string peer_address_;

  // One exchange.
  std::optional<RequestParser> request_;
  std::optional<RequestSerializer> request_writer_;
  std::optional<ResponseParser> response_;
  std::optional<ResponseSerializer> response_writer_;
  std::optional<boost::beast::http::response<boost::beast::http::string_body>> error_response_;
  std::shared_ptr<const runtime::Snapshot> snapshot_;  // the one snapshot this exchange reads
  const runtime::UpstreamState* upstream_ = nullptr;
  std::unique_ptr<upstream::Connection> connection_;
  unsigned attempts_ = 0;
  size_t next_endpoint_ = 0;
  bool client_keep_alive_ = false;
  bool expect_continue_ = false;
  bool request_body_started_ = false;
  bool response_started_ = false;
  bool idempotent_ = false;
  bool head_request_ = false;
  unsigned client_version_ = 11;

  std::array<char, Limits::kRelayBufferBytes> relay_buffer_;
};

}  // namespace tidegate::dataplane::server
