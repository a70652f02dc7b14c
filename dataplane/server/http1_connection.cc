#include "server/http1_connection.h"

#include "server/passthrough.h"
#include "tls/client_hello.h"

#include <sys/sendfile.h>

#include <cerrno>
#include <chrono>

#include <boost/asio/write.hpp>

#include "log/log.h"
#include "server/http1_policy.h"
#include "server/http2_connection.h"
#include "server/worker.h"

namespace tidegate::dataplane::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

template <class S>
Http1Connection<S>::Http1Connection(Worker& worker, runtime::Socket socket,
                                    const asio::ip::tcp::endpoint& peer, asio::ssl::context* tls,
                                    ListenerName listener)
    : worker_(worker),
      client_(make_client(std::move(socket), tls)),
      listener_(std::move(listener)),
      exchange_(worker, *this) {
  client_buffer_.reserve(Limits::kClientReadBufferBytes);
  const asio::ip::address address = peer.address();
  if (address.is_v4()) {
    // IpAddress formats IPv4 by hand: asio's to_string goes through inet_ntop (sprintf).
    peer_ip_ = ratelimit::IpAddress::v4(address.to_v4().to_uint());
    peer_address_ = peer_ip_->to_string();
  } else {
    peer_address_ = address.to_string();
    peer_ip_ = ratelimit::IpAddress::parse(peer_address_);
  }
  worker_.active_connections.fetch_add(1, std::memory_order_relaxed);
  if (auto* m = worker_.metrics()) m->connection_opened();
  worker_.add_session(this);
}

template <class S>
Http1Connection<S>::~Http1Connection() {
  // The exchange, destroyed after this, reports its open attempt to the balancer.
  if (!handed_over_) {  // else the HTTP/2 connection counts it from now on
    worker_.active_connections.fetch_sub(1, std::memory_order_relaxed);
    if (auto* m = worker_.metrics()) m->connection_closed();
  }
  worker_.remove_session(this);
}

template <class S>
void Http1Connection<S>::start() {
  if constexpr (kTls) {
    // The SNI callback finds the worker (and through it the current snapshot) here.
    SSL_set_ex_data(client_->native_handle(), Worker::ssl_ex_index(), &worker_);
    if (listener_) {
      SSL_set_ex_data(client_->native_handle(), Worker::listener_ex_index(),
                      const_cast<std::string*>(listener_.get()));
    }
    lowest().expires_after(worker_.limits().tls_handshake_timeout);
    const auto& snapshot = worker_.snapshot();
    if (snapshot && snapshot->routing->passthrough && !listener_) {
      read_client_hello();
      return;
    }
    start_handshake();
  } else {
    do_read_header();
  }
}

template <class S>
void Http1Connection<S>::start_handshake() {
  if constexpr (kTls) {
    client_->async_handshake(
        asio::ssl::stream_base::server,
        [self = this->shared_from_this()](error_code ec) { self->on_handshake(ec); });
  }
}

template <class S>
void Http1Connection<S>::read_client_hello() {
  if constexpr (kTls) {
    // ssl-passthrough: the ClientHello's SNI decides before OpenSSL sees a byte (the bytes stay
    // in the TLS stream's input for the handshake, or go to the backend as they are).
    const std::string_view received = client_->raw_input();
    const tls::ClientHelloInfo hello = tls::scan_client_hello(received);
    if (hello.state == tls::HelloScan::kIncomplete && received.size() < tls::kMaxClientHelloBytes) {
      lowest().async_read_some(client_->raw_input_space(),
                               [self = this->shared_from_this()](error_code ec, std::size_t n) {
                                 if (ec) return self->close_client();
                                 self->client_->raw_input_arrived(n);
                                 self->read_client_hello();
                               });
      return;
    }
    const auto& snapshot = worker_.snapshot();
    const runtime::TlsEntry* entry = nullptr;
    if (hello.state == tls::HelloScan::kComplete && !hello.sni.empty() && snapshot) {
      entry = snapshot->find_tls(hello.sni);
    }
    if (entry == nullptr || entry->passthrough_upstream == nullptr) {
      start_handshake();
      return;
    }
    const runtime::UpstreamState* upstream = snapshot->upstream(*entry->passthrough_upstream);
    std::vector<runtime::Endpoint> endpoints;
    if (upstream != nullptr) endpoints = upstream->endpoints;
    // The passthrough relay takes the socket and this connection's place in the worker.
    handed_over_ = true;
    state_ = State::kClosed;
    worker_.not_waiting(this);
    std::make_shared<PassthroughConnection>(worker_, std::move(lowest()), std::string(received),
                                            std::move(endpoints), peer_address_,
                                            *entry->passthrough_upstream)
        ->start();
  }
}

template <class S>
void Http1Connection<S>::on_handshake(error_code ec) {
  if (ec) {
    worker_.tls_handshake_failures.fetch_add(1, std::memory_order_relaxed);
    if (auto* m = worker_.metrics()) m->tls_handshake(false);
    TG_DEBUG("tls", "handshake with " << peer_address_ << " failed: " << ec.message());
    close_client();
    return;
  }
  worker_.tls_handshakes.fetch_add(1, std::memory_order_relaxed);
  if (auto* m = worker_.metrics()) m->tls_handshake(true);
  if constexpr (kTls) {
    const unsigned char* protocol = nullptr;
    unsigned length = 0;
    SSL_get0_alpn_selected(client_->native_handle(), &protocol, &length);
    if (length == 2 && protocol[0] == 'h' && protocol[1] == '2') {
      hand_over({});
      return;
    }
  }
  do_read_header();
}

template <class S>
void Http1Connection<S>::hand_over(std::string_view received) {
  worker_.not_waiting(this);
  state_ = State::kClosed;
  handed_over_ = true;
  auto next = std::make_shared<Http2Connection<S>>(worker_, std::move(client_), peer_address_,
                                                   peer_ip_, listener_);
  next->start(received);
}

template <class S>
bool Http1Connection<S>::detect_preface() {
  if (kTls || !first_request_ || !worker_.limits().http2.prior_knowledge) return false;
  const auto data = client_buffer_.cdata();
  const std::string_view seen(static_cast<const char*>(data.data()), data.size());
  const std::size_t n = std::min(seen.size(), kHttp2Preface.size());
  if (n == 0) return false;
  if (seen.substr(0, n) != kHttp2Preface.substr(0, n)) {
    if (!worker_.limits().http2.prior_knowledge_only) return false;
    // An HTTP/2-only port: bytes that are not the preface are no protocol the port speaks, so
    // there is nothing to answer in; the connection is closed (RFC 9113 section 3.4).
    TG_DEBUG("http2", "plain connection from "
                          << peer_address_
                          << " did not start with the HTTP/2 preface (--http2-cleartext only): "
                             "closed");
    worker_.not_waiting(this);
    close_client();
    return true;
  }
  if (seen.size() >= kHttp2Preface.size()) {
    hand_over(seen);
    return true;
  }
  // A prefix of the preface so far: the rest decides (within the header deadline).
  lowest().expires_after(worker_.under_pressure(worker_.limits().client_header_timeout));
  client_->async_read_some(client_buffer_.prepare(Limits::kClientReadBufferBytes),
                           [self = this->shared_from_this()](error_code ec, std::size_t n) {
                             self->client_buffer_.commit(n);
                             if (ec) {
                               self->worker_.not_waiting(self.get());
                               self->close_client();
                               return;
                             }
                             if (!self->detect_preface()) self->parse_head();
                           });
  return true;
}

template <class S>
void Http1Connection<S>::drain() {
  draining_ = true;
  if ((state_ == State::kIdle && client_buffer_.size() == 0) || state_ == State::kLingering) {
    close_client();
  }
}

template <class S>
void Http1Connection<S>::close_now() {
  if (state_ == State::kTunnel) {
    end_tunnel();  // keeps the tunnel count right
    return;
  }
  exchange_.drop_upstream();
  close_client();
}

template <class S>
void Http1Connection<S>::do_read_header() {
  if (draining_) {
    close_client();
    return;
  }
  state_ = State::kIdle;
  request_.reset();
  exchange_.reset();  // releases the arena the last request's fields lived in
  request_.emplace(std::piecewise_construct, std::make_tuple(),
                   std::make_tuple(FieldsAllocator(exchange_.fields_arena())));
  request_->header_limit(static_cast<std::uint32_t>(worker_.limits().max_request_header_bytes));
  request_->body_limit(kUnlimitedBody);  // bodies stream; per-route limits come with annotations
  upgrade_allowed_ = false;
  other_upgrade_.clear();
  worker_.waiting_for_request(this);
  head_bytes_ = 0;
  if (client_buffer_.size() > 0) {
    parse_head();  // a pipelined request: its head has begun
    return;
  }
  // Nothing of the next request yet: wait for its first byte (an idle keep-alive connection,
  // or a new one), then give the head its own deadline from there.
  const Limits& limits = worker_.limits();
  lowest().expires_after(worker_.under_pressure(first_request_ ? limits.client_header_timeout
                                                               : limits.keepalive_timeout));
  client_->async_read_some(
      client_buffer_.prepare(Limits::kClientReadBufferBytes),
      [self = this->shared_from_this()](error_code ec, std::size_t n) {
        self->client_buffer_.commit(n);
        if (ec && n == 0) {
          self->on_read_header(ec == asio::error::eof ? error_code(http::error::end_of_stream) : ec,
                               0);
          return;
        }
        if (self->detect_preface()) return;
        self->parse_head();
      });
}

template <class S>
void Http1Connection<S>::parse_head() {
  // Usually the whole head came with the first read: parse it here, with no second operation.
  error_code ec;
  const std::size_t used = request_->put(client_buffer_.data(), ec);
  client_buffer_.consume(used);
  head_bytes_ += used;
  if (ec == http::error::need_more) ec = {};
  if (ec || request_->is_header_done()) {
    on_read_header(ec, head_bytes_);
    return;
  }
  // The rest of the head, within the header deadline counted from here.
  lowest().expires_after(worker_.under_pressure(worker_.limits().client_header_timeout));
  http::async_read_header(*client_, client_buffer_, *request_,
                          [self = this->shared_from_this()](error_code ec, std::size_t n) {
                            self->on_read_header(ec, self->head_bytes_ + n);
                          });
}

template <class S>
void Http1Connection<S>::on_read_header(error_code ec, std::size_t header_bytes) {
  worker_.not_waiting(this);
  first_request_ = false;
  if (ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::eof ||
        ec == asio::error::operation_aborted) {
      close_client();
      return;
    }
    if (ec == http::error::header_limit) {
      // A request line over its own limit is 414, not 431 (docs/proxy.md, "Strict HTTP/1.1").
      if (header_overflow_status(request_->get(), worker_.limits().request_rules) == 414) {
        exchange_.respond(414, "request target too long\n", true);
      } else {
        exchange_.respond(431, "request header fields too large\n", true);
      }
      return;
    }
    if (is_http_parse_error(ec)) {
      exchange_.respond(400, "bad request\n", true);
      return;
    }
    close_client();
    return;
  }
  state_ = State::kBusy;
  worker_.total_requests.fetch_add(1, std::memory_order_relaxed);
  exchange_.begin(header_bytes);
  handle_request();
}

template <class S>
void Http1Connection<S>::handle_request() {
  auto& req = request_->get();
  client_version_ = req.version();
  client_keep_alive_ = req.keep_alive();
  // The framing, Host, target and path rules (server/http1_policy.h): a refusal closes the
  // connection; an accepted request is edited so that routing, policies and the backend all see
  // the same normalized origin-form target and the same Host.
  RequestVerdict verdict = check_request(req, worker_.limits().request_rules);
  if (verdict.status != 0) {
    exchange_.respond(verdict.status, verdict.reason, true);
    return;
  }
  apply_request_verdict(verdict, req);
  upgrade_allowed_ = verdict.websocket_upgrade;
  other_upgrade_ = std::move(verdict.other_upgrade);
  exchange_.route();
}

// --- Downstream: the request body ----------------------------------------------------------

template <class S>
void Http1Connection<S>::send_continue() {
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  lowest().expires_after(worker_.limits().client_send_timeout);
  asio::async_write(*client_, asio::buffer(kContinue.data(), kContinue.size()),
                    [self = this->shared_from_this()](error_code ec, std::size_t) {
                      self->exchange_.on_continue_sent(ec);
                    });
}

template <class S>
void Http1Connection<S>::read_request_body(char* data, std::size_t size) {
  auto& body = request_->get().body();
  body.data = data;
  body.size = size;
  lowest().expires_after(worker_.limits().client_body_timeout);
  http::async_read_some(*client_, client_buffer_, *request_,
                        [self = this->shared_from_this(), size](error_code ec, std::size_t) {
                          self->on_read_request_body(ec, size);
                        });
}

template <class S>
void Http1Connection<S>::on_read_request_body(error_code ec, std::size_t size) {
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    // The client went away or sent a broken body: nothing useful can be answered upstream.
    TG_DEBUG("http", "request body read failed: " << ec.message());
    exchange_.drop_upstream();
    if (ec == http::error::body_limit) {
      exchange_.respond(413, "request body too large\n", true);
      return;
    }
    if (is_http_parse_error(ec) && ec != http::error::end_of_stream) {
      exchange_.respond(400, "bad request body\n", true);
    } else {
      close_client();
    }
    return;
  }
  auto& body = request_->get().body();
  size_t n = size - body.size;
  if (n == 0 && !request_->is_done()) {
    read_request_body(static_cast<char*>(body.data), size);  // nothing was read into it
    return;
  }
  exchange_.on_request_body(n);
}

// --- Downstream: the response --------------------------------------------------------------

template <class S>
void Http1Connection<S>::send_response_head(ResponseMessage& res, const ResponseBody& body) {
  res.version(client_version_);
  if (body.transformed) {
    // A filter rewrote the header (chunked, or close-delimited to HTTP/1.0 clients).
    if (client_version_ < 11) client_keep_alive_ = false;
  } else if (body.expected && !body.framed) {
    // A close-delimited upstream body: chunk it for HTTP/1.1 clients so the client connection
    // can stay open; HTTP/1.0 clients get it close-delimited too.
    if (client_version_ >= 11) {
      res.chunked(true);
    } else {
      client_keep_alive_ = false;
    }
  }
  if (client_version_ < 11 && body.chunked) {
    res.chunked(false);
    client_keep_alive_ = false;
  }
  if (!request_->is_done()) client_keep_alive_ = false;  // upstream answered before the body ended
  if (draining_) client_keep_alive_ = false;
  res.keep_alive(client_keep_alive_);
  client_out_.start(res, res.chunked());
  if (body.expected) return;  // the head leaves with the first body bytes
  // HEAD, 204 and 304 carry no body whatever their framing fields say: write the header only
  // (a chunked header would otherwise be followed by a last-chunk).
  lowest().expires_after(worker_.limits().client_send_timeout);
  asio::async_write(*client_, client_out_.head_only(),
                    [self = this->shared_from_this()](error_code ec, std::size_t n) {
                      self->client_out_.written();
                      self->exchange_.on_response_head_sent(ec, n);
                    });
}

template <class S>
void Http1Connection<S>::send_response_body(const char* data, std::size_t n, bool last) {
  lowest().expires_after(worker_.limits().client_send_timeout);
  asio::async_write(*client_, client_out_.next(data, n, last),
                    [self = this->shared_from_this()](error_code ec, std::size_t n) {
                      self->client_out_.written();
                      self->exchange_.on_response_body_sent(ec, n);
                    });
}

template <class S>
void Http1Connection<S>::send_response_file(int fd, uint64_t offset, std::size_t n, bool last) {
  if constexpr (kTls) {
    // can_send_file() is false on TLS: never called.
    (void)fd, (void)offset, (void)n, (void)last;
    close_client();
  } else {
    (void)last;  // Content-Length framing: the body ends with its last byte
    auto head = client_out_.next(nullptr, 0, false);
    if (asio::buffer_size(head) == 0) {
      send_file_loop(fd, offset, n, 0);
      return;
    }
    // The head first (it waits for the first body bytes), then the file.
    lowest().expires_after(worker_.limits().client_send_timeout);
    asio::async_write(
        *client_, head,
        [self = this->shared_from_this(), fd, offset, n](error_code ec, std::size_t written) {
          self->client_out_.written();
          if (ec) {
            self->exchange_.on_response_body_sent(ec, written);
            return;
          }
          self->send_file_loop(fd, offset, n, written);
        });
  }
}

template <class S>
void Http1Connection<S>::send_file_loop(int fd, uint64_t offset, std::size_t left,
                                        std::size_t sent) {
  auto& socket = lowest().socket();
  error_code ec;
  if (!socket.native_non_blocking()) socket.native_non_blocking(true, ec);
  while (!ec && left > 0) {
    auto at = static_cast<off_t>(offset);
    const ssize_t r = ::sendfile(socket.native_handle(), fd, &at, left);
    if (r > 0) {
      offset += static_cast<uint64_t>(r);
      left -= static_cast<std::size_t>(r);
      sent += static_cast<std::size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // The socket's buffer is full: wait until it drains, within the send timeout.
      if (!file_timer_) file_timer_.emplace(lowest().get_executor());
      file_timer_->expires_after(worker_.limits().client_send_timeout);
      const uint64_t wait = ++file_wait_;
      file_timer_->async_wait([self = this->shared_from_this(), wait](error_code timer_ec) {
        // Cancelled, or fired just as the socket became writable (its handler queued before
        // the cancel): only the wait it was armed for may be cut.
        if (timer_ec || wait != self->file_wait_) return;
        error_code ignored;
        self->lowest().socket().cancel(ignored);
      });
      socket.async_wait(asio::socket_base::wait_write, [self = this->shared_from_this(), fd, offset,
                                                        left, sent](error_code wec) {
        ++self->file_wait_;
        self->file_timer_->cancel();
        if (wec) {
          self->file_sent(
              wec == asio::error::operation_aborted ? error_code(asio::error::timed_out) : wec,
              sent);
          return;
        }
        self->send_file_loop(fd, offset, left, sent);
      });
      return;
    }
    // 0: the file ended early (it was truncated since it was opened); or an error.
    ec =
        r == 0 ? error_code(asio::error::eof) : error_code(errno, boost::system::system_category());
  }
  // Completions never run inside the caller: a large file would otherwise recurse.
  asio::post(lowest().get_executor(),
             [self = this->shared_from_this(), ec, sent] { self->file_sent(ec, sent); });
}

template <class S>
void Http1Connection<S>::file_sent(error_code ec, std::size_t sent) {
  exchange_.on_response_body_sent(ec, sent);
}

template <class S>
void Http1Connection<S>::send_upgrade(ResponseMessage& res) {
  client_out_.start(res, false);
  lowest().expires_after(worker_.limits().client_send_timeout);
  asio::async_write(*client_, client_out_.head_only(),
                    [self = this->shared_from_this()](error_code ec, std::size_t n) {
                      self->client_out_.written();
                      if (!self->exchange_.on_upgrade_sent(ec, n)) {
                        self->close_now();
                        return;
                      }
                      self->start_tunnel();
                    });
}

template <class S>
void Http1Connection<S>::send_local_response(LocalResponse& res, bool close) {
  if (close) client_keep_alive_ = false;
  res.keep_alive(client_keep_alive_ && !draining_);
  lowest().expires_after(worker_.limits().client_send_timeout);
  http::async_write(*client_, res, [self = this->shared_from_this()](error_code ec, std::size_t n) {
    self->exchange_.on_local_response_sent(n);
    self->on_local_response_written(ec, !self->client_keep_alive_);
  });
}

template <class S>
void Http1Connection<S>::exchange_finished() {
  if (!client_keep_alive_ || draining_) {
    close_client();
    return;
  }
  do_read_header();
}

template <class S>
void Http1Connection<S>::on_local_response_written(error_code ec, bool close) {
  if (!ec && close && request_ && !request_->is_done() && !draining_) {
    linger();  // the client may still be sending the body we refused
    return;
  }
  if (ec || close) {
    close_client();
    return;
  }
  do_read_header();
}

// Lingering close, as nginx's lingering_close: closing with unread bytes makes the kernel reset
// the connection, and across a network a reset can destroy the answer before the client reads
// it. So our side is shut (the FIN follows the answer) and what the client still sends is read
// and dropped, until it closes, for at most kLingerTime, and kLingerTimeout without a byte.
template <class S>
void Http1Connection<S>::linger() {
  exchange_.end_and_release();
  state_ = State::kLingering;
  error_code ec;
  lowest().socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  if (ec) {
    close_client();
    return;
  }
  linger_read(std::chrono::steady_clock::now() + Limits::kLingerTime);
}

template <class S>
void Http1Connection<S>::linger_read(std::chrono::steady_clock::time_point deadline) {
  const auto now = std::chrono::steady_clock::now();
  if (state_ != State::kLingering || now >= deadline) {
    close_client();
    return;
  }
  lowest().expires_after(
      std::min<std::chrono::steady_clock::duration>(Limits::kLingerTimeout, deadline - now));
  // Raw bytes, below TLS: they are dropped, never read.
  auto buffer = exchange_.relay_buffer();
  lowest().async_read_some(asio::buffer(buffer.data(), buffer.size()),
                           [self = this->shared_from_this(), deadline](error_code ec, std::size_t) {
                             if (ec) {
                               self->close_client();
                               return;
                             }
                             self->linger_read(deadline);
                           });
}

template <class S>
void Http1Connection<S>::close_client() {
  exchange_.end();  // an exchange cut short is still recorded
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  // close() alone: it sends the FIN after what is queued, as shutdown(SHUT_WR) would, and a
  // separate shutdown first cost ~2.5% of the CPU of a new TLS connection (docs/benchmarks.md).
  lowest().close();
}

// --- Tunnel --------------------------------------------------------------------------------
// After a 101 the connection is two byte pumps. It keeps no snapshot (configuration changes and
// the release of old snapshots never wait for it) and closes when either side closes, on an
// error, or after tunnel_idle_timeout without a byte in either direction.

template <class S>
void Http1Connection<S>::start_tunnel() {
  state_ = State::kTunnel;
  tunnel_idle_ = exchange_.enter_tunnel();
  worker_.open_tunnels.fetch_add(1, std::memory_order_relaxed);
  if (auto* m = worker_.metrics()) m->tunnel_opened();
  tunnel_buffer_ = std::make_unique<std::array<char, Limits::kRelayBufferBytes>>();
  auto& connection = exchange_.upstream_connection();
  lowest().expires_never();
  connection->lowest().expires_never();
  tunnel_active_ = std::chrono::steady_clock::now();
  tunnel_timer_.emplace(lowest().get_executor());
  arm_tunnel_timer();
  auto self = this->shared_from_this();
  // Bytes that arrived behind the request or the 101 header go first.
  if (client_buffer_.size() > 0) {
    connection->with_stream([&](auto& stream) {
      asio::async_write(stream, client_buffer_.data(), [self](error_code ec, std::size_t n) {
        if (ec) return self->end_tunnel();
        self->client_buffer_.consume(n);
        self->tunnel_client_to_upstream();
      });
    });
  } else {
    tunnel_client_to_upstream();
  }
  if (connection->buffer.size() > 0) {
    asio::async_write(*client_, connection->buffer.data(), [self](error_code ec, std::size_t n) {
      if (ec) return self->end_tunnel();
      self->exchange_.upstream_connection()->buffer.consume(n);
      self->tunnel_upstream_to_client();
    });
  } else {
    tunnel_upstream_to_client();
  }
}

template <class S>
void Http1Connection<S>::tunnel_client_to_upstream() {
  auto buffer = exchange_.relay_buffer();
  client_->async_read_some(asio::buffer(buffer.data(), buffer.size()),
                           [self = this->shared_from_this()](error_code ec, std::size_t n) {
                             auto& connection = self->exchange_.upstream_connection();
                             if (ec || !connection) return self->end_tunnel();
                             self->tunnel_active_ = std::chrono::steady_clock::now();
                             connection->with_stream([&](auto& stream) {
                               asio::async_write(
                                   stream, asio::buffer(self->exchange_.relay_buffer().data(), n),
                                   [self](error_code ec, std::size_t) {
                                     if (ec) return self->end_tunnel();
                                     self->tunnel_client_to_upstream();
                                   });
                             });
                           });
}

template <class S>
void Http1Connection<S>::tunnel_upstream_to_client() {
  auto& connection = exchange_.upstream_connection();
  if (!connection) return end_tunnel();
  connection->with_stream([&](auto& stream) {
    stream.async_read_some(asio::buffer(*tunnel_buffer_), [self = this->shared_from_this()](
                                                              error_code ec, std::size_t n) {
      if (ec) return self->end_tunnel();
      self->tunnel_active_ = std::chrono::steady_clock::now();
      asio::async_write(*self->client_, asio::buffer(self->tunnel_buffer_->data(), n),
                        [self](error_code ec, std::size_t) {
                          if (ec) return self->end_tunnel();
                          self->tunnel_upstream_to_client();
                        });
    });
  });
}

template <class S>
void Http1Connection<S>::arm_tunnel_timer() {
  const auto idle = tunnel_idle_;
  tunnel_timer_->expires_after(
      std::min<std::chrono::steady_clock::duration>(idle, std::chrono::seconds(1)));
  tunnel_timer_->async_wait([self = this->shared_from_this(), idle](error_code ec) {
    if (ec || self->state_ != State::kTunnel) return;
    if (std::chrono::steady_clock::now() - self->tunnel_active_ >= idle) {
      self->end_tunnel();
      return;
    }
    self->arm_tunnel_timer();
  });
}

template <class S>
void Http1Connection<S>::end_tunnel() {
  if (state_ != State::kTunnel) return;
  if (tunnel_timer_) tunnel_timer_->cancel();
  worker_.open_tunnels.fetch_sub(1, std::memory_order_relaxed);
  if (auto* m = worker_.metrics()) m->tunnel_closed();
  if (auto& connection = exchange_.upstream_connection()) {
    error_code ec;
    connection->lowest().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    connection->lowest().close();
  }
  close_client();
}

template class Http1Connection<runtime::Stream>;
template class Http1Connection<TlsStream>;

}  // namespace tidegate::dataplane::server
