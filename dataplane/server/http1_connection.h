#pragma once
// One downstream HTTP/1.1 connection, plain or TLS: the HTTP/1.1 codec of the client side. It
// does the TLS handshake, reads request heads and bodies with Beast's parser, applies the strict
// HTTP/1.1 framing rules (server/http1_policy.h), frames responses (chunking, HTTP/1.0 clients,
// keep-alive) and answers its own errors (400, 413, 414, 431). Requests are handled one at a time
// in arrival order (so pipelined requests are answered in order), each by the connection's
// Exchange (server/exchange.h), which sees this connection as its Downstream. An accepted
// upgrade (101) turns the connection into a byte tunnel that no configuration change closes;
// an error answer that leaves a body unread ends in a lingering close. Every asynchronous
// operation holds shared_from_this(); errors are answered or close the connection, never thrown.

#include <array>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "ratelimit/ip_address.h"
#include "runtime/io_types.h"
#include "server/downstream.h"
#include "server/exchange.h"
#include "server/headers.h"
#include "server/limits.h"
#include "server/wire.h"
#include "server/worker.h"
#include "tls/server_stream.h"

namespace tidegate::dataplane::server {

class Worker;

// TLS termination: OpenSSL over the TCP stream with our own BIO (tls/server_stream.h).
using TlsStream = tls::ServerStream;

template <class ClientStream>
class Http1Connection final : public SessionBase,
                              public Downstream,
                              public std::enable_shared_from_this<Http1Connection<ClientStream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<ClientStream, runtime::Stream>;

  // `tls` is used (and required) only by the TLS instantiation.
  // `peer`: the client's address, as accept returned it.
  // `listener`: the Gateway listener that accepted it (null: the data plane's own).
  Http1Connection(Worker& worker, runtime::Socket socket,
                  const boost::asio::ip::tcp::endpoint& peer,
                  boost::asio::ssl::context* tls = nullptr, ListenerName listener = nullptr);
  ~Http1Connection() override;
  void start();
  void drain() override;
  void close_now() override;

  // Downstream (server/downstream.h).
  std::shared_ptr<void> hold() override { return this->shared_from_this(); }
  runtime::Executor executor() override { return lowest().get_executor(); }
  bool is_tls() const override { return kTls; }
  const std::string& peer_address() const override { return peer_address_; }
  std::string_view listener() const override {
    return listener_ ? std::string_view(*listener_) : std::string_view();
  }
  const std::optional<ratelimit::IpAddress>& peer_ip() const override { return peer_ip_; }
  unsigned http_version() const override { return client_version_; }
  tls::PeerCertificate* peer_certificate() override {
    if constexpr (kTls) {
      return &client_->peer_certificate();
    } else {
      return nullptr;
    }
  }
  RequestMessage& request() override { return request_->get(); }
  bool request_complete() const override { return request_->is_done(); }
  std::optional<uint64_t> request_content_length() const override {
    auto length = request_->content_length();
    return length ? std::optional<uint64_t>(*length) : std::nullopt;
  }
  void limit_request_body(uint64_t bytes) override { request_->body_limit(bytes); }
  bool upgrade_requested() const override {
    return upgrade_allowed_ && request_->upgrade() && request_->is_done();
  }
  std::string_view other_upgrade_requested() const override {
    return request_->upgrade() && request_->is_done() ? std::string_view(other_upgrade_)
                                                      : std::string_view();
  }
  void send_continue() override;
  void read_request_body(char* data, std::size_t size) override;
  void send_response_head(ResponseMessage& res, const ResponseBody& body) override;
  void send_response_body(const char* data, std::size_t n, bool last) override;
  bool can_send_file() const override { return !kTls && !client_out_.chunked(); }
  void send_response_file(int fd, uint64_t offset, std::size_t n, bool last) override;
  void set_response_trailers(const TrailerFields&) override {}
  // The sequential flow never retries with a read pending.
  void cancel_request_body_read() override {}
  const TrailerFields& request_trailers() const override { return kNoTrailers; }
  void send_upgrade(ResponseMessage& res) override;
  void send_local_response(LocalResponse& res, bool close) override;
  void exchange_finished() override;
  void close() override { close_client(); }

 private:
  using error_code = boost::system::error_code;
  using RequestParser =
      boost::beast::http::request_parser<boost::beast::http::buffer_body, FieldsAllocator>;
  // kLingering: an error answer is sent and our side shut; the client's unread bytes are read
  // and dropped until it closes (linger()).
  enum class State { kIdle, kBusy, kTunnel, kLingering, kClosed };

  runtime::Stream& lowest() { return boost::beast::get_lowest_layer(*client_); }
  static std::unique_ptr<ClientStream> make_client(runtime::Socket&& socket,
                                                   boost::asio::ssl::context* tls) {
    if constexpr (kTls) {
      return std::make_unique<ClientStream>(runtime::Stream(std::move(socket)), *tls);
    } else {
      return std::make_unique<ClientStream>(std::move(socket));
    }
  }
  // HTTP/2 (ALPN h2 after the handshake, or the cleartext preface): the connection goes on as
  // an Http2Connection (server/http2_connection.h) with the stream and `received`.
  void hand_over(std::string_view received);
  // The first bytes on the plain port may be HTTP/2's preface (Limits::http2.prior_knowledge):
  // true when they are (handed over, or more bytes are being read to tell).
  bool detect_preface();
  void start_handshake();
  // ssl-passthrough hosts exist: reads until the ClientHello is whole, then either relays the
  // connection to the host's backend (server/passthrough.h) or starts the handshake with it.
  void read_client_hello();
  void on_handshake(error_code ec);
  // Waits for the next request: its first byte within the keep-alive timeout (on a new
  // connection, the header timeout), then the whole head within the header timeout
  // (Limits::client_header_timeout, both shortened under connection pressure).
  void do_read_header();
  // Parses what the buffer holds of the head; reads the rest (within the header deadline) when
  // it is not complete.
  void parse_head();
  void on_read_header(error_code ec, std::size_t header_bytes);
  void handle_request();
  void on_read_request_body(error_code ec, std::size_t size);
  void on_local_response_written(error_code ec, bool close);
  void close_client();
  void linger();
  void linger_read(std::chrono::steady_clock::time_point deadline);
  // Tunnel (after a 101).
  void start_tunnel();
  void tunnel_client_to_upstream();
  void tunnel_upstream_to_client();
  void end_tunnel();

  Worker& worker_;
  // Held by pointer so that an HTTP/2 connection can take it over (the TLS stream cannot move).
  std::unique_ptr<ClientStream> client_;
  bool handed_over_ = false;
  boost::beast::flat_buffer client_buffer_;
  std::string peer_address_;
  ListenerName listener_;
  std::optional<ratelimit::IpAddress> peer_ip_;
  State state_ = State::kIdle;
  bool draining_ = false;
  bool first_request_ = true;
  std::size_t head_bytes_ = 0;  // of the current request head, parsed so far

  // The exchange of the current request. Declared before request_: the request's fields live in
  // the exchange's arena.
  Exchange exchange_;
  std::optional<RequestParser> request_;
  OutgoingMessage client_out_;  // the response as it goes to the client
  bool client_keep_alive_ = false;
  unsigned client_version_ = 11;
  // The request may go up as an upgrade (RequestVerdict::websocket_upgrade).
  bool upgrade_allowed_ = false;
  std::string other_upgrade_;  // RequestVerdict::other_upgrade

  // The upstream-to-client direction of a tunnel needs its own buffer (the other one borrows
  // the exchange's relay buffer).
  std::unique_ptr<std::array<char, Limits::kRelayBufferBytes>> tunnel_buffer_;
  std::chrono::milliseconds tunnel_idle_{60'000};
  // The tunnel's idle limit is watched by a timer of its own: Beast's per-operation timeouts
  // leave the deadline of a read already pending unchanged, so a quiet direction would end a
  // tunnel whose other direction is busy (a server pushing to a silent client).
  using WatchTimer =
      boost::asio::basic_waitable_timer<std::chrono::steady_clock,
                                        boost::asio::wait_traits<std::chrono::steady_clock>,
                                        runtime::Executor>;
  std::optional<WatchTimer> tunnel_timer_;
  std::chrono::steady_clock::time_point tunnel_active_;
  void arm_tunnel_timer();

  // X-Sendfile on a plain connection: sendfile(2) while the socket takes bytes, then a wait
  // for it to be writable, within Limits::client_send_timeout (file_timer_).
  void send_file_loop(int fd, uint64_t offset, std::size_t left, std::size_t sent);
  void file_sent(error_code ec, std::size_t sent);
  std::optional<WatchTimer> file_timer_;
  uint64_t file_wait_ = 0;  // the socket wait the timer stands for
};

extern template class Http1Connection<runtime::Stream>;
extern template class Http1Connection<TlsStream>;

}  // namespace tidegate::dataplane::server
