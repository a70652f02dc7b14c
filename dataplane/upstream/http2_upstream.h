#pragma once
// The upstream HTTP/2 side of one exchange's attempts (server/exchange.h): a stream on a shared
// connection to the endpoint (upstream/http2_client.h) with the same operations as
// Http1Upstream, so that the exchange drives both alike: connect (join or open a connection),
// start the request, write body bytes, read the response head into a message the exchange's
// arena holds, read body bytes, the trailers, release. It decides nothing. One object per
// exchange, reused from one attempt to the next.
//
// Completions are posted, never run inside nghttp2's callbacks; each pending operation has its
// own deadline (the route's timeouts), after which it fails with beast::error::timeout and the
// stream is reset.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nghttp2/nghttp2.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http.hpp>

#include "runtime/snapshot.h"
#include "server/headers.h"
#include "upstream/http2_client.h"

namespace tidegate::dataplane::upstream {

// Error of an attempt whose stream the backend refused or never processed (REFUSED_STREAM, or
// above the last stream id of its GOAWAY): safe to send again on another connection.
const boost::system::error_category& http2_category();
enum class Http2Error { kRefused = 1, kReset, kConnectionLost, kHeaderTooLarge, kBadResponse };
boost::system::error_code make_error(Http2Error e);

class Http2Upstream {
 public:
  using error_code = boost::system::error_code;
  using Request = boost::beast::http::request<boost::beast::http::buffer_body, server::Fields>;
  using Response = boost::beast::http::response<boost::beast::http::buffer_body, server::Fields>;
  using Trailers = server::TrailerFields;

  Http2Upstream();
  ~Http2Upstream();
  Http2Upstream(const Http2Upstream&) = delete;
  Http2Upstream& operator=(const Http2Upstream&) = delete;

  // A ready connection with room; false when there is none (then connect()).
  bool take_pooled(Http2Pool& pool, const Endpoint& ep, uint64_t tls_key);
  // Joins or opens a connection to `ep` (TLS with ALPN h2 when `up` has a TLS context);
  // `handler(error_code)` once it is ready.
  void connect(Http2Pool& pool, const runtime::Executor& executor, const runtime::UpstreamState& up,
               const Endpoint& ep, std::chrono::milliseconds timeout,
               std::function<void(error_code)> handler);
  // The request head for this attempt; the response head will allocate from `arena`.
  void start_request(const Request& req, std::pmr::memory_resource* arena, std::size_t header_limit,
                     bool head_request);
  // Opens the stream with the head (first call) and hands nghttp2 `n` body bytes at `data`;
  // `last` ends the request. `handler(error_code)` once nghttp2 took the bytes.
  void write(const char* data, std::size_t n, bool last, std::chrono::milliseconds timeout,
             std::function<void(error_code)> handler);
  bool request_sent() const { return request_sent_; }
  // Trailers to send after the last DATA (null or empty: none); valid until request_sent().
  void set_request_trailers(const Trailers* trailers) { request_trailers_ = trailers; }
  // The final response head (1xx heads are skipped); `handler(error_code)`.
  void read_header(std::chrono::milliseconds timeout, std::function<void(error_code)> handler);
  Response& response() { return *response_; }
  // The stream ended (END_STREAM) and every body byte was read.
  bool response_done() const { return end_stream_ && in_used_ == in_.size(); }
  // The response ended with its head: no DATA, no trailers (a gRPC trailers-only response).
  bool ended_with_head() const { return ended_with_head_; }
  std::optional<uint64_t> content_length() const { return content_length_; }
  // Reads body bytes into [data, data + size); `handler(error_code, bytes read)`; 0 bytes with
  // response_done() at the end.
  void read_body(char* data, std::size_t size, std::chrono::milliseconds timeout,
                 std::function<void(error_code, std::size_t)> handler);
  // A pending read's deadline starts again (request bytes flowed on a duplex exchange: the
  // call is alive).
  void touch_read(std::chrono::milliseconds timeout);
  // The response's trailers (after response_done()).
  const Trailers& trailers() const { return trailers_; }

  bool attached() const { return client_ != nullptr; }
  // The backend never processed the request (REFUSED_STREAM, a stream its GOAWAY left out, a
  // HEADERS that never left), or a connection opened before this attempt was lost before the
  // response head: safe to send again on another connection.
  bool retry_safe() const {
    return refused_ || close_code_ == NGHTTP2_REFUSED_STREAM || (reused_ && lost_ && !head_done_);
  }
  const Endpoint& endpoint() const { return endpoint_; }
  // Ends the attempt's use of the stream: a stream still open is reset (CANCEL).
  void release();
  // Before the next request.
  void reset();

  // --- From Http2Client (inside nghttp2's callbacks: record, complete later)
  void on_header(std::string_view name, std::string_view value);
  void on_headers_end(bool end_stream);
  void on_data(const uint8_t* data, std::size_t n);
  void on_end_stream();
  void on_closed(uint32_t error_code);
  void on_refused();
  void on_connection_lost();
  ssize_t read_data(uint8_t* buf, std::size_t length, uint32_t* flags);

 private:
  void arm(std::optional<boost::asio::steady_timer>& timer, std::chrono::milliseconds timeout);
  void on_timeout(bool write);
  // The pending write completes (posted).
  void post_write(error_code ec);
  // Something arrived: a pending read is looked at, outside nghttp2 (posted once).
  void notify();
  // A pending read that can be answered now is (called from a posted handler).
  void try_read();
  error_code close_error() const;
  // Lets go of the last attempt's stream and forgets its state (the response head stays).
  void reset_attempt();

  std::shared_ptr<Http2Client> client_;
  Endpoint endpoint_;
  bool reused_ = false;
  bool reserved_ = false;  // a slot of client_ held until submit()
  int32_t stream_id_ = -1;

  // Request.
  std::vector<nghttp2_nv> nv_;
  std::string names_;  // lower-cased names and pseudo-header values, referenced by nv_
  std::size_t header_limit_ = 0;
  bool head_request_ = false;
  const char* out_ = nullptr;
  std::size_t out_size_ = 0;
  bool out_last_ = false;
  bool deferred_ = false;
  bool submitted_ = false;
  bool request_sent_ = false;
  const Trailers* request_trailers_ = nullptr;
  std::function<void(error_code)> write_handler_;

  // Response.
  std::optional<Response> response_;
  std::optional<uint64_t> content_length_;
  std::size_t header_bytes_ = 0;
  bool head_done_ = false;
  bool end_stream_ = false;
  bool ended_with_head_ = false;
  bool closed_ = false;
  bool refused_ = false;
  bool lost_ = false;
  bool bad_ = false;  // a malformed or too large head
  uint32_t close_code_ = 0;
  unsigned status_ = 0;
  Trailers trailers_;
  std::string in_;  // response body received and not read yet (at most the stream window)
  std::size_t in_used_ = 0;
  enum class Reading { kNothing, kHeader, kBody };
  Reading reading_ = Reading::kNothing;
  char* read_to_ = nullptr;
  std::size_t read_size_ = 0;
  std::function<void(error_code)> header_handler_;
  std::function<void(error_code, std::size_t)> body_handler_;
  bool notify_posted_ = false;

  // The deadlines of the pending write and read (a duplex exchange has both at once). Their
  // handlers hold `alive_` weakly: a timer that fired after this object went away, or after
  // the attempt ended, does nothing.
  std::optional<boost::asio::steady_timer> write_timer_;
  std::optional<boost::asio::steady_timer> read_timer_;
  std::shared_ptr<char> alive_ = std::make_shared<char>();
};

}  // namespace tidegate::dataplane::upstream
