#pragma once
// HTTP/2 connections to backends (backend-protocol H2C, GRPC, GRPCS; appProtocol h2c): the
// upstream HTTP/2 codec on nghttp2's client session. One Http2Client is one connection to one
// endpoint, shared by up to Http2ClientLimits::kMaxStreamsPerConnection streams of any
// exchanges of its worker; each stream is an Http2Upstream (upstream/http2_upstream.h), the
// exchange's side of it. The worker's Http2Pool keeps up to kMaxConnectionsPerEndpoint of them
// per endpoint (docs/proxy.md, "HTTP/2 backends").
//
// As on the client side (server/http2_connection.h), every nghttp2 callback only records what
// happened in the stream it concerns; the exchanges hear of it through posted completions,
// never from inside nghttp2. A backend's GOAWAY makes the connection draining: it takes no new
// stream, the streams the backend processed finish, and nghttp2 closes the others with
// REFUSED_STREAM, which the exchange retries on another connection (they were never processed).

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nghttp2/nghttp2.h>
#include <boost/asio/steady_timer.hpp>

#include "runtime/io_types.h"
#include "runtime/snapshot.h"
#include "server/headers.h"
#include "upstream/pool.h"

namespace tidegate::dataplane::upstream {

class Http2Upstream;
class Http2Pool;

struct Http2ClientLimits {
  // Streams per connection: at most this many, fewer when the backend's
  // SETTINGS_MAX_CONCURRENT_STREAMS says so.
  static constexpr uint32_t kMaxStreamsPerConnection = 100;
  // Connections per endpoint and worker. Past them new streams queue on the least loaded one
  // (nghttp2 opens them as earlier streams close).
  static constexpr std::size_t kMaxConnectionsPerEndpoint = 4;
  // Our receive windows: a stream's response body waits in the proxy up to this much (the
  // window reopens as the client takes the bytes), and all streams of a connection together up
  // to kConnectionWindow.
  static constexpr int32_t kStreamWindow = 64 * 1024;
  static constexpr int32_t kConnectionWindow = 8 * 1024 * 1024;
  // A response header list past this is refused (also bounded by max_response_header_bytes).
  static constexpr uint32_t kMaxHeaderListSize = 64 * 1024;
  // A connection without streams for this long is closed.
  static constexpr std::chrono::seconds kIdleTimeout{60};
};

class Http2Client : public std::enable_shared_from_this<Http2Client> {
 public:
  using error_code = boost::system::error_code;
  enum class State { kConnecting, kReady, kDraining, kClosed };

  Http2Client(Http2Pool& pool, const runtime::Executor& executor, const Endpoint& endpoint,
              uint64_t tls_key);
  ~Http2Client();
  Http2Client(const Http2Client&) = delete;
  Http2Client& operator=(const Http2Client&) = delete;

  // Connects (TCP, then TLS with ALPN h2 when `up` has a TLS context) and sends the connection
  // preface; the waiters hear of the outcome. `timeout` bounds connect and handshake.
  void start(const runtime::UpstreamState& up, std::chrono::milliseconds timeout);
  // Calls `f({})` once the connection is ready (posted, also when it already is), or `f(error)`
  // when it failed or closed before that.
  void when_ready(std::function<void(error_code)> f);

  State state() const { return state_; }
  const Endpoint& endpoint() const { return endpoint_; }
  uint64_t tls_key() const { return tls_key_; }
  bool tls() const { return tls_; }
  // Streams open or about to be (slots held), and how many the connection takes.
  std::size_t load() const { return streams_.size() + reserved_; }
  std::size_t capacity() const;
  bool has_room() const { return load() < capacity(); }
  // One stream slot held from take or when_ready() to submit() or unreserve(), so that
  // has_room() counts it.
  void reserve() { ++reserved_; }
  void unreserve() {
    if (reserved_ > 0) --reserved_;
  }

  // --- For Http2Upstream
  // Opens a stream with the request head `nv`; with a body, DATA comes from the owner's
  // read_data(). Returns the stream id, or a negative nghttp2 error.
  int32_t submit(Http2Upstream* owner, const std::vector<nghttp2_nv>& nv, bool with_body);
  // Queues trailers after the stream's last DATA (called from its data source). False when
  // none are left to send (all connection-specific or pseudo) or nghttp2 refused them.
  bool submit_trailers(int32_t id, const server::TrailerFields& fields);
  // The owner has more request body for nghttp2 to read.
  void resume(int32_t id);
  // The owner took `n` response body bytes: the windows reopen by that much.
  void consume(int32_t id, std::size_t n);
  // The owner lets go of the stream: RST_STREAM(CANCEL) unless it is closed already.
  void cancel(int32_t id);
  runtime::Executor executor() const { return executor_; }
  // Writes what nghttp2 has queued (unless a write is under way; then after it).
  void flush();
  // Closes the connection now; its streams fail.
  void close();
  // Once the backend's GOAWAY came or the endpoint left: no new streams; closes when empty.
  void retire();

 private:
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                       std::size_t namelen, const uint8_t* value, std::size_t valuelen,
                       uint8_t flags, void* user);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_data_chunk(nghttp2_session*, uint8_t flags, int32_t stream_id, const uint8_t* data,
                           std::size_t len, void* user);
  static int on_stream_close(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user);
  static int on_frame_not_send(nghttp2_session*, const nghttp2_frame* frame, int lib_error,
                               void* user);
  static ssize_t read_data(nghttp2_session*, int32_t stream_id, uint8_t* buf, std::size_t length,
                           uint32_t* flags, nghttp2_data_source* source, void* user);
  Http2Upstream* owner(int32_t id);
  void on_connected(std::chrono::milliseconds timeout);
  bool begin_session();
  void ready(error_code ec);
  void do_read();
  void on_written(error_code ec);
  void fail(error_code ec);
  void arm_ticker();
  void maybe_idle();

  Http2Pool& pool_;
  runtime::Executor executor_;
  Endpoint endpoint_;
  uint64_t tls_key_;
  bool tls_ = false;
  State state_ = State::kConnecting;
  Connection connection_;
  nghttp2_session* session_ = nullptr;
  std::unordered_map<int32_t, Http2Upstream*> streams_;
  std::vector<std::function<void(error_code)>> waiters_;
  std::size_t reserved_ = 0;
  std::string out_;  // bytes being written
  bool writing_ = false;
  bool flushing_ = false;
  std::array<char, 16 * 1024> read_buffer_;
  std::chrono::steady_clock::time_point idle_since_;
  boost::asio::steady_timer ticker_;
};

// The HTTP/2 backend connections of one worker (only its thread touches them), by endpoint and
// TLS settings like Pool.
class Http2Pool {
 public:
  Http2Pool() = default;
  ~Http2Pool();
  Http2Pool(const Http2Pool&) = delete;
  Http2Pool& operator=(const Http2Pool&) = delete;

  // A ready connection to `ep` with room for a stream (the least loaded), or null.
  std::shared_ptr<Http2Client> ready(const Endpoint& ep, uint64_t tls_key);
  // The connection a new stream should wait for: a ready or connecting one with room; else a
  // new one while the endpoint has fewer than kMaxConnectionsPerEndpoint (`*fresh` set: the
  // caller starts it); else the least loaded (the stream queues in nghttp2).
  std::shared_ptr<Http2Client> pick(const runtime::Executor& executor, const Endpoint& ep,
                                    uint64_t tls_key, bool* fresh);
  // Called by a connection once it closed.
  void remove(Http2Client* client);
  // Connections to endpoints not in `keep` take no new streams and close once idle.
  void retain_only(const runtime::EndpointSet& keep);

 private:
  std::unordered_map<PoolKey, std::vector<std::shared_ptr<Http2Client>>, PoolKeyHash> clients_;
  bool closing_ = false;
};

}  // namespace tidegate::dataplane::upstream
