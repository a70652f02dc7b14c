#pragma once
// One downstream HTTP/2 connection (RFC 9113), plain (prior knowledge) or TLS (ALPN h2): the
// HTTP/2 codec of the client side, on nghttp2. Each request stream is an Http2Stream, which is
// the Downstream (server/downstream.h) of its own Exchange (server/exchange.h): routing,
// policies, balancing, retries, response filters and observation are the same code as for
// HTTP/1.1. The connection owns the nghttp2 session, the socket's one read and one write, and
// the timers; it enforces the settings and flood limits of Limits::http2 (docs/proxy.md,
// "HTTP/2").
//
// Shape: Http2Session holds everything but the stream type; Http2Connection<S> adds the I/O on
// a plain or TLS stream. The streams hold the session (shared_ptr) while they live; the session
// holds its open streams by id. Every nghttp2 callback only records what happened: the exchanges
// are driven from posted handlers, never from inside nghttp2.

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nghttp2/nghttp2.h>
#include <boost/asio/steady_timer.hpp>

#include "ratelimit/ip_address.h"
#include "runtime/io_types.h"
#include "server/downstream.h"
#include "server/exchange.h"
#include "server/worker.h"

namespace tidegate::dataplane::server {

class Http2Session;

// The client connection preface of RFC 9113 section 3.4, which starts cleartext HTTP/2.
inline constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

class Http2Stream final : public Downstream, public std::enable_shared_from_this<Http2Stream> {
 public:
  Http2Stream(Http2Session& session, int32_t id);
  ~Http2Stream();

  // Downstream (server/downstream.h).
  std::shared_ptr<void> hold() override { return shared_from_this(); }
  runtime::Executor executor() override;
  bool is_tls() const override;
  const std::string& peer_address() const override;
  const std::optional<ratelimit::IpAddress>& peer_ip() const override;
  std::string_view listener() const override;
  unsigned http_version() const override { return 20; }
  tls::PeerCertificate* peer_certificate() override;
  RequestMessage& request() override { return request_; }
  bool request_complete() const override { return end_stream_ && in_.size() == in_used_; }
  std::optional<uint64_t> request_content_length() const override { return content_length_; }
  void limit_request_body(uint64_t bytes) override { body_limit_ = bytes; }
  bool upgrade_requested() const override { return false; }
  std::string_view other_upgrade_requested() const override { return {}; }
  void send_continue() override;
  void read_request_body(char* data, std::size_t size) override;
  void cancel_request_body_read() override { read_to_ = nullptr; }
  void send_response_head(ResponseMessage& res, const ResponseBody& body) override;
  void send_response_body(const char* data, std::size_t n, bool last) override;
  void set_response_trailers(const TrailerFields& trailers) override { trailers_ = &trailers; }
  const TrailerFields& request_trailers() const override { return request_trailers_; }
  void send_upgrade(ResponseMessage& res) override;
  void send_local_response(LocalResponse& res, bool close) override;
  void exchange_finished() override;
  void close() override;

 private:
  friend class Http2Session;
  using error_code = boost::system::error_code;
  // What the stream waits to hear has been written to the socket.
  enum class Waiting { kNothing, kContinue, kHead, kBody, kLocal };

  // Request head, from nghttp2's callbacks.
  void on_header(std::string_view name, std::string_view value);
  // The head is complete: checked, then routed (posted).
  void on_request_head(bool end_stream);
  void on_data(const uint8_t* data, std::size_t n);
  void on_end_stream();
  // nghttp2 closed the stream (both ends done, a reset, or the connection going away).
  void on_closed(uint32_t error_code);
  // Serves a pending read_request_body() from what has arrived.
  void fulfil_read();
  // The response headers as nghttp2 name/value pairs (names lower case, hop-by-hop dropped).
  template <class Header>
  void build_headers(const Header& head, bool keep_length);
  // nghttp2's data source: copies the current body chunk into a DATA frame.
  static ssize_t read_data(nghttp2_session*, int32_t, uint8_t* buf, std::size_t length,
                           uint32_t* flags, nghttp2_data_source* source, void* user_data);
  ssize_t read_data(uint8_t* buf, std::size_t length, uint32_t* flags);
  void submit(bool with_body);
  // Queues trailers_ after the last DATA frame; false when none are left to send.
  bool submit_trailers();
  // Called by the session once what this stream waited for is on the wire (or failed).
  void written(error_code ec);
  void reset(uint32_t error_code);

  Http2Session& session_;
  std::shared_ptr<Http2Session> owner_;  // keeps the connection while the stream lives
  int32_t id_;
  Exchange exchange_;
  RequestMessage request_;      // after exchange_: its fields live in the exchange's arena
  bool closed_ = false;         // nghttp2 no longer knows the stream
  bool aborted_ = false;        // ... and it closed before the response was complete
  bool finished_ = false;       // the exchange is over (the response sent)
  bool response_done_ = false;  // END_STREAM sent
  bool routed_ = false;
  bool end_stream_ = false;
  bool head_done_ = false;
  bool has_body_ = false;  // the HEADERS frame did not end the stream
  bool too_large_ = false;
  bool bad_head_ = false;
  std::size_t header_bytes_ = 0;
  std::size_t header_fields_ = 0;
  std::string authority_;
  std::string host_;
  std::string cookie_;
  std::optional<uint64_t> content_length_;
  uint64_t body_limit_ = ~uint64_t{0};
  uint64_t body_received_ = 0;

  // Request body that arrived and the exchange has not read yet (at most the stream window).
  std::string in_;
  std::size_t in_used_ = 0;
  char* read_to_ = nullptr;  // a pending read_request_body()
  std::size_t read_size_ = 0;
  std::chrono::steady_clock::time_point read_since_;

  // Response: header storage for nghttp2, and the body chunk being sent.
  std::vector<nghttp2_nv> nv_;
  std::string names_;  // lower-cased names, referenced by nv_
  std::string status_;
  const char* out_ = nullptr;
  std::size_t out_size_ = 0;
  bool out_last_ = false;
  bool deferred_ = false;   // nghttp2 waits for resume_data
  bool submitted_ = false;  // the final response head was submitted
  Waiting waiting_ = Waiting::kNothing;
  std::size_t waiting_bytes_ = 0;
  std::chrono::steady_clock::time_point blocked_since_{};  // body queued, window shut
  LocalResponse* local_ = nullptr;
  const TrailerFields* trailers_ = nullptr;  // sent after the last DATA
  TrailerFields request_trailers_;
  std::vector<nghttp2_nv> trailer_nv_;
};

class Http2Session : public SessionBase {
 public:
  using error_code = boost::system::error_code;
  ~Http2Session() override;

  Worker& worker() { return worker_; }
  const std::string& peer_address() const { return peer_address_; }
  const std::optional<ratelimit::IpAddress>& peer_ip() const { return peer_ip_; }
  std::string_view listener() const {
    return listener_ ? std::string_view(*listener_) : std::string_view();
  }
  bool tls() const { return tls_; }
  virtual runtime::Executor executor() = 0;
  virtual tls::PeerCertificate* peer_certificate() = 0;
  nghttp2_session* native() { return session_; }
  // Writes what nghttp2 has queued (unless a write is under way; then after it).
  void flush();
  // The stream's wait ends with the write that carries what nghttp2 is sending now.
  void complete_after_write(std::shared_ptr<Http2Stream> stream);
  void drain() override;
  void close_now() override;

 protected:
  Http2Session(Worker& worker, std::string peer_address,
               std::optional<ratelimit::IpAddress> peer_ip, bool tls,
               ListenerName listener = nullptr);
  // For Http2Connection<S>.
  virtual std::shared_ptr<Http2Session> self() = 0;
  virtual void write_out(const std::string& bytes) = 0;  // completes with on_written()
  virtual void close_socket() = 0;
  // The worker drains (drain() ran): a close does not linger.
  bool draining() const { return draining_; }
  // Sets up nghttp2 and sends the server's SETTINGS; `received` is what the client already sent
  // (the preface, read by the HTTP/1.1 codec). False: close.
  bool begin(std::string_view received);
  // Bytes from the client. False: the connection must close.
  bool on_received(const char* data, std::size_t n);
  void on_written(error_code ec);
  void on_read_failed();
  void arm_ticker();
  void shut();  // closes the socket and ends every stream

 private:
  friend class Http2Stream;
  static int on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* user);
  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                       std::size_t namelen, const uint8_t* value, std::size_t valuelen,
                       uint8_t flags, void* user);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_data_chunk(nghttp2_session*, uint8_t flags, int32_t stream_id, const uint8_t* data,
                           std::size_t len, void* user);
  static int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_stream_close(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user);
  Http2Stream* find(int32_t id);
  // Counts a control frame against the flood budget; past it GOAWAY(ENHANCE_YOUR_CALM).
  void count_control_frame();
  void count_oversized_header_list();
  void calm_down(const char* why);
  void tick();
  void idle_changed();
  void note_reset(int32_t id);

  Worker& worker_;
  std::string peer_address_;
  std::optional<ratelimit::IpAddress> peer_ip_;
  ListenerName listener_;
  bool tls_;
  nghttp2_session* session_ = nullptr;
  std::unordered_map<int32_t, std::shared_ptr<Http2Stream>> streams_;
  std::string out_;  // bytes being written
  bool writing_ = false;
  bool flushing_ = false;
  bool closed_ = false;
  bool draining_ = false;
  bool calm_ = false;  // GOAWAY(ENHANCE_YOUR_CALM) sent: close once written
  std::chrono::steady_clock::time_point write_started_;
  std::vector<std::shared_ptr<Http2Stream>> batch_;    // complete when out_ is written
  std::vector<std::shared_ptr<Http2Stream>> filling_;  // complete with the next write
  // Flood accounting (Http2Limits).
  uint64_t control_frames_ = 0;
  uint32_t oversized_header_lists_ = 0;  // whole connection (Http2Limits::kMaxOversizedHeaderLists)
  uint32_t stalled_streams_ = 0;         // whole connection (Http2Limits::kMaxStalledStreams)
  uint64_t frames_sent_ = 0;
  std::chrono::steady_clock::time_point window_start_;
  std::chrono::steady_clock::time_point idle_since_;
  bool had_stream_ = false;
  // Stream ids: the highest a client opened, and the last ones reset by us while the client was
  // still sending (their trailers may still come). A HEADERS below the highest that is neither
  // open nor one of those opens nothing: a connection error (RFC 9113 5.1.1), which nghttp2
  // itself ignores (it cannot tell it from a stream it forgot).
  int32_t max_stream_id_ = 0;
  std::vector<int32_t> reset_while_open_;
  boost::asio::steady_timer ticker_;
};

template <class ClientStream>
class Http2Connection final : public Http2Session,
                              public std::enable_shared_from_this<Http2Connection<ClientStream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<ClientStream, runtime::Stream>;
  // Takes over a client connection from the HTTP/1.1 codec (after the TLS handshake chose h2,
  // or after the cleartext preface arrived), which already counted it in the worker.
  Http2Connection(Worker& worker, std::unique_ptr<ClientStream> client, std::string peer_address,
                  std::optional<ratelimit::IpAddress> peer_ip, ListenerName listener = nullptr);
  ~Http2Connection() override;
  void start(std::string_view received);
  runtime::Executor executor() override { return lowest().get_executor(); }
  tls::PeerCertificate* peer_certificate() override {
    if constexpr (kTls) {
      return &client_->peer_certificate();
    } else {
      return nullptr;
    }
  }

 private:
  runtime::Stream& lowest() { return boost::beast::get_lowest_layer(*client_); }
  std::shared_ptr<Http2Session> self() override { return this->shared_from_this(); }
  void write_out(const std::string& bytes) override;
  void close_socket() override;
  void do_read();
  // Lingering close, as the HTTP/1.1 codec's: our side is shut (the FIN follows the last
  // frames) and what the client still sends is read raw and dropped until it closes, for at
  // most Limits::kLingerTime and kLingerTimeout without a byte. Closing with unread bytes makes
  // the kernel reset the connection, which can destroy our last frames (a GOAWAY, a PING ACK)
  // before the client reads them.
  void linger_read();

  std::unique_ptr<ClientStream> client_;
  std::array<char, 16 * 1024> read_buffer_;
  bool reading_ = false;  // a read of do_read() is pending
  bool in_read_ = false;  // inside the completion of that read
  bool lingering_ = false;
  std::chrono::steady_clock::time_point linger_deadline_;
};

}  // namespace tidegate::dataplane::server
