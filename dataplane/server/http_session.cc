#include "server/http_session.h"

#include <limits>

#include <boost/asio/write.hpp>

#include "log/log.h"
#include "server/headers.h"
#include "server/worker.h"

namespace tidegate::dataplane::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {
// Boost 1.74's parser compares lengths against an optional limit, and boost::none compares as
// less than every length, so "no limit" must be the largest value instead.
constexpr std::uint64_t kUnlimitedBody = std::numeric_limits<std::uint64_t>::max();
}  // namespace

HttpSession::HttpSession(Worker& worker, runtime::Socket socket)
    : worker_(worker), client_(std::move(socket)) {
  error_code ec;
  auto remote = client_.socket().remote_endpoint(ec);
  if (!ec) peer_address_ = remote.address().to_string();
  worker_.active_connections.fetch_add(1, std::memory_order_relaxed);
}

HttpSession::~HttpSession() {
  worker_.active_connections.fetch_sub(1, std::memory_order_relaxed);
}

void HttpSession::start() { do_read_header(); }

void HttpSession::do_read_header() {
  request_.emplace();
  request_->header_limit(static_cast<std::uint32_t>(worker_.limits().max_request_header_bytes));
  request_->body_limit(kUnlimitedBody);  // bodies stream; per-route limits come with annotations
  request_writer_.reset();
  response_writer_.reset();
  response_.reset();
  error_response_.reset();
  snapshot_.reset();
  upstream_ = nullptr;
  attempts_ = 0;
  request_body_started_ = false;
  response_started_ = false;
  expect_continue_ = false;
  client_.expires_after(worker_.limits().client_header_timeout);
  http::async_read_header(client_, client_buffer_, *request_,
                          [self = shared_from_this()](error_code ec, std::size_t) {
                            self->on_read_header(ec);
                          });
}

void HttpSession::on_read_header(error_code ec) {
  if (ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::eof) {
      close_client();
      return;
    }
    if (ec == http::error::header_limit) {
      send_error(431, "request header fields too large\n", true);
      return;
    }
    if (is_http_parse_error(ec)) {
      send_error(400, "bad request\n", true);
      return;
    }
    close_client();
    return;
  }
  worker_.total_requests.fetch_add(1, std::memory_order_relaxed);
  handle_request();
}

void HttpSession::handle_request() {
  auto& req = request_->get();
  client_version_ = req.version();
  client_keep_alive_ = req.keep_alive();
  head_request_ = req.method() == http::verb::head;
  idempotent_ = is_idempotent(req.method());

  snapshot_ = worker_.snapshot();
  if (!snapshot_) {
    send_error(503, "no configuration yet\n", !request_->is_done());
    return;
  }
  // RFC 9112 section 3.2: an HTTP/1.1 request needs exactly one Host, HTTP/1.0 at most one;
  // two Hosts would let the proxy and the backend route on different ones.
  size_t hosts = req.count(http::field::host);
  if (hosts > 1 || (hosts == 0 && client_version_ >= 11)) {
    send_error(400, hosts > 1 ? "more than one Host field\n" : "missing Host field\n", true);
    return;
  }
  RequestTarget target = split_target(req.target(), req[http::field::host]);
  const model::Route* route = snapshot_->router->match(target.host, target.path).route;
  if (route == nullptr) {
    send_error(404, "no route\n", !request_->is_done());
    return;
  }
  upstream_ = snapshot_->upstream(route->upstream);
  if (upstream_ == nullptr || upstream_->endpoints.empty()) {
    send_error(503, "no endpoints available\n", !request_->is_done());
    return;
  }
  prepare_upstream_request();
  next_endpoint_ = upstream_->round_robin[worker_.id()].value++;
  pick_and_connect();
}

void HttpSession::prepare_upstream_request() {
  auto& req = request_->get();
  auto expect = req[http::field::expect];
  expect_continue_ = beast::iequals(expect, "100-continue");
  if (!expect.empty()) req.erase(http::field::expect);
  remove_hop_by_hop(req);
  req.version(11);
  req.keep_alive(true);
  add_forwarded_headers(req, peer_address_, "http");
  ensure_request_id(req, worker_);
}

void HttpSession::pick_and_connect() {
  ++attempts_;
  const auto& eps = upstream_->endpoints;
  const auto& ep = eps[next_endpoint_ % eps.size()];
  ++next_endpoint_;
  connection_ = worker_.pool().take(ep);
  if (connection_) {
    send_request();
    return;
  }
  connection_ = std::make_unique<upstream::Connection>(client_.get_executor(), ep);
  connection_->stream.expires_after(worker_.limits().upstream_connect_timeout);
  connection_->stream.async_connect(ep, [self = shared_from_this()](error_code ec) {
    self->on_connect(ec);
  });
}

void HttpSession::on_connect(error_code ec) {
  if (ec) {
    upstream_failed(ec, "connect");
    return;
  }
  error_code opt_ec;
  connection_->stream.socket().set_option(asio::ip::tcp::no_delay(true), opt_ec);
  send_request();
}

void HttpSession::send_request() {
  request_writer_.emplace(request_->get());
  auto& body = request_->get().body();
  if (request_->is_done()) {
    body.data = nullptr;
    body.size = 0;
    body.more = false;
    write_request();
    return;
  }
  if (expect_continue_ && !request_body_started_) {
    // We took over the client's Expect: tell it to go on now that an upstream is ready.
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    expect_continue_ = false;
    client_.expires_after(worker_.limits().client_send_timeout);
    asio::async_write(client_, asio::buffer(kContinue.data(), kContinue.size()),
                      [self = shared_from_this()](error_code ec, std::size_t) {
                        if (ec) {
                          self->close_client();
                          return;
                        }
                        self->read_request_body();
                      });
    return;
  }
  read_request_body();
}

void HttpSession::read_request_body() {
  auto& body = request_->get().body();
  body.data = relay_buffer_.data();
  body.size = relay_buffer_.size();
  request_body_started_ = true;
  client_.expires_after(worker_.limits().client_body_timeout);
  http::async_read_some(client_, client_buffer_, *request_,
                        [self = shared_from_this()](error_code ec, std::size_t) {
                          self->on_read_request_body(ec);
                        });
}

void HttpSession::on_read_request_body(error_code ec) {
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    // The client went away or sent a broken body: nothing useful can be answered upstream.
    TG_DEBUG("http", "request body read failed: " << ec.message());
    connection_.reset();
    if (is_http_parse_error(ec) && ec != http::error::end_of_stream) {
      send_error(400, "bad request body\n", true);
    } else {
      close_client();
    }
    return;
  }
  auto& body = request_->get().body();
  size_t n = relay_buffer_.size() - body.size;
  if (n == 0 && !request_->is_done()) {
    read_request_body();
    return;
  }
  // An empty final read must not become an empty chunk: buffer_body would emit a second
  // last-chunk for it. A null buffer says "no data, just finish".
  body.data = n == 0 ? nullptr : relay_buffer_.data();
  body.size = n;
  body.more = !request_->is_done();
  write_request();
}

void HttpSession::write_request() {
  connection_->stream.expires_after(worker_.limits().upstream_send_timeout);
  http::async_write(connection_->stream, *request_writer_,
                    [self = shared_from_this()](error_code ec, std::size_t) {
                      self->on_write_request(ec);
                    });
}

void HttpSession::on_write_request(error_code ec) {
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    upstream_failed(ec, "send");
    return;
  }
  if (!request_writer_->is_done()) {
    read_request_body();
    return;
  }
  read_response_header();
}

void HttpSession::read_response_header() {
  response_.emplace();
  response_->header_limit(static_cast<std::uint32_t>(worker_.limits().max_response_header_bytes));
  response_->body_limit(kUnlimitedBody);
  if (head_request_) response_->skip(true);
  connection_->stream.expires_after(worker_.limits().upstream_read_timeout);
  http::async_read_header(connection_->stream, connection_->buffer, *response_,
                          [self = shared_from_this()](error_code ec, std::size_t) {
                            self->on_response_header(ec);
                          });
}

void HttpSession::on_response_header(error_code ec) {
  if (ec) {
    upstream_failed(ec, "response header");
    return;
  }
  auto& res = response_->get();
  unsigned status = res.result_int();
  if (status >= 100 && status < 200 && status != 101) {
    // Interim responses (103 Early Hints, a stray 100) are not forwarded yet; read the final one.
    read_response_header();
    return;
  }
  if (status == 101) {
    // Upgrades are not forwarded (we strip Upgrade); a 101 anyway is a protocol error.
    connection_.reset();
    send_error(502, "upstream switched protocols unexpectedly\n", true);
    return;
  }
  remove_hop_by_hop(res);
  res.version(client_version_);
  bool body_expected = !head_request_ && status != 204 && status != 304;
  bool framed = response_->chunked() || response_->content_length().has_value();
  if (body_expected && !framed) {
    // A close-delimited upstream body: chunk it for HTTP/1.1 clients so the client connection
    // can stay open; HTTP/1.0 clients get it close-delimited too.
    if (client_version_ >= 11) {
      res.chunked(true);
    } else {
      client_keep_alive_ = false;
    }
  }
  if (client_version_ < 11 && response_->chunked()) {
    res.chunked(false);
    client_keep_alive_ = false;
  }
  if (!request_->is_done()) client_keep_alive_ = false;  // upstream answered before the body ended
  res.keep_alive(client_keep_alive_);
  response_writer_.emplace(res);
  if (!body_expected) {
    // HEAD, 204 and 304 carry no body whatever their framing fields say: write the header only
    // (a chunked header would otherwise be followed by a last-chunk).
    response_started_ = true;
    client_.expires_after(worker_.limits().client_send_timeout);
    http::async_write_header(client_, *response_writer_,
                             [self = shared_from_this()](error_code ec, std::size_t) {
                               if (ec) {
                                 self->connection_.reset();
                                 self->close_client();
                                 return;
                               }
                               self->finish_exchange();
                             });
    return;
  }
  relay_response();
}

void HttpSession::relay_response() {
  auto& body = response_->get().body();
  if (response_->is_done()) {
    body.data = nullptr;
    body.size = 0;
    body.more = false;
    write_response();
    return;
  }
  read_response_body();
}

void HttpSession::read_response_body() {
  auto& body = response_->get().body();
  body.data = relay_buffer_.data();
  body.size = relay_buffer_.size();
  connection_->stream.expires_after(worker_.limits().upstream_read_timeout);
  http::async_read_some(connection_->stream, connection_->buffer, *response_,
                        [self = shared_from_this()](error_code ec, std::size_t) {
                          self->on_read_response_body(ec);
                        });
}

void HttpSession::on_read_response_body(error_code ec) {
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    TG_WARN("http", "upstream " << connection_->endpoint << " failed mid-body: " << ec.message());
    connection_.reset();
    if (!response_started_) {
      send_error(502, "upstream failed\n", true);
    } else {
      close_client();  // the status line is out; only closing tells the client
    }
    return;
  }
  auto& body = response_->get().body();
  size_t n = relay_buffer_.size() - body.size;
  if (n == 0 && !response_->is_done()) {
    read_response_body();
    return;
  }
  body.data = n == 0 ? nullptr : relay_buffer_.data();
  body.size = n;
  body.more = !response_->is_done();
  write_response();
}

void HttpSession::write_response() {
  response_started_ = true;
  client_.expires_after(worker_.limits().client_send_timeout);
  http::async_write(client_, *response_writer_,
                    [self = shared_from_this()](error_code ec, std::size_t) {
                      self->on_write_response(ec);
                    });
}

void HttpSession::on_write_response(error_code ec) {
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    connection_.reset();  // the upstream response is unfinished: not reusable
    close_client();
    return;
  }
  if (!response_writer_->is_done()) {
    read_response_body();
    return;
  }
  finish_exchange();
}

void HttpSession::finish_exchange() {
  // The upstream connection goes back to the pool only if it is clean and its endpoint is still
  // configured in the worker's *current* snapshot (an endpoint that left gets no new requests).
  const auto& current = worker_.snapshot();
  bool reusable = connection_ && response_->keep_alive() && response_->is_done() &&
                  request_writer_->is_done() && current &&
                  current->all_endpoints.contains(connection_->endpoint);
  if (reusable) {
    connection_->reused = false;
    worker_.pool().put(std::move(connection_));
  }
  connection_.reset();
  if (!client_keep_alive_) {
    close_client();
    return;
  }
  do_read_header();
}

void HttpSession::upstream_failed(error_code ec, const char* stage) {
  bool reused = connection_ && connection_->reused;
  auto endpoint = connection_ ? connection_->endpoint : runtime::Endpoint{};
  connection_.reset();
  bool timed_out = ec == beast::error::timeout;
  bool nothing_sent = std::string_view(stage) == "connect";
  // A pooled connection the server closed meanwhile, or a connect failure, is safe to retry; any
  // other failure before a response byte only for idempotent requests whose body we still have.
  bool can_retry = !request_body_started_ && attempts_ < worker_.limits().max_upstream_attempts &&
                   (nothing_sent || reused || idempotent_) && !(timed_out && !nothing_sent);
  if (can_retry) {
    TG_DEBUG("http", "upstream " << endpoint << " " << stage << " failed (" << ec.message()
                                 << "), retrying");
    if (reused) --attempts_;  // a stale pooled connection is not the endpoint's fault
    pick_and_connect();
    return;
  }
  TG_WARN("http", "upstream " << endpoint << " " << stage << " failed: " << ec.message());
  if (timed_out) {
    send_error(504, "upstream timed out\n", true);
  } else {
    send_error(502, "upstream unavailable\n", true);
  }
}

void HttpSession::send_error(unsigned status, std::string_view text, bool close) {
  if (close) client_keep_alive_ = false;
  auto& res = error_response_.emplace(static_cast<http::status>(status), client_version_);
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.set(http::field::server, "tidegate");
  res.body().assign(text.data(), text.size());
  res.keep_alive(client_keep_alive_);
  res.prepare_payload();
  if (head_request_) res.body().clear();
  response_started_ = true;
  client_.expires_after(worker_.limits().client_send_timeout);
  http::async_write(client_, res, [self = shared_from_this()](error_code ec, std::size_t) {
    self->on_error_written(ec, !self->client_keep_alive_);
  });
}

void HttpSession::on_error_written(error_code ec, bool close) {
  if (ec || close) {
    close_client();
    return;
  }
  do_read_header();
}

void HttpSession::close_client() {
  error_code ec;
  client_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  client_.close();
}

}  // namespace tidegate::dataplane::server
