#include "server/http2_connection.h"

#include <algorithm>
#include <cstring>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>

#include "log/log.h"
#include "server/http1_connection.h"
#include "server/http1_policy.h"

namespace tidegate::dataplane::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

nghttp2_nv make_nv(std::string_view name, std::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE};
}

bool all_digits(std::string_view s) {
  if (s.empty() || s.size() > 19) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

// --- Stream ------------------------------------------------------------------------------------

Http2Stream::Http2Stream(Http2Session& session, int32_t id)
    : session_(session),
      owner_(session.self()),
      id_(id),
      exchange_(session.worker(), *this),
      request_(std::piecewise_construct, std::make_tuple(),
               std::make_tuple(FieldsAllocator(exchange_.fields_arena()))) {
  request_.version(11);
}

Http2Stream::~Http2Stream() = default;

runtime::Executor Http2Stream::executor() { return session_.executor(); }
bool Http2Stream::is_tls() const { return session_.tls(); }
tls::PeerCertificate* Http2Stream::peer_certificate() { return session_.peer_certificate(); }
const std::string& Http2Stream::peer_address() const { return session_.peer_address(); }
const std::optional<ratelimit::IpAddress>& Http2Stream::peer_ip() const {
  return session_.peer_ip();
}
std::string_view Http2Stream::listener() const { return session_.listener(); }

void Http2Stream::on_header(std::string_view name, std::string_view value) {
  // What the header list costs as SETTINGS_MAX_HEADER_LIST_SIZE counts it (RFC 9113 6.5.2),
  // decoded: an HPACK bomb (small frames referencing a large table entry) is caught here.
  header_bytes_ += name.size() + value.size() + 32;
  if (too_large_ || bad_head_) return;
  if (header_bytes_ > session_.worker().limits().http2.max_header_list_size) {
    too_large_ = true;
    session_.count_oversized_header_list();
    return;
  }
  if (!name.empty() && name[0] == ':') {
    if (name == ":method") {
      request_.method_string(value);
    } else if (name == ":path") {
      request_.target(value);
    } else if (name == ":authority") {
      authority_.assign(value);
    } else if (name != ":scheme") {
      bad_head_ = true;  // :protocol (extended CONNECT is not offered) or unknown
    }
    return;
  }
  if (name == "host") {
    host_.assign(value);
    return;
  }
  if (name == "cookie") {
    // HTTP/2 may split cookies into several fields; HTTP/1.1 wants one (RFC 9113 8.2.3).
    if (!cookie_.empty()) cookie_ += "; ";
    cookie_.append(value);
    return;
  }
  if (name == "te") return;  // only "trailers" is allowed (nghttp2 checks); hop-by-hop anyway
  if (name == "content-length") {
    if (!all_digits(value)) {
      bad_head_ = true;
      return;
    }
    content_length_ = std::stoull(std::string(value));
  }
  ++header_fields_;
  request_.insert(name, value);
}

void Http2Stream::on_request_head(bool end_stream) {
  head_done_ = true;
  has_body_ = !end_stream;  // END_STREAM may also come later, before the posted handler runs
  if (end_stream) end_stream_ = true;
  asio::post(executor(), [self = shared_from_this()] {
    Http2Stream& s = *self;
    if (s.closed_) return;
    Worker& worker = s.session_.worker();
    worker.total_requests.fetch_add(1, std::memory_order_relaxed);
    if (auto* m = worker.metrics()) m->http2_stream();
    s.exchange_.begin(s.header_bytes_);
    if (s.too_large_) {
      s.exchange_.respond(431, "request header fields too large\n", true);
      return;
    }
    if (s.bad_head_) {
      s.exchange_.respond(400, "bad request\n", true);
      return;
    }
    auto& req = s.request_;
    if (!s.authority_.empty()) {
      // :authority is the target's authority; a Host that names another is ambiguous.
      if (!s.host_.empty() && !beast::iequals(s.host_, s.authority_)) {
        s.exchange_.respond(400, "bad request: Host differs from :authority\n", true);
        return;
      }
      req.set(http::field::host, s.authority_);
    } else if (!s.host_.empty()) {
      req.set(http::field::host, s.host_);
    }
    if (!s.cookie_.empty()) req.set(http::field::cookie, s.cookie_);
    // The request goes upstream as HTTP/1.1: a body without a length is chunked there.
    if (s.has_body_ && !s.content_length_) req.set(http::field::transfer_encoding, "chunked");
    RequestVerdict verdict = check_request(req, worker.limits().request_rules);
    if (verdict.status != 0) {
      s.exchange_.respond(verdict.status, verdict.reason, true);
      return;
    }
    apply_request_verdict(verdict, req);
    s.routed_ = true;
    s.exchange_.route();
    s.session_.flush();
  });
}

void Http2Stream::on_data(const uint8_t* data, std::size_t n) {
  body_received_ += n;
  if (finished_ || closed_) {
    // Answered already: what still arrives is dropped, and the window reopened at once.
    nghttp2_session_consume(session_.native(), id_, n);
    return;
  }
  if (in_used_ == in_.size()) {
    in_.clear();
    in_used_ = 0;
  }
  in_.append(reinterpret_cast<const char*>(data), n);
  if (read_to_ != nullptr) {
    asio::post(executor(), [self = shared_from_this()] { self->fulfil_read(); });
  }
}

void Http2Stream::on_end_stream() {
  end_stream_ = true;
  if (read_to_ != nullptr) {
    asio::post(executor(), [self = shared_from_this()] { self->fulfil_read(); });
  }
}

void Http2Stream::on_closed(uint32_t error_code) {
  if (closed_) return;
  closed_ = true;
  aborted_ = error_code != NGHTTP2_NO_ERROR || !response_done_;
  // Request body nobody will read still counts against the connection window.
  if (in_.size() > in_used_) {
    nghttp2_session_consume_connection(session_.native(), in_.size() - in_used_);
  }
  in_.clear();
  in_used_ = 0;
  if (aborted_ && !finished_) {
    asio::post(executor(), [self = shared_from_this()] {
      self->exchange_.drop_upstream();
      self->exchange_.end();
    });
  }
}

void Http2Stream::read_request_body(char* data, std::size_t size) {
  read_to_ = data;
  read_size_ = size;
  read_since_ = std::chrono::steady_clock::now();
  // Completes later, never inside the exchange's call.
  if (in_.size() > in_used_ || end_stream_ || body_received_ > body_limit_) {
    asio::post(executor(), [self = shared_from_this()] { self->fulfil_read(); });
  }
}

void Http2Stream::fulfil_read() {
  if (read_to_ == nullptr || closed_) return;
  if (body_received_ > body_limit_) {
    read_to_ = nullptr;
    exchange_.drop_upstream();
    exchange_.respond(413, "request body too large\n", true);
    return;
  }
  const std::size_t available = in_.size() - in_used_;
  if (available == 0 && !end_stream_) return;  // wait for DATA
  const std::size_t n = std::min(available, read_size_);
  std::memcpy(read_to_, in_.data() + in_used_, n);
  in_used_ += n;
  if (in_used_ == in_.size()) {
    in_.clear();
    in_used_ = 0;
  }
  read_to_ = nullptr;
  // The stream and connection windows reopen by what the exchange took.
  if (n > 0) nghttp2_session_consume(session_.native(), id_, n);
  exchange_.on_request_body(n);
  session_.flush();
}

void Http2Stream::send_continue() {
  if (closed_) return;
  status_ = "100";
  nv_.assign(1, make_nv(":status", status_));
  waiting_ = Waiting::kContinue;
  waiting_bytes_ = 0;
  if (nghttp2_submit_headers(session_.native(), NGHTTP2_FLAG_NONE, id_, nullptr, nv_.data(),
                             nv_.size(), nullptr) != 0) {
    written(asio::error::connection_aborted);
    return;
  }
  session_.flush();
}

template <class Header>
void Http2Stream::build_headers(const Header& head, bool keep_length) {
  status_ = std::to_string(head.result_int());
  // Names are lower-cased into one buffer first (it must not move while nv_ points into it).
  std::size_t bytes = 0;
  for (const auto& f : head) bytes += f.name_string().size();
  names_.clear();
  names_.reserve(bytes);
  for (const auto& f : head) {
    for (char c : f.name_string()) {
      names_.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c));
    }
  }
  nv_.clear();
  nv_.push_back(make_nv(":status", status_));
  std::size_t at = 0;
  for (const auto& f : head) {
    const std::size_t len = f.name_string().size();
    std::string_view name(names_.data() + at, len);
    at += len;
    if (is_connection_specific(name)) continue;
    if (!keep_length && name == "content-length") continue;
    nv_.push_back(make_nv(name, f.value()));
  }
}

void Http2Stream::submit(bool with_body) {
  nghttp2_data_provider provider{};
  provider.source.ptr = this;
  provider.read_callback = &Http2Stream::read_data;
  submitted_ = true;
  if (nghttp2_submit_response(session_.native(), id_, nv_.data(), nv_.size(),
                              with_body ? &provider : nullptr) != 0) {
    asio::post(executor(),
               [self = shared_from_this()] { self->written(asio::error::connection_aborted); });
    return;
  }
  session_.flush();
}

void Http2Stream::send_response_head(ResponseMessage& res, const ResponseBody& body) {
  if (closed_) return;
  // A filter's rewrite or a body without framing has no length the client can rely on.
  build_headers(res, !body.transformed);
  if (!body.expected) {
    waiting_ = Waiting::kHead;
    waiting_bytes_ = 0;
    submit(false);
    return;
  }
  submit(true);  // DATA waits (deferred) for the first send_response_body()
}

void Http2Stream::send_response_body(const char* data, std::size_t n, bool last) {
  if (closed_) {
    asio::post(executor(), [self = shared_from_this()] {
      self->exchange_.on_response_body_sent(asio::error::connection_aborted, 0);
    });
    return;
  }
  out_ = data;
  out_size_ = n;
  out_last_ = last;
  waiting_ = Waiting::kBody;
  waiting_bytes_ = n;
  if (n == 0 && !last) {
    asio::post(executor(), [self = shared_from_this()] { self->written({}); });
    return;
  }
  if (deferred_) {
    deferred_ = false;
    nghttp2_session_resume_data(session_.native(), id_);
  }
  session_.flush();
}

void Http2Stream::send_upgrade(ResponseMessage&) {
  close();  // never asked for: upgrade_requested() is false on HTTP/2
}

void Http2Stream::send_local_response(LocalResponse& res, bool) {
  // `close` is about the HTTP/1.1 connection; here only the stream ends, reset with NO_ERROR
  // when the request body is still coming (RFC 9113 section 8.1).
  if (closed_) return;
  if (submitted_) {
    reset(NGHTTP2_INTERNAL_ERROR);
    return;
  }
  local_ = &res;
  build_headers(res, true);
  const std::string& body = res.body();
  waiting_ = Waiting::kLocal;
  waiting_bytes_ = body.size();
  if (body.empty()) {
    submit(false);
    return;
  }
  out_ = body.data();
  out_size_ = body.size();
  out_last_ = true;
  submit(true);
}

ssize_t Http2Stream::read_data(nghttp2_session*, int32_t, uint8_t* buf, std::size_t length,
                               uint32_t* flags, nghttp2_data_source* source, void*) {
  return static_cast<Http2Stream*>(source->ptr)->read_data(buf, length, flags);
}

ssize_t Http2Stream::read_data(uint8_t* buf, std::size_t length, uint32_t* flags) {
  if ((waiting_ != Waiting::kBody && waiting_ != Waiting::kLocal) ||
      (out_size_ == 0 && !out_last_)) {
    deferred_ = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  const std::size_t n = std::min(length, out_size_);
  if (n != 0) std::memcpy(buf, out_, n);  // an empty body's end may come with no buffer at all
  out_ += n;
  out_size_ -= n;
  if (out_size_ == 0) {
    if (out_last_) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      if (trailers_ != nullptr && !trailers_->empty() && submit_trailers()) {
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;  // the trailers' HEADERS ends the stream
      }
      trailers_ = nullptr;
    }
    out_last_ = false;
    session_.complete_after_write(shared_from_this());
  }
  return static_cast<ssize_t>(n);
}

bool Http2Stream::submit_trailers() {
  trailer_nv_.clear();
  for (const auto& [name, value] : *trailers_) {
    if (is_connection_specific(name) || name.empty() || name[0] == ':') continue;
    nghttp2_nv nv = make_nv(name, value);
    nv.flags = NGHTTP2_NV_FLAG_NONE;  // copied: nothing here must outlive the call
    trailer_nv_.push_back(nv);
  }
  if (trailer_nv_.empty()) return false;
  // Called from inside the data source, as nghttp2 allows.
  return nghttp2_submit_trailer(session_.native(), id_, trailer_nv_.data(), trailer_nv_.size()) ==
         0;
}

void Http2Stream::written(error_code ec) {
  const Waiting w = waiting_;
  waiting_ = Waiting::kNothing;
  blocked_since_ = {};
  if (!ec && closed_ && aborted_) ec = asio::error::connection_aborted;
  switch (w) {
    case Waiting::kNothing:
      return;
    case Waiting::kContinue:
      exchange_.on_continue_sent(ec);
      break;
    case Waiting::kHead:
      exchange_.on_response_head_sent(ec, waiting_bytes_);
      break;
    case Waiting::kBody:
      exchange_.on_response_body_sent(ec, waiting_bytes_);
      break;
    case Waiting::kLocal:
      local_ = nullptr;
      exchange_.on_local_response_sent(waiting_bytes_);
      finished_ = true;
      if (!end_stream_ && !closed_) reset(NGHTTP2_NO_ERROR);
      break;
  }
  session_.flush();
}

void Http2Stream::exchange_finished() {
  finished_ = true;
  // The response is complete; a request body still coming is not wanted (RFC 9113 8.1).
  if (!end_stream_ && !closed_) reset(NGHTTP2_NO_ERROR);
}

void Http2Stream::close() {
  if (!closed_) reset(NGHTTP2_INTERNAL_ERROR);
}

void Http2Stream::reset(uint32_t code) {
  if (!end_stream_) session_.note_reset(id_);
  nghttp2_submit_rst_stream(session_.native(), NGHTTP2_FLAG_NONE, id_, code);
  session_.flush();
}

// --- Session -----------------------------------------------------------------------------------

Http2Session::Http2Session(Worker& worker, std::string peer_address,
                           std::optional<ratelimit::IpAddress> peer_ip, bool tls,
                           ListenerName listener)
    : worker_(worker),
      peer_address_(std::move(peer_address)),
      peer_ip_(std::move(peer_ip)),
      listener_(std::move(listener)),
      tls_(tls),
      ticker_(worker.io()) {
  worker_.add_session(this);
  if (auto* m = worker_.metrics()) m->http2_connection_opened();
}

Http2Session::~Http2Session() {
  if (session_ != nullptr) nghttp2_session_del(session_);
  worker_.active_connections.fetch_sub(1, std::memory_order_relaxed);
  if (auto* m = worker_.metrics()) {
    m->connection_closed();
    m->http2_connection_closed();
  }
  worker_.remove_session(this);
}

bool Http2Session::begin(std::string_view received) {
  const Http2Limits& limits = worker_.limits().http2;
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
  nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks, &Http2Session::on_begin_frame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks,
                                                          &Http2Session::on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &Http2Session::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &Http2Session::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks,
                                                            &Http2Session::on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, &Http2Session::on_frame_send);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &Http2Session::on_stream_close);
  nghttp2_option* options = nullptr;
  if (nghttp2_option_new(&options) != 0) {
    nghttp2_session_callbacks_del(callbacks);
    return false;
  }
  // The windows reopen as the exchanges read request bodies, not as frames arrive: a stream
  // buffers at most its window (Http2Limits::initial_stream_window).
  nghttp2_option_set_no_auto_window_update(options, 1);
  nghttp2_option_set_max_settings(options, Http2Limits::kMaxSettingsEntries);
  nghttp2_option_set_max_outbound_ack(options, Http2Limits::kMaxOutboundAcks);
  nghttp2_option_set_stream_reset_rate_limit(options, Http2Limits::kResetBurst,
                                             Http2Limits::kResetRate);
  nghttp2_option_set_max_continuations(options, Http2Limits::kMaxContinuations);
  const int rv = nghttp2_session_server_new2(&session_, callbacks, this, options);
  nghttp2_option_del(options);
  nghttp2_session_callbacks_del(callbacks);
  if (rv != 0) return false;
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, limits.initial_stream_window},
      {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, limits.max_frame_size},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits.max_header_list_size},
  };
  if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0) {
    return false;
  }
  if (limits.connection_window > 65'535 &&
      nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                            static_cast<int32_t>(limits.connection_window)) != 0) {
    return false;
  }
  const auto now = std::chrono::steady_clock::now();
  window_start_ = idle_since_ = now;
  worker_.waiting_for_request(this);
  if (!received.empty() && !on_received(received.data(), received.size())) return false;
  flush();
  return !closed_;
}

bool Http2Session::on_received(const char* data, std::size_t n) {
  if (closed_) return false;
  const ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(data), n);
  if (rv < 0) {
    TG_DEBUG("http2", "connection from " << peer_address_ << ": " << nghttp2_strerror(rv));
    if (rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC) {
      shut();
      return false;
    }
    // Other errors queued a GOAWAY; it goes out, then the connection closes.
    nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
  }
  flush();
  return !closed_;
}

void Http2Session::flush() {
  if (closed_ || writing_ || flushing_) return;
  flushing_ = true;
  out_.clear();
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) {
      flushing_ = false;
      shut();
      return;
    }
    if (n == 0) break;
    out_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    if (out_.size() >= 64 * 1024) break;
  }
  flushing_ = false;
  if (!out_.empty()) {
    batch_.swap(filling_);
    filling_.clear();
    writing_ = true;
    write_started_ = std::chrono::steady_clock::now();
    write_out(out_);
    return;
  }
  if (!filling_.empty()) {
    // Waits that needed no bytes on the wire (cannot happen with frames sent, but be exact).
    auto done = std::move(filling_);
    filling_.clear();
    for (auto& s : done) {
      asio::post(executor(), [s] { s->written({}); });
    }
  }
  if (calm_ ||
      (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) ||
      (draining_ && streams_.empty())) {
    shut();
  }
}

void Http2Session::complete_after_write(std::shared_ptr<Http2Stream> stream) {
  filling_.push_back(std::move(stream));
}

void Http2Session::on_written(error_code ec) {
  writing_ = false;
  auto done = std::move(batch_);
  batch_.clear();
  if (ec) {
    TG_DEBUG("http2", "write to " << peer_address_ << " failed: " << ec.message());
    shut();
  }
  // The completions may queue more; they all leave in the next write.
  flushing_ = true;
  for (auto& s : done) s->written(ec);
  flushing_ = false;
  flush();
}

void Http2Session::on_read_failed() { shut(); }

Http2Stream* Http2Session::find(int32_t id) {
  return static_cast<Http2Stream*>(nghttp2_session_get_stream_user_data(session_, id));
}

void Http2Session::note_reset(int32_t id) {
  if (reset_while_open_.size() >= 256) reset_while_open_.erase(reset_while_open_.begin());
  reset_while_open_.push_back(id);
}

int Http2Session::on_begin_frame(nghttp2_session* session, const nghttp2_frame_hd* hd, void* user) {
  auto& self = *static_cast<Http2Session*>(user);
  const int32_t id = hd->stream_id;
  if (hd->type != NGHTTP2_HEADERS || id <= 0 || (id & 1) == 0 || id >= self.max_stream_id_) {
    return 0;
  }
  if (nghttp2_session_find_stream(session, id) != nullptr) return 0;
  const auto& reset = self.reset_while_open_;
  if (std::find(reset.begin(), reset.end(), id) != reset.end()) return 0;
  TG_DEBUG("http2", "connection from " << self.peer_address_ << ": HEADERS on stream " << id
                                       << " below " << self.max_stream_id_);
  return NGHTTP2_ERR_CALLBACK_FAILURE;  // GOAWAY(PROTOCOL_ERROR), see on_received
}

int Http2Session::on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto& self = *static_cast<Http2Session*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  const int32_t id = frame->hd.stream_id;
  self.max_stream_id_ = std::max(self.max_stream_id_, id);
  auto stream = std::make_shared<Http2Stream>(self, id);
  nghttp2_session_set_stream_user_data(self.session_, id, stream.get());
  if (self.streams_.empty()) self.worker_.not_waiting(&self);
  self.streams_.emplace(id, std::move(stream));
  self.had_stream_ = true;
  return 0;
}

int Http2Session::on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                            std::size_t namelen, const uint8_t* value, std::size_t valuelen,
                            uint8_t, void* user) {
  auto& self = *static_cast<Http2Session*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  Http2Stream* s = self.find(frame->hd.stream_id);
  if (s == nullptr) return 0;
  if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    s->on_header(std::string_view(reinterpret_cast<const char*>(name), namelen),
                 std::string_view(reinterpret_cast<const char*>(value), valuelen));
  } else {
    // Request trailers: kept for an HTTP/2 upstream (an HTTP/1.1 one gets none), within the
    // same header list budget as the head.
    s->header_bytes_ += namelen + valuelen + 32;
    if (s->header_bytes_ <= self.worker_.limits().http2.max_header_list_size && namelen > 0 &&
        name[0] != ':') {
      s->request_trailers_.emplace_back(
          std::string(reinterpret_cast<const char*>(name), namelen),
          std::string(reinterpret_cast<const char*>(value), valuelen));
    }
  }
  return 0;
}

int Http2Session::on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto& self = *static_cast<Http2Session*>(user);
  const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  switch (frame->hd.type) {
    case NGHTTP2_HEADERS: {
      Http2Stream* s = self.find(frame->hd.stream_id);
      if (s == nullptr) return 0;
      if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        s->on_request_head(end_stream);
      } else if (end_stream) {
        s->on_end_stream();
      } else {
        self.count_control_frame();  // HEADERS that neither start nor end anything
      }
      return 0;
    }
    case NGHTTP2_DATA: {
      if (frame->hd.length == 0 && !end_stream) self.count_control_frame();
      if (!end_stream) return 0;
      if (Http2Stream* s = self.find(frame->hd.stream_id)) s->on_end_stream();
      return 0;
    }
    case NGHTTP2_SETTINGS:
    case NGHTTP2_PING:
      if ((frame->hd.flags & NGHTTP2_FLAG_ACK) == 0) self.count_control_frame();
      return 0;
    case NGHTTP2_WINDOW_UPDATE:
    case NGHTTP2_PRIORITY:
    case NGHTTP2_RST_STREAM:
      self.count_control_frame();
      return 0;
    default:
      return 0;
  }
}

int Http2Session::on_data_chunk(nghttp2_session* session, uint8_t, int32_t stream_id,
                                const uint8_t* data, std::size_t len, void* user) {
  auto& self = *static_cast<Http2Session*>(user);
  Http2Stream* s = self.find(stream_id);
  if (s == nullptr) {
    nghttp2_session_consume_connection(session, len);
    return 0;
  }
  s->on_data(data, len);
  return 0;
}

int Http2Session::on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto& self = *static_cast<Http2Session*>(user);
  if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR) {
    // Every connection error, whoever found it (a flood limit here or in nghttp2, a protocol
    // error), leaves with this frame.
    if (auto* m = self.worker_.metrics()) m->http2_refused();
    return 0;
  }
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  ++self.frames_sent_;
  Http2Stream* s = self.find(frame->hd.stream_id);
  if (s == nullptr) return 0;
  const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (end_stream) s->response_done_ = true;
  if (frame->hd.type == NGHTTP2_HEADERS) {
    // An interim 100, or a final head with nothing behind it.
    if (s->waiting_ == Http2Stream::Waiting::kContinue ||
        (end_stream && (s->waiting_ == Http2Stream::Waiting::kHead ||
                        s->waiting_ == Http2Stream::Waiting::kLocal))) {
      s->waiting_bytes_ += frame->hd.length + 9;
      self.complete_after_write(s->shared_from_this());
    }
  }
  return 0;
}

int Http2Session::on_stream_close(nghttp2_session*, int32_t stream_id, uint32_t error_code,
                                  void* user) {
  auto& self = *static_cast<Http2Session*>(user);
  auto it = self.streams_.find(stream_id);
  if (it == self.streams_.end()) return 0;
  auto stream = std::move(it->second);
  self.streams_.erase(it);
  nghttp2_session_set_stream_user_data(self.session_, stream_id, nullptr);
  stream->on_closed(error_code);
  self.idle_changed();
  return 0;
}

void Http2Session::idle_changed() {
  if (!streams_.empty() || closed_) return;
  idle_since_ = std::chrono::steady_clock::now();
  worker_.waiting_for_request(this);
}

void Http2Session::count_control_frame() {
  ++control_frames_;
  if (control_frames_ > Http2Limits::kControlFrameAllowance +
                            Http2Limits::kControlFramesPerFrameSent * frames_sent_) {
    calm_down("too many control frames");
  }
}

void Http2Session::count_oversized_header_list() {
  if (++oversized_header_lists_ > Http2Limits::kMaxOversizedHeaderLists) {
    calm_down("too many oversized header lists");
  }
}

void Http2Session::calm_down(const char* why) {
  if (calm_) return;
  calm_ = true;
  TG_INFO("http2", "connection from " << peer_address_ << " closed: " << why);
  nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
}

void Http2Session::arm_ticker() {
  ticker_.expires_after(std::chrono::seconds(1));
  ticker_.async_wait([self = self()](error_code ec) {
    if (ec || self->closed_) return;
    self->tick();
  });
}

void Http2Session::tick() {
  const auto now = std::chrono::steady_clock::now();
  const Limits& limits = worker_.limits();
  if (now - window_start_ >= Http2Limits::kFloodWindow) {
    window_start_ = now;
    control_frames_ = 0;
    frames_sent_ = 0;
  }
  if (writing_ && now - write_started_ > limits.client_send_timeout) {
    TG_DEBUG("http2", "connection from " << peer_address_ << ": send timeout");
    shut();
    return;
  }
  if (streams_.empty()) {
    const auto idle = worker_.under_pressure(had_stream_ ? limits.keepalive_timeout
                                                         : limits.client_header_timeout);
    if (now - idle_since_ > idle) {
      nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
      flush();
      if (closed_) return;
    }
  }
  // Per stream: a request body that stops arriving, a response the client's window holds shut.
  std::vector<std::shared_ptr<Http2Stream>> stalled;
  const int32_t connection_window = nghttp2_session_get_remote_window_size(session_);
  bool connection_stalled = false;
  for (auto& [id, s] : streams_) {
    // A streaming call (duplex) may be quiet on the client's side while the backend talks: its
    // idle limit is the exchange's upstream read deadline, which request bytes restart.
    if (s->read_to_ != nullptr && !s->exchange_.duplex() &&
        now - s->read_since_ > limits.client_body_timeout) {
      stalled.push_back(s);
      continue;
    }
    const bool queued = s->waiting_ == Http2Stream::Waiting::kBody && s->out_size_ > 0;
    const bool shut_window =
        connection_window <= 0 || nghttp2_session_get_stream_remote_window_size(session_, id) <= 0;
    if (queued && shut_window) {
      if (s->blocked_since_ == std::chrono::steady_clock::time_point{}) {
        s->blocked_since_ = now;
      } else if (now - s->blocked_since_ > limits.client_send_timeout) {
        if (connection_window <= 0) {
          connection_stalled = true;
        } else {
          stalled.push_back(s);
          ++stalled_streams_;
        }
      }
    } else {
      s->blocked_since_ = {};
    }
  }
  if (connection_stalled) {
    // The connection's window held shut for the send timeout: no stream can move, as an
    // HTTP/1.1 client that stops reading (whose connection closes after the send timeout).
    calm_down("connection window held shut");
  } else if (stalled_streams_ > Http2Limits::kMaxStalledStreams) {
    calm_down("too many stalled streams");
  } else {
    for (auto& s : stalled) {
      TG_DEBUG("http2", "stream " << s->id_ << " from " << peer_address_ << " stalled: reset");
      s->reset(NGHTTP2_CANCEL);
    }
  }
  flush();
  if (!closed_) arm_ticker();
}

void Http2Session::drain() {
  if (closed_ && !draining_) {
    // Lingering after its close: a drain ends that at once (as HTTP/1.1's).
    draining_ = true;
    close_socket();
    return;
  }
  if (closed_ || draining_) return;
  draining_ = true;
  // GOAWAY with the last stream we took: those finish, the client retries the rest elsewhere.
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  flush();
}

void Http2Session::close_now() { shut(); }

void Http2Session::shut() {
  if (closed_) return;
  closed_ = true;
  worker_.not_waiting(this);
  ticker_.cancel();
  close_socket();
  auto streams = std::move(streams_);
  streams_.clear();
  for (auto& [id, s] : streams) {
    if (session_ != nullptr) nghttp2_session_set_stream_user_data(session_, id, nullptr);
    s->on_closed(NGHTTP2_CANCEL);
  }
  auto waiting = std::move(filling_);
  filling_.clear();
  for (auto& s : waiting) {
    asio::post(executor(), [s] { s->written(asio::error::connection_aborted); });
  }
}

// --- Connection --------------------------------------------------------------------------------

template <class S>
Http2Connection<S>::Http2Connection(Worker& worker, std::unique_ptr<S> client,
                                    std::string peer_address,
                                    std::optional<ratelimit::IpAddress> peer_ip,
                                    ListenerName listener)
    : Http2Session(worker, std::move(peer_address), std::move(peer_ip), kTls, std::move(listener)),
      client_(std::move(client)) {}

template <class S>
Http2Connection<S>::~Http2Connection() = default;

template <class S>
void Http2Connection<S>::start(std::string_view received) {
  // Every deadline of an HTTP/2 connection is the ticker's: the stream's timer stays unarmed.
  lowest().expires_never();
  if (!begin(received)) {
    shut();
    return;
  }
  arm_ticker();
  do_read();
}

template <class S>
void Http2Connection<S>::do_read() {
  reading_ = true;
  client_->async_read_some(asio::buffer(read_buffer_),
                           [self = this->shared_from_this()](error_code ec, std::size_t n) {
                             self->reading_ = false;
                             if (self->lingering_) {  // closed meanwhile: the read was cancelled
                               self->linger_read();
                               return;
                             }
                             if (ec) {
                               self->on_read_failed();
                               return;
                             }
                             self->in_read_ = true;
                             const bool more = self->on_received(self->read_buffer_.data(), n);
                             self->in_read_ = false;
                             if (self->lingering_) {
                               self->linger_read();
                               return;
                             }
                             if (more) self->do_read();
                           });
}

template <class S>
void Http2Connection<S>::linger_read() {
  const auto now = std::chrono::steady_clock::now();
  if (now >= linger_deadline_) {
    lowest().close();
    return;
  }
  lowest().expires_after(std::min<std::chrono::steady_clock::duration>(Limits::kLingerTimeout,
                                                                       linger_deadline_ - now));
  // Raw bytes, below TLS: they are dropped, never read.
  lowest().async_read_some(asio::buffer(read_buffer_),
                           [self = this->shared_from_this()](error_code ec, std::size_t) {
                             if (ec) {
                               self->lowest().close();
                               return;
                             }
                             self->linger_read();
                           });
}

template <class S>
void Http2Connection<S>::write_out(const std::string& bytes) {
  asio::async_write(
      *client_, asio::buffer(bytes.data(), bytes.size()),
      [self = this->shared_from_this()](error_code ec, std::size_t) { self->on_written(ec); });
}

template <class S>
void Http2Connection<S>::close_socket() {
  if (lingering_) {
    if (this->draining()) lowest().close();  // the worker drains: the lingering ends now
    return;
  }
  error_code ec;
  lowest().socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  if (ec || (!reading_ && !in_read_) || this->draining()) {
    // The client's side is closed or failed (nothing left to read), the socket is gone, or the
    // worker drains (SIGTERM: as HTTP/1.1's, no lingering then).
    lowest().close();
    return;
  }
  lingering_ = true;
  linger_deadline_ = std::chrono::steady_clock::now() + Limits::kLingerTime;
  // A pending read (it has no deadline) is cancelled; its completion starts the lingering reads.
  if (reading_) lowest().socket().cancel(ec);
}

template class Http2Connection<runtime::Stream>;
template class Http2Connection<TlsStream>;

}  // namespace tidegate::dataplane::server
