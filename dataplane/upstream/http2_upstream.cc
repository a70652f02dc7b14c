#include "upstream/http2_upstream.h"

#include <algorithm>
#include <cstring>

#include <boost/asio/post.hpp>
#include <boost/beast/core/error.hpp>

namespace tidegate::dataplane::upstream {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

class Http2Category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "tidegate.http2"; }
  std::string message(int ev) const override {
    switch (static_cast<Http2Error>(ev)) {
      case Http2Error::kRefused:
        return "stream refused by the backend (not processed)";
      case Http2Error::kReset:
        return "stream reset by the backend";
      case Http2Error::kConnectionLost:
        return "HTTP/2 connection to the backend lost";
      case Http2Error::kHeaderTooLarge:
        return "response header too large";
      case Http2Error::kBadResponse:
        return "malformed HTTP/2 response";
    }
    return "HTTP/2 upstream error";
  }
};

nghttp2_nv make_nv(std::string_view name, std::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

const boost::system::error_category& http2_category() {
  static const Http2Category category;
  return category;
}

boost::system::error_code make_error(Http2Error e) {
  return {static_cast<int>(e), http2_category()};
}

Http2Upstream::Http2Upstream() = default;

Http2Upstream::~Http2Upstream() { release(); }

bool Http2Upstream::take_pooled(Http2Pool& pool, const Endpoint& ep, uint64_t tls_key) {
  reset_attempt();
  client_ = pool.ready(ep, tls_key);
  if (!client_) return false;
  client_->reserve();
  reserved_ = true;
  reused_ = true;
  endpoint_ = ep;
  return true;
}

void Http2Upstream::connect(Http2Pool& pool, const runtime::Executor& executor,
                            const runtime::UpstreamState& up, const Endpoint& ep,
                            std::chrono::milliseconds timeout,
                            std::function<void(error_code)> handler) {
  reset_attempt();
  bool fresh = false;
  client_ = pool.pick(executor, ep, up.tls_key, &fresh);
  endpoint_ = ep;
  reused_ = !fresh;
  reserved_ = true;  // when_ready() holds the slot
  if (fresh) client_->start(up, timeout);
  client_->when_ready(std::move(handler));
}

void Http2Upstream::start_request(const Request& req, std::pmr::memory_resource* arena,
                                  std::size_t header_limit, bool head_request) {
  header_limit_ = header_limit;
  head_request_ = head_request;
  response_.emplace(std::piecewise_construct, std::make_tuple(),
                    std::make_tuple(server::FieldsAllocator(arena)));
  // Lower-cased names go into one buffer first (it must not move while nv_ points into it);
  // nghttp2 copies names and values when the stream is submitted.
  std::size_t bytes = 0;
  for (const auto& f : req) bytes += f.name_string().size();
  names_.clear();
  names_.reserve(bytes);
  for (const auto& f : req) {
    for (char c : f.name_string()) {
      names_.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c));
    }
  }
  nv_.clear();
  nv_.push_back(make_nv(":method", req.method_string()));
  nv_.push_back(make_nv(":scheme", client_ && client_->tls() ? "https" : "http"));
  if (auto host = req[http::field::host]; !host.empty()) nv_.push_back(make_nv(":authority", host));
  nv_.push_back(make_nv(":path", req.target()));
  std::size_t at = 0;
  for (const auto& f : req) {
    const std::size_t len = f.name_string().size();
    std::string_view name(names_.data() + at, len);
    at += len;
    // Host became :authority; HTTP/1.1's connection fields have no place in HTTP/2.
    if (name == "host" || server::is_connection_specific(name)) continue;
    nv_.push_back(make_nv(name, f.value()));
  }
  // gRPC servers require it; for any other backend it says that trailers are welcome.
  nv_.push_back(make_nv("te", "trailers"));
}

void Http2Upstream::write(const char* data, std::size_t n, bool last,
                          std::chrono::milliseconds timeout,
                          std::function<void(error_code)> handler) {
  write_handler_ = std::move(handler);
  out_ = data;
  out_size_ = n;
  out_last_ = last;
  if (!submitted_) {
    submitted_ = true;
    reserved_ = false;  // submit() takes the slot
    const bool with_body = !(last && n == 0);
    if (!with_body) request_sent_ = true;
    arm(write_timer_, timeout);
    stream_id_ = client_->submit(this, nv_, with_body);
    if (stream_id_ < 0) {
      refused_ = true;  // never opened: nothing reached the backend
      closed_ = true;
      post_write(make_error(Http2Error::kRefused));
      return;
    }
    // The head alone (a duplex exchange opens the stream before any body byte arrives).
    if (!with_body || (n == 0 && !last)) post_write({});
    return;
  }
  if (closed_) {
    post_write(close_error());
    return;
  }
  if (n == 0 && !last) {
    post_write({});
    return;
  }
  arm(write_timer_, timeout);
  if (deferred_) {
    deferred_ = false;
    client_->resume(stream_id_);
  } else {
    client_->flush();
  }
}

ssize_t Http2Upstream::read_data(uint8_t* buf, std::size_t length, uint32_t* flags) {
  if (out_size_ == 0 && !out_last_) {
    deferred_ = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  const std::size_t n = std::min(length, out_size_);
  if (n > 0) std::memcpy(buf, out_, n);
  out_ += n;
  out_size_ -= n;
  if (out_size_ == 0) {
    if (out_last_) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      // The trailers' HEADERS ends the stream instead (submitted from here, as nghttp2 allows).
      if (request_trailers_ != nullptr && !request_trailers_->empty() &&
          client_->submit_trailers(stream_id_, *request_trailers_)) {
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      }
      request_trailers_ = nullptr;
      out_last_ = false;
      request_sent_ = true;
    }
    // nghttp2 has the bytes: the caller's buffer is free again.
    if (write_handler_) post_write({});
  }
  return static_cast<ssize_t>(n);
}

void Http2Upstream::read_header(std::chrono::milliseconds timeout,
                                std::function<void(error_code)> handler) {
  header_handler_ = std::move(handler);
  reading_ = Reading::kHeader;
  arm(read_timer_, timeout);
  notify();
}

void Http2Upstream::read_body(char* data, std::size_t size, std::chrono::milliseconds timeout,
                              std::function<void(error_code, std::size_t)> handler) {
  body_handler_ = std::move(handler);
  reading_ = Reading::kBody;
  read_to_ = data;
  read_size_ = size;
  arm(read_timer_, timeout);
  notify();
}

void Http2Upstream::notify() {
  if (notify_posted_ || reading_ == Reading::kNothing || !client_) return;
  notify_posted_ = true;
  asio::post(client_->executor(), [alive = std::weak_ptr<char>(alive_), this] {
    if (alive.expired()) return;
    notify_posted_ = false;
    try_read();
  });
}

void Http2Upstream::try_read() {
  if (reading_ == Reading::kHeader) {
    error_code ec;
    if (bad_) {
      ec = make_error(header_bytes_ > header_limit_ ? Http2Error::kHeaderTooLarge
                                                    : Http2Error::kBadResponse);
    } else if (!head_done_) {
      if (!closed_) return;  // wait for HEADERS
      ec = close_error();
    }
    reading_ = Reading::kNothing;
    if (read_timer_) read_timer_->cancel();
    auto h = std::move(header_handler_);
    header_handler_ = nullptr;
    h(ec);
    return;
  }
  if (reading_ != Reading::kBody) return;
  const std::size_t available = in_.size() - in_used_;
  error_code ec;
  std::size_t n = 0;
  if (available > 0) {
    n = std::min(available, read_size_);
    std::memcpy(read_to_, in_.data() + in_used_, n);
    in_used_ += n;
    if (in_used_ == in_.size()) {
      in_.clear();
      in_used_ = 0;
    }
    if (client_ && !closed_) client_->consume(stream_id_, n);
  } else if (!end_stream_) {
    if (!closed_) return;  // wait for DATA
    ec = close_error();
  }
  reading_ = Reading::kNothing;
  read_to_ = nullptr;
  if (read_timer_) read_timer_->cancel();
  auto h = std::move(body_handler_);
  body_handler_ = nullptr;
  h(ec, n);
}

void Http2Upstream::post_write(error_code ec) {
  if (!write_handler_) return;
  if (write_timer_) write_timer_->cancel();
  auto h = std::move(write_handler_);
  write_handler_ = nullptr;
  asio::post(client_->executor(), [h = std::move(h), ec]() mutable { h(ec); });
}

void Http2Upstream::arm(std::optional<asio::steady_timer>& timer,
                        std::chrono::milliseconds timeout) {
  if (!client_) return;
  if (!timer) timer.emplace(client_->executor());
  timer->expires_after(timeout);
  const bool write = &timer == &write_timer_;
  timer->async_wait([alive = std::weak_ptr<char>(alive_), this, write](error_code ec) {
    if (ec || alive.expired()) return;
    on_timeout(write);
  });
}

void Http2Upstream::touch_read(std::chrono::milliseconds timeout) {
  if (reading_ != Reading::kNothing) arm(read_timer_, timeout);
}

void Http2Upstream::on_timeout(bool write) {
  const error_code timeout = beast::error::timeout;
  if (write) {
    post_write(timeout);
    return;
  }
  if (reading_ == Reading::kHeader) {
    reading_ = Reading::kNothing;
    auto h = std::move(header_handler_);
    header_handler_ = nullptr;
    asio::post(client_->executor(), [h = std::move(h), timeout]() mutable { h(timeout); });
  } else if (reading_ == Reading::kBody) {
    reading_ = Reading::kNothing;
    read_to_ = nullptr;
    auto h = std::move(body_handler_);
    body_handler_ = nullptr;
    asio::post(client_->executor(), [h = std::move(h), timeout]() mutable { h(timeout, 0); });
  }
}

Http2Upstream::error_code Http2Upstream::close_error() const {
  if (refused_ || close_code_ == NGHTTP2_REFUSED_STREAM) return make_error(Http2Error::kRefused);
  if (lost_) return make_error(Http2Error::kConnectionLost);
  return make_error(Http2Error::kReset);
}

// --- Events from the connection (inside nghttp2's callbacks) ---------------------------------

void Http2Upstream::on_header(std::string_view name, std::string_view value) {
  header_bytes_ += name.size() + value.size() + 32;
  if (bad_) return;
  if (header_bytes_ > header_limit_) {
    bad_ = true;
    return;
  }
  if (head_done_) {
    trailers_.emplace_back(std::string(name), std::string(value));
    return;
  }
  if (!name.empty() && name[0] == ':') {
    if (name == ":status") {
      unsigned s = 0;
      for (char c : value) s = s * 10 + static_cast<unsigned>(c - '0');
      status_ = value.size() == 3 ? s : 0;
      if (status_ < 100 || status_ > 999) bad_ = true;
    }
    return;
  }
  if (status_ < 200) return;  // an interim head's fields: skipped with it
  response_->insert(name, value);
  if (name == "content-length") {
    uint64_t v = 0;
    bool ok = !value.empty() && value.size() <= 19;
    for (char c : value) {
      ok = ok && c >= '0' && c <= '9';
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (ok) content_length_ = v;
  }
}

void Http2Upstream::on_headers_end(bool end_stream) {
  if (!head_done_) {
    if (status_ >= 100 && status_ < 200) {
      // 1xx (103 Early Hints, 100): not forwarded; the final head follows.
      status_ = 0;
      header_bytes_ = 0;
      return;
    }
    head_done_ = true;
    response_->result(status_);
    response_->version(11);
    if (end_stream) ended_with_head_ = true;
  }
  if (end_stream) end_stream_ = true;
  notify();
}

void Http2Upstream::on_data(const uint8_t* data, std::size_t n) {
  if (in_used_ == in_.size()) {
    in_.clear();
    in_used_ = 0;
  }
  in_.append(reinterpret_cast<const char*>(data), n);
  notify();
}

void Http2Upstream::on_end_stream() {
  end_stream_ = true;
  notify();
}

void Http2Upstream::on_closed(uint32_t error_code) {
  closed_ = true;
  close_code_ = error_code;
  if (error_code != NGHTTP2_NO_ERROR || !end_stream_) {
    if (write_handler_) post_write(close_error());
  }
  notify();
}

void Http2Upstream::on_refused() { refused_ = true; }

void Http2Upstream::on_connection_lost() {
  closed_ = true;
  lost_ = true;
  if (write_handler_) post_write(close_error());
  notify();
}

// --- Ends --------------------------------------------------------------------------------------

void Http2Upstream::release() {
  if (client_) {
    if (stream_id_ > 0 && !closed_) client_->cancel(stream_id_);
    if (reserved_) client_->unreserve();
  }
  reserved_ = false;
  closed_ = true;
  client_.reset();
  if (write_timer_) write_timer_->cancel();
  if (read_timer_) read_timer_->cancel();
  // The handlers hold the exchange's client side: never keep them past the attempt.
  write_handler_ = nullptr;
  header_handler_ = nullptr;
  body_handler_ = nullptr;
  reading_ = Reading::kNothing;
}

void Http2Upstream::reset_attempt() {
  release();
  // A new token: completions and timers of the attempt that ended do nothing.
  alive_ = std::make_shared<char>();
  notify_posted_ = false;
  reused_ = false;
  stream_id_ = -1;
  out_ = nullptr;
  out_size_ = 0;
  out_last_ = false;
  deferred_ = false;
  submitted_ = false;
  request_sent_ = false;
  request_trailers_ = nullptr;
  content_length_.reset();
  header_bytes_ = 0;
  head_done_ = false;
  end_stream_ = false;
  ended_with_head_ = false;
  closed_ = false;
  refused_ = false;
  lost_ = false;
  bad_ = false;
  close_code_ = 0;
  status_ = 0;
  trailers_.clear();
  in_.clear();
  in_used_ = 0;
  read_to_ = nullptr;
  read_size_ = 0;
}

void Http2Upstream::reset() {
  reset_attempt();
  response_.reset();
  nv_.clear();
}

}  // namespace tidegate::dataplane::upstream
