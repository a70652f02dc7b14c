#pragma once
// The upstream HTTP/1.1 side of one exchange's attempts (server/exchange.h): a connection taken
// from the worker's pool or freshly connected, the optional upstream TLS handshake, the request
// written through server::OutgoingMessage and the response head and body read with Beast's
// parser into the caller's buffer (the exchange's relay buffer, or a filter's window). It decides
// nothing: the exchange says where to connect, how long to wait and what to do with an error;
// completions go to the handler it passes (each handler holds what keeps the exchange alive). One
// object per exchange, reused from one attempt and one request to the next so that its buffers keep
// their capacity.

#include <chrono>
#include <cstddef>
#include <memory>
#include <memory_resource>
#include <optional>
#include <utility>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include "runtime/snapshot.h"
#include "server/headers.h"
#include "server/http1_policy.h"
#include "server/limits.h"
#include "server/wire.h"
#include "upstream/pool.h"

namespace tidegate::dataplane::upstream {

class Http1Upstream {
 public:
  using error_code = boost::system::error_code;
  using ResponseParser =
      boost::beast::http::response_parser<boost::beast::http::buffer_body, server::FieldsAllocator>;
  using Request = boost::beast::http::request<boost::beast::http::buffer_body, server::Fields>;

  // The connection of the current attempt (null between attempts). A tunnel takes it over.
  std::shared_ptr<Connection>& connection() { return connection_; }
  // The parser of the current response head and body (after read_header()).
  ResponseParser& response() { return *response_; }
  bool has_response() const { return response_.has_value(); }

  // An idle pooled connection to `ep` for this attempt; false when the pool has none.
  bool take_pooled(Pool& pool, const Endpoint& ep, uint64_t tls_key) {
    connection_ = pool.take(ep, tls_key);
    return connection_ != nullptr;
  }

  // A new connection to `ep`; `handler(error_code)`.
  template <class Handler>
  void connect(const runtime::Executor& executor, const Endpoint& ep, uint64_t tls_key,
               std::chrono::milliseconds timeout, Handler&& handler) {
    connection_ = std::make_shared<Connection>(executor, ep, tls_key,
                                               server::Limits::kUpstreamReadBufferBytes);
    connection_->stream.expires_after(timeout);
    connection_->stream.async_connect(ep, [keep = connection_, h = std::forward<Handler>(handler)](
                                              error_code ec) mutable { h(ec); });
  }

  // Called once connected: TCP_NODELAY.
  void connected();

  // The TLS handshake with the upstream (SNI and verification as `up` says); `handler(ec)`.
  template <class Handler>
  void handshake(const runtime::UpstreamState& up, std::chrono::milliseconds timeout,
                 Handler&& handler) {
    prepare_tls(up);
    connection_->lowest().expires_after(timeout);
    connection_->tls->async_handshake(
        boost::asio::ssl::stream_base::client,
        [keep = connection_, h = std::forward<Handler>(handler)](error_code ec) mutable { h(ec); });
  }

  // Serializes the request head for this attempt (chunked when the client's body is).
  void start_request(const Request& req) { out_.start(req, req.chunked()); }
  // Writes the head (if not yet written) and `n` body bytes at `data`; `last` ends the body.
  // `handler(error_code)`.
  template <class Handler>
  void write(const char* data, std::size_t n, bool last, std::chrono::milliseconds timeout,
             Handler&& handler) {
    connection_->lowest().expires_after(timeout);
    auto buffers = out_.next(data, n, last);
    connection_->with_stream([&](auto& stream) {
      boost::asio::async_write(stream, buffers,
                               [this, keep = connection_, h = std::forward<Handler>(handler)](
                                   error_code ec, std::size_t) mutable {
                                 out_.written();
                                 h(ec);
                               });
    });
  }
  // The whole request has been written.
  bool request_sent() const { return out_.done(); }

  // Reads the next response head (the fields allocate from `arena`); `head_request`: no body
  // follows whatever the head says. `handler(error_code)`.
  template <class Handler>
  void read_header(std::pmr::memory_resource* arena, std::size_t header_limit, bool head_request,
                   std::chrono::milliseconds timeout, Handler&& handler) {
    response_.emplace(std::piecewise_construct, std::make_tuple(),
                      std::make_tuple(server::FieldsAllocator(arena)));
    response_->header_limit(static_cast<std::uint32_t>(header_limit));
    response_->body_limit(server::kUnlimitedBody);
    if (head_request) response_->skip(true);
    connection_->lowest().expires_after(timeout);
    connection_->with_stream([&](auto& stream) {
      boost::beast::http::async_read_header(
          stream, connection_->buffer, *response_,
          [keep = connection_, h = std::forward<Handler>(handler)](error_code ec,
                                                                   std::size_t) mutable { h(ec); });
    });
  }
  // The framing rules for a response head (server/http1_policy.h): a non-zero status means the
  // response must not be relayed.
  server::ResponseVerdict check_response() const {
    return server::check_response(response_->get());
  }

  // Reads body bytes into [data, data + size); `handler(error_code, bytes read)`.
  template <class Handler>
  void read_body(char* data, std::size_t size, std::chrono::milliseconds timeout,
                 Handler&& handler) {
    auto& body = response_->get().body();
    body.data = data;
    body.size = size;
    connection_->lowest().expires_after(timeout);
    connection_->with_stream([&](auto& stream) {
      boost::beast::http::async_read_some(
          stream, connection_->buffer, *response_,
          [this, size, keep = connection_, h = std::forward<Handler>(handler)](
              error_code ec, std::size_t) mutable {
            // The parser may be gone when the read was cancelled (Exchange::reset).
            h(ec, response_ ? size - response_->get().body().size : 0);
          });
    });
  }

  // Lets one read take up to `bytes` of the body (the parser then serves the caller's buffer from
  // what it holds, without a system call). For bodies that are processed rather than relayed
  // (substitution): fewer, larger reads. release() gives the memory back.
  void widen_reads(std::size_t bytes) {
    if (connection_ && connection_->buffer.capacity() < bytes) connection_->buffer.reserve(bytes);
  }

  // Whether body bytes can be read without waiting: some are buffered by the parser already or
  // waiting in the socket (FIONREAD, one cheap system call; for TLS, records not yet decrypted).
  // A hint only: a filter that gathers output (SubstitutionFilter) reads on while this holds and
  // writes what it has before a read that may wait.
  bool body_bytes_waiting() {
    if (!connection_) return false;
    if (connection_->buffer.size() != 0) return true;
    error_code ec;
    const std::size_t n = connection_->lowest().socket().available(ec);
    return !ec && n != 0;
  }

  // Ends the attempt's use of the connection: back to the pool when it is clean (the response
  // read to its end and keep-alive, the request fully written, nothing read past the response)
  // and its endpoint is still configured in the worker's *current* snapshot; closed otherwise.
  // Bytes already read past the response's end would be read as the next request's response
  // (response queue poisoning).
  void release(Pool& pool, const runtime::Snapshot* current);
  // Before the next request.
  void reset() { response_.reset(); }

 private:
  // Moves the connection into a TLS stream with SNI and verification set as `up` says.
  void prepare_tls(const runtime::UpstreamState& up);

  // Shared with the handler of every operation in progress on it, so that a connection given
  // up mid-operation (discard) lives until that operation's last completion has run.
  std::shared_ptr<Connection> connection_;
  std::optional<ResponseParser> response_;
  server::OutgoingMessage out_;  // the request as it goes to the upstream
};

}  // namespace tidegate::dataplane::upstream
