#include "server/mirror.h"

#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "log/log.h"
#include "server/headers.h"
#include "server/limits.h"
#include "server/worker.h"

namespace tidegate::dataplane::server {

namespace http = boost::beast::http;

namespace {

// One mirrored request: owned by the handlers of its pending operation.
class MirrorCall : public std::enable_shared_from_this<MirrorCall> {
 public:
  using error_code = boost::system::error_code;

  MirrorCall(Worker& worker, std::shared_ptr<const runtime::Snapshot> snapshot,
             const runtime::UpstreamState& upstream, const MirrorTimeouts& timeouts)
      : worker_(worker),
        snapshot_(std::move(snapshot)),
        upstream_(upstream),
        timeouts_(timeouts),
        deadline_(worker.io()),
        request_(std::piecewise_construct, std::make_tuple(),
                 std::make_tuple(FieldsAllocator(&arena_))) {
    worker_.mirror_started();
  }
  ~MirrorCall() {
    end_attempt();
    worker_.mirror_ended();
  }
  MirrorCall(const MirrorCall&) = delete;
  MirrorCall& operator=(const MirrorCall&) = delete;

  // The copy: method, target and fields of the request as it goes upstream; framed by
  // Content-Length (the body is whole).
  void copy(const upstream::Attempt::Request& from, std::string_view body) {
    request_.method_string(from.method_string());
    request_.target(from.target());
    request_.version(11);
    for (const auto& field : static_cast<const Fields&>(from)) {
      switch (field.name()) {
        case http::field::content_length:
        case http::field::transfer_encoding:
        case http::field::expect:
          continue;
        default:
          request_.insert(field.name_string(), field.value());
      }
    }
    if (!body.empty() || from.has_content_length() || from.chunked()) {
      request_.set(http::field::content_length, std::to_string(body.size()));
    }
    head_request_ = request_.method() == http::verb::head;
    body_.assign(body);
  }

  // Picks an endpoint and connects (or takes a pooled connection). False: no endpoint.
  bool start() {
    // One deadline for the whole copy (connect, send, answer and its drain): a mirror backend
    // that trickles its answer cannot hold one of the worker's slots (or an old snapshot) for
    // longer. The timer holds no reference: the call's end cancels it.
    deadline_.expires_after(timeouts_.connect + timeouts_.read);
    deadline_.async_wait([weak = weak_from_this()](error_code ec) {
      if (ec) return;
      if (auto self = weak.lock()) {
        TG_DEBUG("http", "mirror " << self->upstream_.name << ": past its deadline, dropped");
        self->up_.drop();
      }
    });
    balancer_ = &upstream_.balancer->worker(worker_.id());
    balancer::PickContext ctx;
    ctx.tried = &tried_;
    endpoint_ = balancer_->pick(ctx);
    if (endpoint_ >= upstream_.endpoints.size()) return false;
    balancer_->on_start(endpoint_);
    attempt_open_ = true;
    const auto& ep = upstream_.endpoints[endpoint_];
    up_.use_http2(upstream_.http2);
    if (up_.take_pooled(worker_.pool(), worker_.http2_pool(), ep, upstream_.tls_key)) {
      send();
      return true;
    }
    up_.connect(worker_.http2_pool(), worker_.io().get_executor(), upstream_, ep, timeouts_.connect,
                [self = shared_from_this()](error_code ec) {
                  if (ec) return self->failed(ec, "connect");
                  self->up_.connected();
                  if (!self->up_.needs_handshake(self->upstream_)) return self->send();
                  self->up_.handshake(self->upstream_, self->timeouts_.connect,
                                      [self](error_code ec) {
                                        if (ec) return self->failed(ec, "TLS handshake");
                                        self->send();
                                      });
                });
    return true;
  }

 private:
  void send() {
    up_.start_request(request_, &arena_, worker_.limits().max_response_header_bytes, head_request_);
    up_.write(body_.data(), body_.size(), true, timeouts_.send,
              [self = shared_from_this()](error_code ec) {
                if (ec) return self->failed(ec, "send");
                self->up_.read_header(&self->arena_,
                                      self->worker_.limits().max_response_header_bytes,
                                      self->head_request_, self->timeouts_.read,
                                      [self](error_code ec) { self->on_header(ec); });
              });
  }

  void on_header(error_code ec) {
    if (ec) return failed(ec, "response header");
    if (auto* m = worker_.metrics()) m->mirror_answered();
    const unsigned status = up_.response().result_int();
    TG_DEBUG("http",
             "mirror " << upstream_.name << " " << up_.endpoint() << " answered " << status);
    end_attempt();
    if (status < 200) {
      // An interim answer (100, 103) or a switch of protocols (101, should a backend answer an
      // upgrade it was not asked for): the connection is mid-exchange, never pooled.
      up_.drop();
      deadline_.cancel();
      return;
    }
    drain();
  }

  // The answer's body is read and dropped, so that the connection can serve again.
  void drain() {
    if (up_.response_done() || up_.ended_with_head()) {
      up_.release(worker_.pool(), worker_.snapshot().get());
      deadline_.cancel();
      return;
    }
    if (drained_ > Limits::kMaxMirrorResponseBytes) {
      up_.drop();  // not worth reading: closed instead
      deadline_.cancel();
      return;
    }
    up_.read_body(scratch_.data(), scratch_.size(), timeouts_.read,
                  [self = shared_from_this()](error_code ec, std::size_t n) {
                    if (ec) {
                      self->up_.drop();
                      self->deadline_.cancel();
                      return;
                    }
                    self->drained_ += n;
                    self->drain();
                  });
  }

  void failed(error_code ec, const char* stage) {
    if (auto* m = worker_.metrics()) m->mirror_failed();
    TG_DEBUG("http", "mirror " << upstream_.name << " " << stage << " failed: " << ec.message());
    up_.drop();
    deadline_.cancel();
    end_attempt();
  }

  // A mirror's outcome is not the route's: the balancer learns nothing from it (no failure mark
  // that would steer real requests away from an endpoint, none cleared), only that it ended.
  void end_attempt() {
    if (!attempt_open_) return;
    attempt_open_ = false;
    balancer_->on_release(endpoint_);
  }

  Worker& worker_;
  std::shared_ptr<const runtime::Snapshot> snapshot_;  // keeps upstream_ and its balancer alive
  const runtime::UpstreamState& upstream_;
  MirrorTimeouts timeouts_;
  boost::asio::steady_timer deadline_;
  // The copy's fields and the answer's head allocate here (one mirrored request).
  std::pmr::monotonic_buffer_resource arena_;
  upstream::Attempt::Request request_;
  std::string body_;
  bool head_request_ = false;
  upstream::Attempt up_;
  balancer::Balancer* balancer_ = nullptr;
  balancer::Tried tried_;
  uint32_t endpoint_ = balancer::Balancer::kNone;
  bool attempt_open_ = false;
  uint64_t drained_ = 0;
  std::array<char, 4096> scratch_;
};

}  // namespace

bool send_mirror(Worker& worker, std::shared_ptr<const runtime::Snapshot> snapshot,
                 const runtime::UpstreamState& upstream, const upstream::Attempt::Request& request,
                 std::string_view body, const MirrorTimeouts& timeouts) {
  if (worker.mirrors_in_flight() >= Limits::kMaxMirrorsInFlight || upstream.endpoints.empty()) {
    if (auto* m = worker.metrics()) m->mirror_skipped();
    return false;
  }
  auto call = std::make_shared<MirrorCall>(worker, std::move(snapshot), upstream, timeouts);
  call->copy(request, body);
  // Started after the exchange's own attempt has taken its connection (a pooled one, or an
  // HTTP/2 stream slot), never before it.
  boost::asio::post(worker.io(), [call, &worker] {
    if (!call->start()) {
      if (auto* m = worker.metrics()) m->mirror_skipped();
    }
  });
  return true;
}

}  // namespace tidegate::dataplane::server
