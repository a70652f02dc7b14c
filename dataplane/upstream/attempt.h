#pragma once
// The upstream side of one exchange's attempts, as the exchange (server/exchange.h) sees it:
// HTTP/1.1 (upstream/http1_upstream.h) or HTTP/2 (upstream/http2_upstream.h), chosen per
// attempt by the upstream's protocol (backend-protocol, appProtocol). Both have the same
// operations; this forwards each to the one in use, so that the exchange's flow (connect, send,
// read the head, relay the body, release) is written once. The HTTP/1.1 path stays templated
// (no type erasure on the common path); the HTTP/2 one takes std::function handlers.

#include <chrono>
#include <cstddef>
#include <memory>
#include <memory_resource>
#include <optional>
#include <utility>

#include "runtime/snapshot.h"
#include "server/http1_policy.h"
#include "upstream/http1_upstream.h"
#include "upstream/http2_upstream.h"
#include "upstream/pool.h"

namespace tidegate::dataplane::upstream {

class Attempt {
 public:
  using error_code = boost::system::error_code;
  using Request = Http1Upstream::Request;
  using Response = Http2Upstream::Response;
  using Trailers = Http2Upstream::Trailers;

  // For the attempts of the next request: whether they speak HTTP/2.
  void use_http2(bool on) { http2_ = on; }
  bool http2() const { return http2_; }

  bool take_pooled(Pool& pool, Http2Pool& http2_pool, const Endpoint& ep, uint64_t tls_key) {
    return http2_ ? h2_.take_pooled(http2_pool, ep, tls_key) : h1_.take_pooled(pool, ep, tls_key);
  }
  // HTTP/2 joins a connection that is being opened, or opens one (its TLS handshake included).
  template <class Handler>
  void connect(Http2Pool& http2_pool, const runtime::Executor& executor,
               const runtime::UpstreamState& up, const Endpoint& ep,
               std::chrono::milliseconds timeout, Handler&& handler) {
    if (http2_) {
      h2_.connect(http2_pool, executor, up, ep, timeout, std::forward<Handler>(handler));
    } else {
      h1_.connect(executor, ep, up.tls_key, timeout, std::forward<Handler>(handler));
    }
  }
  void connected() {
    if (!http2_) h1_.connected();
  }
  // An HTTP/1.1 TLS upstream's handshake follows the connect; HTTP/2's was part of it.
  bool needs_handshake(const runtime::UpstreamState& up) const {
    return !http2_ && up.tls_context != nullptr;
  }
  template <class Handler>
  void handshake(const runtime::UpstreamState& up, std::chrono::milliseconds timeout,
                 Handler&& handler) {
    h1_.handshake(up, timeout, std::forward<Handler>(handler));
  }

  // The response head allocates from `arena`; `header_limit` bounds it.
  void start_request(const Request& req, std::pmr::memory_resource* arena, std::size_t header_limit,
                     bool head_request) {
    if (http2_) {
      h2_.start_request(req, arena, header_limit, head_request);
    } else {
      h1_.start_request(req);
    }
  }
  template <class Handler>
  void write(const char* data, std::size_t n, bool last, std::chrono::milliseconds timeout,
             Handler&& handler) {
    if (http2_) {
      h2_.write(data, n, last, timeout, std::forward<Handler>(handler));
    } else {
      h1_.write(data, n, last, timeout, std::forward<Handler>(handler));
    }
  }
  // HTTP/2: trailers to send after the request body (they stay valid until it is sent).
  void set_request_trailers(const Trailers* trailers) {
    if (http2_) h2_.set_request_trailers(trailers);
  }
  bool request_sent() const { return http2_ ? h2_.request_sent() : h1_.request_sent(); }

  template <class Handler>
  void read_header(std::pmr::memory_resource* arena, std::size_t header_limit, bool head_request,
                   std::chrono::milliseconds timeout, Handler&& handler) {
    if (http2_) {
      h2_.read_header(timeout, std::forward<Handler>(handler));
    } else {
      h1_.read_header(arena, header_limit, head_request, timeout, std::forward<Handler>(handler));
    }
  }
  Response& response() { return http2_ ? h2_.response() : h1_.response().get(); }
  // The framing rules for an HTTP/1.1 head (server/http1_policy.h); nghttp2 checks HTTP/2's.
  server::ResponseVerdict check_response() const {
    return http2_ ? server::ResponseVerdict{} : h1_.check_response();
  }
  bool response_done() { return http2_ ? h2_.response_done() : h1_.response().is_done(); }
  bool response_chunked() { return !http2_ && h1_.response().chunked(); }
  std::optional<uint64_t> response_content_length() {
    if (http2_) return h2_.content_length();
    auto length = h1_.response().content_length();
    return length ? std::optional<uint64_t>(*length) : std::nullopt;
  }
  // An HTTP/2 response that ended with its head (no DATA, no trailers).
  bool ended_with_head() const { return http2_ && h2_.ended_with_head(); }
  // The response's trailers: HTTP/2 only (an HTTP/1.1 backend's are not read yet).
  const Trailers& trailers() const { return http2_ ? h2_.trailers() : server::kNoTrailers; }

  template <class Handler>
  void read_body(char* data, std::size_t size, std::chrono::milliseconds timeout,
                 Handler&& handler) {
    if (http2_) {
      h2_.read_body(data, size, timeout, std::forward<Handler>(handler));
    } else {
      h1_.read_body(data, size, timeout, std::forward<Handler>(handler));
    }
  }

  // HTTP/1.1: reads of up to `bytes` (Http1Upstream::widen_reads); HTTP/2 frames are read by
  // the connection.
  void widen_reads(std::size_t bytes) {
    if (!http2_) h1_.widen_reads(bytes);
  }
  // Whether the next read_body() finds bytes without waiting (HTTP/1.1: Http1Upstream's hint;
  // HTTP/2: false, its frames are read by the connection, not by this attempt).
  bool body_bytes_waiting() { return !http2_ && h1_.body_bytes_waiting(); }

  // HTTP/2: a pending read's deadline starts again (a duplex exchange's request is flowing).
  void touch_read(std::chrono::milliseconds timeout) {
    if (http2_) h2_.touch_read(timeout);
  }
  // The attempt has its connection (HTTP/1.1) or stream (HTTP/2).
  bool attached() { return http2_ ? h2_.attached() : h1_.connection() != nullptr; }
  // The endpoint of the current attempt (only while one is attached).
  Endpoint endpoint() {
    if (http2_) return h2_.endpoint();
    return h1_.connection() ? h1_.connection()->endpoint : Endpoint{};
  }
  // The failure is not the endpoint's: a pooled HTTP/1.1 connection the server had closed, or
  // an HTTP/2 stream the backend refused or never processed.
  bool retry_safe() {
    if (http2_) return h2_.retry_safe();
    return h1_.connection() && h1_.connection()->reused;
  }
  // The attempt is abandoned: its connection closed (HTTP/1.1) or its stream reset (HTTP/2).
  void drop() {
    if (http2_) {
      h2_.release();
    } else {
      discard(h1_.connection());
    }
  }
  // The attempt is over: HTTP/1.1 connections go back to the pool when clean (Http1Upstream).
  void release(Pool& pool, const runtime::Snapshot* current) {
    if (http2_) {
      h2_.release();
    } else {
      h1_.release(pool, current);
    }
  }
  void reset() {
    h1_.reset();
    h2_.reset();
  }
  // A tunnel takes the HTTP/1.1 connection over (upgrades always go over HTTP/1.1).
  std::shared_ptr<Connection>& http1_connection() { return h1_.connection(); }

 private:
  bool http2_ = false;
  Http1Upstream h1_;
  Http2Upstream h2_;
};

}  // namespace tidegate::dataplane::upstream
