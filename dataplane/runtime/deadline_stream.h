#pragma once
// runtime::DeadlineStream: a TCP socket whose reads, writes and connects time out, with the part
// of beast::basic_stream's interface the data plane uses (expires_after/at/never, socket(),
// async_read_some/write_some/connect, cancel, close; a timed-out operation completes with
// beast::error::timeout and the socket is closed, as Beast does).
//
// Why not beast::basic_stream: it arms a timer when each operation starts and cancels it when
// the operation ends, so a proxied request paid four timer insertions and four cancellations in
// the reactor's timer queue (each under its mutex, each reading the clock), plus an operation
// layer with executor work tracking: about a tenth of the data plane's user-space instructions
// per request (docs/benchmarks.md, "Proxy").
//
// Here the timer is lazy. An operation records its direction's deadline and leaves a timer that
// is already due at or before it alone; when the timer fires it closes the socket only if an
// operation is still pending past its deadline, and otherwise waits again until the earliest
// pending deadline. Deadlines move later with each request, so a busy keep-alive connection's
// timer fires about once per timeout period instead of being armed and cancelled four times
// per request. Deadlines are per direction, set by expires_after for the directions with no
// operation pending (Beast's rule), and kept until set again.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>

namespace tidegate::dataplane::runtime {

namespace deadline_detail {

using clock = std::chrono::steady_clock;
using error_code = boost::system::error_code;
constexpr int kRead = 0, kWrite = 1;
constexpr unsigned kReadMask = 1, kWriteMask = 2;

// The socket, its timer and the deadlines, shared by the stream and its operations in progress.
template <class Executor>
struct State : std::enable_shared_from_this<State<Executor>> {
  using socket_type = boost::asio::basic_stream_socket<boost::asio::ip::tcp, Executor>;
  using Timer = boost::asio::basic_waitable_timer<clock, boost::asio::wait_traits<clock>, Executor>;

  explicit State(socket_type&& s) : socket(std::move(s)), timer(socket.get_executor()) {}
  explicit State(const Executor& ex) : socket(ex), timer(ex) {}

  socket_type socket;
  Timer timer;
  std::array<clock::time_point, 2> deadline{clock::time_point::max(), clock::time_point::max()};
  // Operations pending per direction: a count, since asio's SSL stream may start a zero-byte
  // read beside a pending one (an operation that needs no I/O completes through one).
  std::array<unsigned, 2> pending{};
  std::array<bool, 2> timed_out{};  // the direction's pending operations end with a timeout
  clock::time_point armed = clock::time_point::max();  // when the timer fires; max: idle
  uint64_t wait = 0;  // the timer's current wait; an older one's completion is ignored

  void close() {
    error_code ignored;
    socket.close(ignored);
    if (armed != clock::time_point::max()) {
      ++wait;
      armed = clock::time_point::max();
      timer.cancel();
    }
  }

  void start(unsigned mask) {
    for (int d : {kRead, kWrite}) {
      if ((mask & (1u << d)) == 0) continue;
      if (pending[d]++ == 0) timed_out[d] = false;
      arm(deadline[d]);
    }
  }

  // The timer fires by `t` (it is left alone when it fires earlier already).
  void arm(clock::time_point t) {
    if (t >= armed) return;  // max (no deadline) included
    armed = t;
    timer.expires_at(t);  // a wait in progress completes, ignored by its number
    timer.async_wait([self = this->shared_from_this(), w = ++wait](const error_code& ec) {
      self->fired(ec, w);
    });
  }

  void fired(const error_code& ec, uint64_t w) {
    if (w != wait) return;  // replaced by a nearer deadline, or the stream closed
    armed = clock::time_point::max();
    if (ec) return;
    const auto now = clock::now();
    bool expired = false;
    for (int d : {kRead, kWrite}) {
      if (pending[d] > 0 && deadline[d] <= now) timed_out[d] = expired = true;
    }
    if (expired) {
      // As Beast does: the socket closes, so every operation on it ends (the timed-out ones
      // with beast::error::timeout).
      error_code ignored;
      socket.close(ignored);
      return;
    }
    for (int d : {kRead, kWrite}) {
      if (pending[d] > 0) arm(deadline[d]);
    }
  }

  // An operation of `mask` completed: true when one of its directions timed out.
  bool finish(unsigned mask) {
    bool timeout = false;
    for (int d : {kRead, kWrite}) {
      if ((mask & (1u << d)) == 0) continue;
      timeout = timeout || timed_out[d];
      if (--pending[d] == 0) timed_out[d] = false;
    }
    return timeout;
  }
};

// The completion of one operation: marks its directions done, turns a timeout's abort into
// beast::error::timeout, and calls the caller's handler (whose executor and allocator it
// presents as its own).
template <class StateT, class Handler>
class Op {
 public:
  Op(std::shared_ptr<StateT> state, unsigned mask, Handler&& handler)
      : state_(std::move(state)), mask_(mask), handler_(std::move(handler)) {}

  void operator()(error_code ec, std::size_t n) {
    if (state_->finish(mask_)) ec = boost::beast::error::timeout;
    std::move(handler_)(ec, n);
  }
  void operator()(error_code ec) {
    if (state_->finish(mask_)) ec = boost::beast::error::timeout;
    std::move(handler_)(ec);
  }

  const Handler& handler() const noexcept { return handler_; }

  friend bool asio_handler_is_continuation(Op* op) {
    return boost_asio_handler_cont_helpers::is_continuation(op->handler_);
  }

 private:
  std::shared_ptr<StateT> state_;
  unsigned mask_;
  Handler handler_;
};

}  // namespace deadline_detail

template <class Executor>
class DeadlineStream {
  using State = deadline_detail::State<Executor>;
  template <class Handler>
  using Op = deadline_detail::Op<State, std::decay_t<Handler>>;
  static constexpr unsigned kReadMask = deadline_detail::kReadMask;
  static constexpr unsigned kWriteMask = deadline_detail::kWriteMask;

 public:
  using executor_type = Executor;
  using socket_type = typename State::socket_type;
  using lowest_layer_type = socket_type;  // what asio::ssl::stream asks of its next layer
  using endpoint_type = boost::asio::ip::tcp::endpoint;
  using clock = deadline_detail::clock;
  using error_code = boost::system::error_code;

  explicit DeadlineStream(socket_type&& socket)
      : impl_(std::make_shared<State>(std::move(socket))) {}
  explicit DeadlineStream(const Executor& ex) : impl_(std::make_shared<State>(ex)) {}
  // A moved-from stream keeps the executor with a closed socket of its own (as Beast's does);
  // operations in progress go on with the state they hold, now the new owner's.
  DeadlineStream(DeadlineStream&& other)
      : impl_(std::exchange(other.impl_, std::make_shared<State>(other.get_executor()))) {}
  DeadlineStream& operator=(DeadlineStream&& other) {
    if (this != &other) {
      impl_->close();
      impl_ = std::exchange(other.impl_, std::make_shared<State>(other.get_executor()));
    }
    return *this;
  }
  DeadlineStream(const DeadlineStream&) = delete;
  DeadlineStream& operator=(const DeadlineStream&) = delete;
  // Closes the socket; operations in progress complete with operation_aborted (they hold the
  // state they touch).
  ~DeadlineStream() { impl_->close(); }

  executor_type get_executor() noexcept { return impl_->socket.get_executor(); }
  socket_type& socket() noexcept { return impl_->socket; }
  const socket_type& socket() const noexcept { return impl_->socket; }
  lowest_layer_type& lowest_layer() noexcept { return impl_->socket; }
  const lowest_layer_type& lowest_layer() const noexcept { return impl_->socket; }

  // The deadline of the next read and the next write (of a direction with no operation
  // pending; a pending one keeps its own).
  void expires_after(clock::duration d) { expires_at(clock::now() + d); }
  void expires_at(clock::time_point t) {
    for (int d : {deadline_detail::kRead, deadline_detail::kWrite}) {
      if (impl_->pending[d] == 0) impl_->deadline[d] = t;
    }
  }
  void expires_never() { expires_at(clock::time_point::max()); }

  // Cancels the socket's operations (they complete with operation_aborted).
  void cancel() {
    error_code ignored;
    impl_->socket.cancel(ignored);
  }
  void close() { impl_->close(); }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(error_code, std::size_t)>(
        [state = impl_.get()](auto&& handler, const MutableBuffers& b) {
          state->start(kReadMask);
          state->socket.async_read_some(
              b, Op<decltype(handler)>(state->shared_from_this(), kReadMask,
                                       std::forward<decltype(handler)>(handler)));
        },
        token, buffers);
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(error_code, std::size_t)>(
        [state = impl_.get()](auto&& handler, const ConstBuffers& b) {
          state->start(kWriteMask);
          state->socket.async_write_some(
              b, Op<decltype(handler)>(state->shared_from_this(), kWriteMask,
                                       std::forward<decltype(handler)>(handler)));
        },
        token, buffers);
  }

  // Opens the socket when it is closed (as a socket's async_connect does); times out at the
  // earlier of the two directions' deadlines.
  template <class Token>
  auto async_connect(const endpoint_type& endpoint, Token&& token) {
    return boost::asio::async_initiate<Token, void(error_code)>(
        [state = impl_.get()](auto&& handler, const endpoint_type& ep) {
          state->start(kReadMask | kWriteMask);
          state->socket.async_connect(
              ep, Op<decltype(handler)>(state->shared_from_this(), kReadMask | kWriteMask,
                                        std::forward<decltype(handler)>(handler)));
        },
        token, endpoint);
  }

 private:
  std::shared_ptr<State> impl_;
};

}  // namespace tidegate::dataplane::runtime

namespace boost::asio {

template <class StateT, class Handler, class E>
struct associated_executor<tidegate::dataplane::runtime::deadline_detail::Op<StateT, Handler>, E> {
  using type = associated_executor_t<Handler, E>;
  static type get(const tidegate::dataplane::runtime::deadline_detail::Op<StateT, Handler>& op,
                  const E& e = E()) noexcept {
    return associated_executor<Handler, E>::get(op.handler(), e);
  }
};

template <class StateT, class Handler, class A>
struct associated_allocator<tidegate::dataplane::runtime::deadline_detail::Op<StateT, Handler>, A> {
  using type = associated_allocator_t<Handler, A>;
  static type get(const tidegate::dataplane::runtime::deadline_detail::Op<StateT, Handler>& op,
                  const A& a = A()) noexcept {
    return associated_allocator<Handler, A>::get(op.handler(), a);
  }
};

}  // namespace boost::asio
