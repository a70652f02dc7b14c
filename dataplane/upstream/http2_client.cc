#include "upstream/http2_client.h"

#include <algorithm>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "log/log.h"
#include "tls/upstream_context.h"
#include "upstream/http2_upstream.h"

namespace tidegate::dataplane::upstream {

namespace asio = boost::asio;
namespace beast = boost::beast;

namespace {
constexpr unsigned char kAlpnH2[] = {2, 'h', '2'};
}  // namespace

Http2Client::Http2Client(Http2Pool& pool, const runtime::Executor& executor,
                         const Endpoint& endpoint, uint64_t tls_key)
    : pool_(pool),
      executor_(executor),
      endpoint_(endpoint),
      tls_key_(tls_key),
      connection_(executor, endpoint, tls_key, 0),
      idle_since_(std::chrono::steady_clock::now()),
      ticker_(executor) {}

Http2Client::~Http2Client() {
  if (session_ != nullptr) nghttp2_session_del(session_);
}

std::size_t Http2Client::capacity() const {
  if (state_ != State::kReady && state_ != State::kConnecting) return 0;
  std::size_t limit = Http2ClientLimits::kMaxStreamsPerConnection;
  if (session_ != nullptr) {
    const uint32_t peer =
        nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    limit = std::min<std::size_t>(limit, peer);
  }
  return limit;
}

void Http2Client::start(const runtime::UpstreamState& up, std::chrono::milliseconds timeout) {
  auto& c = connection_;
  if (up.tls_context) {
    // The TLS stream is set up now, while `up` is at hand (a new snapshot may replace it before
    // the connect completes); the handshake follows the connect.
    tls_ = true;
    c.tls = std::make_unique<TlsStream>(std::move(c.stream), *up.tls_context);
    SSL* ssl = c.tls->native_handle();
    tls::set_upstream_identity(ssl, up.tls_server_name, up.tls_verify);
    SSL_set_alpn_protos(ssl, kAlpnH2, sizeof(kAlpnH2));
  }
  c.lowest().expires_after(timeout);
  c.lowest().async_connect(endpoint_, [self = shared_from_this(), timeout](error_code ec) {
    if (self->state_ == State::kClosed) return;
    if (ec) {
      self->fail(ec);
      return;
    }
    self->on_connected(timeout);
  });
}

void Http2Client::on_connected(std::chrono::milliseconds timeout) {
  auto& c = connection_;
  error_code opt_ec;
  c.lowest().socket().set_option(asio::ip::tcp::no_delay(true), opt_ec);
  if (!tls_) {
    c.lowest().expires_never();
    ready({});
    return;
  }
  c.lowest().expires_after(timeout);
  c.tls->async_handshake(
      asio::ssl::stream_base::client, [self = shared_from_this()](error_code ec) {
        if (self->state_ == State::kClosed) return;
        if (ec) {
          self->fail(ec);
          return;
        }
        const unsigned char* alpn = nullptr;
        unsigned len = 0;
        SSL_get0_alpn_selected(self->connection_.tls->native_handle(), &alpn, &len);
        if (len != 2 || alpn[0] != 'h' || alpn[1] != '2') {
          TG_WARN("http2", "upstream " << self->endpoint_ << " did not agree to h2 in ALPN");
          self->fail(make_error(Http2Error::kBadResponse));
          return;
        }
        self->connection_.lowest().expires_never();
        self->ready({});
      });
}

bool Http2Client::begin_session() {
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &Http2Client::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &Http2Client::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &Http2Client::on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &Http2Client::on_stream_close);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks,
                                                           &Http2Client::on_frame_not_send);
  nghttp2_option* options = nullptr;
  if (nghttp2_option_new(&options) != 0) {
    nghttp2_session_callbacks_del(callbacks);
    return false;
  }
  // Windows reopen as the exchanges take the bytes (consume()), not as they arrive.
  nghttp2_option_set_no_auto_window_update(options, 1);
  nghttp2_option_set_peer_max_concurrent_streams(options,
                                                 Http2ClientLimits::kMaxStreamsPerConnection);
  nghttp2_option_set_max_send_header_block_length(options, 256 * 1024);
  const int rv = nghttp2_session_client_new2(&session_, callbacks, this, options);
  nghttp2_option_del(options);
  nghttp2_session_callbacks_del(callbacks);
  if (rv != 0) return false;
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, Http2ClientLimits::kMaxStreamsPerConnection},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, Http2ClientLimits::kStreamWindow},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, Http2ClientLimits::kMaxHeaderListSize},
  };
  if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0) {
    return false;
  }
  return nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                               Http2ClientLimits::kConnectionWindow) == 0;
}

void Http2Client::ready(error_code ec) {
  if (!ec && !begin_session()) ec = make_error(Http2Error::kConnectionLost);
  if (ec) {
    fail(ec);
    return;
  }
  state_ = State::kReady;
  idle_since_ = std::chrono::steady_clock::now();
  auto waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& w : waiters) {
    asio::post(executor_, [w = std::move(w)]() mutable { w({}); });
  }
  do_read();
  arm_ticker();
  flush();
}

void Http2Client::when_ready(std::function<void(error_code)> f) {
  // The caller holds a slot until it submits its stream or lets go (unreserve()).
  ++reserved_;
  if (state_ == State::kConnecting) {
    waiters_.push_back(std::move(f));
    return;
  }
  if (state_ == State::kReady) {
    asio::post(executor_, [f = std::move(f)]() mutable { f({}); });
    return;
  }
  asio::post(executor_,
             [f = std::move(f)]() mutable { f(make_error(Http2Error::kConnectionLost)); });
}

int32_t Http2Client::submit(Http2Upstream* owner, const std::vector<nghttp2_nv>& nv,
                            bool with_body) {
  unreserve();
  if (state_ != State::kReady && state_ != State::kDraining) {
    return NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE;
  }
  nghttp2_data_provider provider{};
  provider.source.ptr = owner;
  provider.read_callback = &Http2Client::read_data;
  const int32_t id = nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(),
                                            with_body ? &provider : nullptr, owner);
  if (id > 0) streams_.emplace(id, owner);
  flush();
  return id;
}

bool Http2Client::submit_trailers(int32_t id, const server::TrailerFields& fields) {
  std::vector<nghttp2_nv> nv;
  for (const auto& [name, value] : fields) {
    if (name.empty() || name[0] == ':' || server::is_connection_specific(name)) continue;
    // Copied by nghttp2 (no NO_COPY flags).
    nv.push_back(nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                            reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())),
                            name.size(), value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  if (nv.empty()) return false;
  return nghttp2_submit_trailer(session_, id, nv.data(), nv.size()) == 0;
}

void Http2Client::resume(int32_t id) {
  if (session_ == nullptr || state_ == State::kClosed) return;
  nghttp2_session_resume_data(session_, id);
  flush();
}

void Http2Client::consume(int32_t id, std::size_t n) {
  if (session_ == nullptr || state_ == State::kClosed || n == 0) return;
  nghttp2_session_consume(session_, id, n);
  flush();
}

void Http2Client::cancel(int32_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  streams_.erase(it);
  if (session_ != nullptr && state_ != State::kClosed) {
    nghttp2_session_set_stream_user_data(session_, id, nullptr);
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    flush();
  }
  maybe_idle();
}

Http2Upstream* Http2Client::owner(int32_t id) {
  return static_cast<Http2Upstream*>(nghttp2_session_get_stream_user_data(session_, id));
}

void Http2Client::flush() {
  if (state_ == State::kClosed || session_ == nullptr || writing_ || flushing_) return;
  flushing_ = true;
  out_.clear();
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) {
      flushing_ = false;
      fail(make_error(Http2Error::kConnectionLost));
      return;
    }
    if (n == 0) break;
    out_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    if (out_.size() >= 64 * 1024) break;
  }
  flushing_ = false;
  if (!out_.empty()) {
    writing_ = true;
    auto self = shared_from_this();
    connection_.with_stream([&](auto& stream) {
      asio::async_write(stream, asio::buffer(out_),
                        [self](error_code ec, std::size_t) { self->on_written(ec); });
    });
    return;
  }
  if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) {
    close();
    return;
  }
  if (state_ == State::kDraining && streams_.empty() && reserved_ == 0) close();
}

void Http2Client::on_written(error_code ec) {
  writing_ = false;
  if (state_ == State::kClosed) return;
  if (ec) {
    fail(ec);
    return;
  }
  flush();
}

void Http2Client::do_read() {
  connection_.with_stream([&](auto& stream) {
    stream.async_read_some(
        asio::buffer(read_buffer_), [self = shared_from_this()](error_code ec, std::size_t n) {
          if (self->state_ == State::kClosed) return;
          if (ec) {
            self->fail(ec);
            return;
          }
          const ssize_t rv = nghttp2_session_mem_recv(
              self->session_, reinterpret_cast<const uint8_t*>(self->read_buffer_.data()), n);
          if (rv < 0) {
            TG_WARN("http2", "upstream " << self->endpoint_ << ": " << nghttp2_strerror(rv));
            self->fail(make_error(Http2Error::kBadResponse));
            return;
          }
          self->flush();
          if (self->state_ == State::kClosed) return;
          self->do_read();
        });
  });
}

void Http2Client::fail(error_code ec) {
  if (state_ == State::kClosed) return;
  if (state_ == State::kConnecting) {
    TG_DEBUG("http2", "upstream " << endpoint_ << ": connect failed: " << ec.message());
  } else {
    TG_DEBUG("http2", "upstream " << endpoint_ << ": connection lost: " << ec.message());
  }
  auto waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& w : waiters) {
    asio::post(executor_, [w = std::move(w), ec]() mutable { w(ec); });
  }
  close();
}

void Http2Client::close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  auto self = shared_from_this();  // the pool lets go of it below
  ticker_.cancel();
  error_code ignored;
  connection_.lowest().socket().close(ignored);
  auto streams = std::move(streams_);
  streams_.clear();
  for (auto& [id, owner] : streams) {
    if (session_ != nullptr) nghttp2_session_set_stream_user_data(session_, id, nullptr);
    owner->on_connection_lost();
  }
  auto waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& w : waiters) {
    asio::post(executor_,
               [w = std::move(w)]() mutable { w(make_error(Http2Error::kConnectionLost)); });
  }
  pool_.remove(this);
}

void Http2Client::retire() {
  if (state_ == State::kClosed) return;
  if (state_ == State::kConnecting) {
    // Nobody new joins; the waiters still get their streams.
    state_ = State::kDraining;
    return;
  }
  state_ = State::kDraining;
  if (streams_.empty() && reserved_ == 0) {
    nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
    flush();
    if (state_ != State::kClosed) close();
  }
}

void Http2Client::maybe_idle() {
  if (!streams_.empty()) return;
  idle_since_ = std::chrono::steady_clock::now();
  if (state_ == State::kDraining && reserved_ == 0) {
    asio::post(executor_, [self = shared_from_this()] {
      if (self->streams_.empty() && self->reserved_ == 0) self->close();
    });
  }
}

void Http2Client::arm_ticker() {
  ticker_.expires_after(std::chrono::seconds(5));
  ticker_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->state_ == State::kClosed) return;
    if (self->streams_.empty() && self->reserved_ == 0 &&
        std::chrono::steady_clock::now() - self->idle_since_ > Http2ClientLimits::kIdleTimeout) {
      nghttp2_session_terminate_session(self->session_, NGHTTP2_NO_ERROR);
      self->flush();
      self->close();
      return;
    }
    self->arm_ticker();
  });
}

// --- nghttp2 callbacks -------------------------------------------------------------------------

int Http2Client::on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                           std::size_t namelen, const uint8_t* value, std::size_t valuelen, uint8_t,
                           void* user) {
  auto& self = *static_cast<Http2Client*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  if (Http2Upstream* o = self.owner(frame->hd.stream_id)) {
    o->on_header(std::string_view(reinterpret_cast<const char*>(name), namelen),
                 std::string_view(reinterpret_cast<const char*>(value), valuelen));
  }
  return 0;
}

int Http2Client::on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto& self = *static_cast<Http2Client*>(user);
  const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
      if (Http2Upstream* o = self.owner(frame->hd.stream_id)) o->on_headers_end(end_stream);
      return 0;
    case NGHTTP2_DATA:
      if (!end_stream) return 0;
      if (Http2Upstream* o = self.owner(frame->hd.stream_id)) o->on_end_stream();
      return 0;
    case NGHTTP2_GOAWAY:
      // No new streams here; nghttp2 closes the ones above last_stream_id (REFUSED_STREAM).
      TG_DEBUG("http2", "upstream " << self.endpoint_ << " sent GOAWAY (last stream "
                                    << frame->goaway.last_stream_id << ", code "
                                    << frame->goaway.error_code << ")");
      if (self.state_ == State::kReady) self.state_ = State::kDraining;
      return 0;
    default:
      return 0;
  }
}

int Http2Client::on_data_chunk(nghttp2_session* session, uint8_t, int32_t stream_id,
                               const uint8_t* data, std::size_t len, void* user) {
  auto& self = *static_cast<Http2Client*>(user);
  if (Http2Upstream* o = self.owner(stream_id)) {
    o->on_data(data, len);
  } else {
    // A stream we let go of: its bytes still count against the connection window.
    nghttp2_session_consume_connection(session, len);
  }
  return 0;
}

int Http2Client::on_stream_close(nghttp2_session*, int32_t stream_id, uint32_t error_code,
                                 void* user) {
  auto& self = *static_cast<Http2Client*>(user);
  auto it = self.streams_.find(stream_id);
  if (it == self.streams_.end()) return 0;
  Http2Upstream* o = it->second;
  self.streams_.erase(it);
  nghttp2_session_set_stream_user_data(self.session_, stream_id, nullptr);
  o->on_closed(error_code);
  self.maybe_idle();
  return 0;
}

int Http2Client::on_frame_not_send(nghttp2_session*, const nghttp2_frame* frame, int, void* user) {
  auto& self = *static_cast<Http2Client*>(user);
  // A request HEADERS that never left (GOAWAY came first, or the stream ids ran out): the
  // backend never saw the request.
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  if (Http2Upstream* o = self.owner(frame->hd.stream_id)) o->on_refused();
  return 0;
}

ssize_t Http2Client::read_data(nghttp2_session*, int32_t, uint8_t* buf, std::size_t length,
                               uint32_t* flags, nghttp2_data_source* source, void*) {
  return static_cast<Http2Upstream*>(source->ptr)->read_data(buf, length, flags);
}

// --- Pool --------------------------------------------------------------------------------------

Http2Pool::~Http2Pool() {
  closing_ = true;
  for (auto& [key, list] : clients_) {
    for (auto& c : list) c->close();
  }
}

std::shared_ptr<Http2Client> Http2Pool::ready(const Endpoint& ep, uint64_t tls_key) {
  auto it = clients_.find(PoolKey{ep, tls_key});
  if (it == clients_.end()) return nullptr;
  std::shared_ptr<Http2Client> best;
  for (auto& c : it->second) {
    if (c->state() != Http2Client::State::kReady || !c->has_room()) continue;
    if (!best || c->load() < best->load()) best = c;
  }
  return best;
}

std::shared_ptr<Http2Client> Http2Pool::pick(const runtime::Executor& executor, const Endpoint& ep,
                                             uint64_t tls_key, bool* fresh) {
  *fresh = false;
  auto& list = clients_[PoolKey{ep, tls_key}];
  std::shared_ptr<Http2Client> roomy, least;
  std::size_t usable = 0;
  for (auto& c : list) {
    const auto s = c->state();
    if (s != Http2Client::State::kReady && s != Http2Client::State::kConnecting) continue;
    ++usable;
    if (c->has_room() && (!roomy || c->load() < roomy->load())) roomy = c;
    if (!least || c->load() < least->load()) least = c;
  }
  if (roomy) return roomy;
  if (usable < Http2ClientLimits::kMaxConnectionsPerEndpoint) {
    *fresh = true;
    auto c = std::make_shared<Http2Client>(*this, executor, ep, tls_key);
    list.push_back(c);
    return c;
  }
  return least;
}

void Http2Pool::remove(Http2Client* client) {
  if (closing_) return;
  auto it = clients_.find(PoolKey{client->endpoint(), client->tls_key()});
  if (it == clients_.end()) return;
  auto& list = it->second;
  list.erase(std::remove_if(list.begin(), list.end(),
                            [client](const auto& c) { return c.get() == client; }),
             list.end());
  if (list.empty()) clients_.erase(it);
}

void Http2Pool::retain_only(const runtime::EndpointSet& keep) {
  std::vector<std::shared_ptr<Http2Client>> leaving;
  for (auto& [key, list] : clients_) {
    if (keep.contains(key.endpoint)) continue;
    leaving.insert(leaving.end(), list.begin(), list.end());
  }
  // retire() may close, which edits clients_.
  for (auto& c : leaving) c->retire();
}

}  // namespace tidegate::dataplane::upstream
