#pragma once
// The server side of a client's TLS connection: an OpenSSL SSL object over the worker's TCP
// stream, with a thin BIO of our own instead of Asio's ssl::stream.
//
// Why not boost::asio::ssl::stream (docs/benchmarks.md, "TLS"): it feeds OpenSSL through a BIO
// pair, so each byte is copied twice more each way (socket buffer -> pair -> record buffer on
// the way in, record buffer -> pair -> output buffer on the way out); every operation toggles two
// deadline timers (type-erased executors) to serialise reads and writes; an operation that needs
// no I/O completes through an extra zero-byte read of the next layer; and Beast's flat_stream
// copies every gathered write once more. All of that was CPU per request that nginx does not pay.
//
// Here: socket reads land in `in_` through the next layer (so Beast's timeouts and Asio's
// edge-triggered read logic apply unchanged) and OpenSSL copies records straight out of it; the
// records OpenSSL writes are appended to one buffer and leave in one write of the next layer.
// A gathered write (header + body) is coalesced into one record. Session tickets left over by the
// TLS 1.3 handshake go out with the first response (or before the first wait for input), not in a
// write of their own.
//
// Satisfies AsyncReadStream and AsyncWriteStream; one read and one write may be outstanding at
// once (tunnels), as with any stream. Errors follow Asio's SSL stream: close_notify from the peer
// reads as asio::error::eof, a TCP close without it as asio::ssl::error::stream_truncated, TLS
// failures in asio::error::get_ssl_category(), next-layer errors (timeouts, resets) as they are.

#include <openssl/ssl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "runtime/io_types.h"
#include "tls/client_auth.h"

namespace tidegate::dataplane::tls {

class ServerStream {
 public:
  using next_layer_type = runtime::Stream;
  using executor_type = next_layer_type::executor_type;
  using error_code = boost::system::error_code;

  // Largest plaintext passed to one SSL_write: one full record.
  static constexpr size_t kMaxRecordPlaintext = 16 * 1024;
  // Socket reads land in a buffer of kInitialInputBytes (what a request header needs; an idle
  // keep-alive connection holds no more), grown to kInputBytes (a whole record: 16 KiB + header
  // and expansion) the first time a read fills it.
  static constexpr size_t kInitialInputBytes = 4 * 1024;
  static constexpr size_t kInputBytes = 17 * 1024;

  // The connection starts with `ctx` (the default certificate); SNI may switch it.
  ServerStream(runtime::Stream&& next, boost::asio::ssl::context& ctx)
      : ServerStream(std::move(next), ctx.native_handle()) {}
  ServerStream(runtime::Stream&& next, SSL_CTX* ctx);
  ~ServerStream();
  ServerStream(const ServerStream&) = delete;
  ServerStream& operator=(const ServerStream&) = delete;

  SSL* native_handle() { return ssl_; }
  // Before the handshake, bytes read from the socket by the caller (ssl-passthrough reads the
  // ClientHello itself, tls/client_hello.h): room for them, their arrival, and all that arrived
  // so far. The handshake then starts with them, as if OpenSSL had read them.
  boost::asio::mutable_buffer raw_input_space() { return input_space(); }
  void raw_input_arrived(size_t n) { input_arrived(n); }
  std::string_view raw_input() const {
    return std::string_view(in_.get() + in_begin_, in_end_ - in_begin_);
  }
  // Client certificates: what the handshake asked for and, once it is done, what it got.
  PeerCertificate& peer_certificate() { return peer_certificate_; }
  executor_type get_executor() { return next_.get_executor(); }
  next_layer_type& next_layer() { return next_; }
  const next_layer_type& next_layer() const { return next_; }

  // Server handshakes only (the type is accepted for Asio's signature).
  template <class Token>
  auto async_handshake(boost::asio::ssl::stream_base::handshake_type, Token&& token);
  // Reads into the first non-empty buffer.
  template <class MutableBufferSequence, class Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token);
  // Writes up to one record of plaintext: the first buffer alone when it fills a record (or
  // comes alone), else the buffers gathered so that a header and a small body make one record.
  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token);

 private:
  // What one SSL call asks for next.
  enum class Step { kDone, kWantInput, kClosed, kFailed };
  struct Result {
    Result(Step s, size_t n = 0, error_code e = {}) : step(s), bytes(n), ec(e) {}
    Step step;
    size_t bytes;
    error_code ec;
  };
  Result handshake_step();
  Result read_step(void* data, size_t size);
  Result write_step(const void* data, size_t size);

  // Input: bytes read from the socket that OpenSSL has not taken yet. OpenSSL takes all there
  // is before it asks for more, so the space is normally the whole buffer.
  boost::asio::mutable_buffer input_space();
  // Called when a read of the next layer completed.
  void input_arrived(size_t n) {
    if (in_end_ + n == in_capacity_) grow_input_ = true;
    in_end_ += n;
  }

  // Output: records written by OpenSSL wait in pending_; a flush moves them to flight_ and writes
  // that (so OpenSSL may append while a write is under way) until pending_ is empty. One flush at
  // a time; an operation that needs its output sent while another one flushes (a tunnel's write
  // while its read sends an alert, rare) waits on flush_done_.
  bool start_flush() {
    if (flushing_ || pending_.empty()) return false;
    flushing_ = true;
    pending_.swap(flight_);
    return true;
  }
  // After a write of flight_: true when more is pending and the next write must be started.
  bool flush_written(const error_code& ec) {
    flight_.clear();
    if (!ec && !pending_.empty()) {
      pending_.swap(flight_);
      return true;
    }
    if (ec && !write_error_) write_error_ = ec;
    flushing_ = false;
    if (flush_done_) flush_done_->cancel();
    return false;
  }
  template <class Self>
  void write_flight(Self& self) {
    boost::asio::async_write(next_, boost::asio::buffer(flight_), std::move(self));
  }
  template <class Self>
  void wait_flush(Self& self) {
    if (!flush_done_) flush_done_.emplace(next_.get_executor());
    flush_done_->expires_at(boost::asio::steady_timer::time_point::max());
    flush_done_->async_wait(std::move(self));
  }

  static int bio_read(BIO* bio, char* out, size_t len, size_t* read);
  static int bio_write(BIO* bio, const char* in, size_t len, size_t* written);
  static long bio_ctrl(BIO* bio, int cmd, long num, void* ptr);
  static BIO_METHOD* bio_method();

  template <bool kBytes>
  struct InputOp;
  struct HandshakeOp;
  struct ReadOp;
  struct WriteOp;

  next_layer_type next_;
  SSL* ssl_ = nullptr;
  PeerCertificate peer_certificate_;
  std::unique_ptr<char[]> in_;
  size_t in_capacity_ = kInitialInputBytes;
  bool grow_input_ = false;
  size_t in_begin_ = 0;
  size_t in_end_ = 0;
  bool in_eof_ = false;
  std::string pending_;
  std::string flight_;
  bool flushing_ = false;
  error_code write_error_;  // a failed flush fails every later write
  std::optional<boost::asio::basic_waitable_timer<
      std::chrono::steady_clock, boost::asio::wait_traits<std::chrono::steady_clock>,
      runtime::Executor>>
      flush_done_;
};

// What the handshake and a read share: both step OpenSSL until it wants input, send what it
// wrote before waiting (the peer may be waiting for it), and send a failure's alert before
// reporting. kBytes: whether the completion carries a byte count (a read) or not (a handshake).
template <bool kBytes>
struct ServerStream::InputOp {
  explicit InputOp(ServerStream& stream) : s(stream) {}
  ServerStream& s;
  enum class State { kStart, kRead, kFlush, kFailedFlush, kPosted } state_ = State::kStart;
  bool io_started_ = false;
  error_code result_;
  std::size_t bytes_ = 0;

  template <class Self>
  static void complete(Self& self, error_code ec, std::size_t n) {
    if constexpr (kBytes) {
      self.complete(ec, n);
    } else {
      self.complete(ec);
    }
  }

  // On each call: the I/O this operation waited for has completed. True when stepping OpenSSL
  // goes on; false when the operation has continued its I/O or completed.
  template <class Self>
  bool resume(Self& self, error_code ec, std::size_t n) {
    switch (state_) {
      case State::kStart:
        return true;
      case State::kRead:
        if (ec == boost::asio::error::eof) {
          s.in_eof_ = true;
        } else if (ec) {
          complete(self, ec, 0);
          return false;
        } else {
          s.input_arrived(n);
        }
        return true;
      case State::kFlush:
        if (s.flush_written(ec)) {
          s.write_flight(self);
          return false;
        }
        // What we sent was what the peer may be waiting for: without it, reading is pointless
        // (and after a timeout the next layer is closed).
        if (s.write_error_) {
          complete(self, s.write_error_, 0);
          return false;
        }
        return true;
      case State::kFailedFlush:
        if (s.flush_written(ec)) {
          s.write_flight(self);
          return false;
        }
        complete(self, result_, 0);
        return false;
      case State::kPosted:
        complete(self, result_, bytes_);
        return false;
    }
    return false;
  }

  // Writes what OpenSSL has to send, if anything; true when that write was started (the next
  // call resumes in `next`).
  template <class Self>
  bool flush(Self& self, State next) {
    if (!s.start_flush()) return false;
    state_ = next;
    io_started_ = true;
    s.write_flight(self);
    return true;
  }

  // OpenSSL wants input: our output first, then a read.
  template <class Self>
  void wait_for_input(Self& self) {
    if (flush(self, State::kFlush)) return;
    if (s.in_eof_) return finish(self, boost::asio::ssl::error::stream_truncated, 0);
    state_ = State::kRead;
    io_started_ = true;
    s.next_.async_read_some(s.input_space(), std::move(self));
  }

  // Sends the alert OpenSSL wrote (e.g. protocol_version), if any, before reporting `ec`.
  template <class Self>
  void fail(Self& self, error_code ec) {
    result_ = ec;
    if (flush(self, State::kFailedFlush)) return;
    finish(self, ec, 0);
  }

  template <class Self>
  void finish(Self& self, error_code ec, std::size_t n) {
    if (io_started_) return complete(self, ec, n);
    // Nothing was waited for: complete from the io_context, not from the initiating call.
    state_ = State::kPosted;
    result_ = ec;
    bytes_ = n;
    boost::asio::post(s.next_.get_executor(), std::move(self));
  }
};

struct ServerStream::HandshakeOp : InputOp<false> {
  explicit HandshakeOp(ServerStream& stream) : InputOp(stream) {}

  template <class Self>
  void operator()(Self& self, error_code ec = {}, std::size_t n = 0) {
    if (!resume(self, ec, n)) return;
    for (;;) {
      Result r = s.handshake_step();
      switch (r.step) {
        case Step::kDone:
          // TLS 1.2: our Finished is pending and the client waits for it. TLS 1.3: only session
          // tickets are; they leave with the first write, or before the first wait for input,
          // rather than in a write of their own.
          if (SSL_version(s.ssl_) < TLS1_3_VERSION && flush(self, State::kFlush)) return;
          return finish(self, {}, 0);
        case Step::kWantInput:
          return wait_for_input(self);
        case Step::kClosed:
          return fail(self, boost::asio::error::eof);
        case Step::kFailed:
          return fail(self, r.ec);
      }
    }
  }
};

struct ServerStream::ReadOp : InputOp<true> {
  ReadOp(ServerStream& stream, boost::asio::mutable_buffer b) : InputOp(stream), buffer(b) {}
  boost::asio::mutable_buffer buffer;

  template <class Self>
  void operator()(Self& self, error_code ec = {}, std::size_t n = 0) {
    if (!resume(self, ec, n)) return;
    if (buffer.size() == 0) return finish(self, {}, 0);
    for (;;) {
      Result r = s.read_step(buffer.data(), buffer.size());
      switch (r.step) {
        case Step::kDone:
          return finish(self, {}, r.bytes);
        case Step::kWantInput:
          // Anything OpenSSL still has to say (a handshake's tickets, an alert) goes before we
          // wait: the peer may be waiting for it. A flush under way sends it anyway.
          return wait_for_input(self);
        case Step::kClosed:
          return finish(self, boost::asio::error::eof, 0);
        case Step::kFailed:
          return fail(self, r.ec);
      }
    }
  }
};

struct ServerStream::WriteOp {
  WriteOp(ServerStream& stream, boost::asio::const_buffer b) : s(stream), buffer(b) {}
  ServerStream& s;
  boost::asio::const_buffer buffer;  // valid during the first call only (see async_write_some)
  enum class State { kStart, kWait, kFlush, kPosted } state_ = State::kStart;
  bool io_started_ = false;
  error_code result_;
  std::size_t bytes_ = 0;

  template <class Self>
  void operator()(Self& self, error_code ec = {}, std::size_t = 0) {
    switch (state_) {
      case State::kStart:
        if (s.write_error_) return finish(self, s.write_error_);
        if (buffer.size() == 0) return finish(self, {});
        encrypt();
        buffer = {};
        break;
      case State::kWait:  // the read side's flush ended (its timer was cancelled)
        break;
      case State::kFlush:
        if (s.flush_written(ec)) return s.write_flight(self);
        return self.complete(s.write_error_ ? s.write_error_ : result_,
                             s.write_error_ || result_ ? 0 : bytes_);
      case State::kPosted:
        return self.complete(result_, bytes_);
    }
    if (s.start_flush()) {
      state_ = State::kFlush;
      io_started_ = true;
      return s.write_flight(self);
    }
    if (s.flushing_) {
      // The read side is sending something (an alert, rare): our record went into the same
      // output and leaves with that flush; complete once it is out.
      state_ = State::kWait;
      io_started_ = true;
      return s.wait_flush(self);
    }
    finish(self, s.write_error_ ? s.write_error_ : result_);
  }

  void encrypt() {
    Result r = s.write_step(buffer.data(), buffer.size());
    switch (r.step) {
      case Step::kDone:
        bytes_ = r.bytes;
        break;
      case Step::kFailed:  // the alert, if OpenSSL wrote one, is flushed before completing
        result_ = r.ec;
        break;
      case Step::kClosed:
        result_ = boost::asio::error::eof;
        break;
      case Step::kWantInput:
        // Only a renegotiation would want input here, and it is refused by configuration
        // (SSL_OP_NO_RENEGOTIATION): fail rather than wait.
        result_ = boost::asio::error::operation_not_supported;
        break;
    }
  }

  template <class Self>
  void finish(Self& self, error_code ec) {
    std::size_t n = ec ? 0 : bytes_;
    if (io_started_) return self.complete(ec, n);
    state_ = State::kPosted;
    result_ = ec;
    bytes_ = n;
    boost::asio::post(s.next_.get_executor(), std::move(self));
  }
};

template <class Token>
auto ServerStream::async_handshake(boost::asio::ssl::stream_base::handshake_type, Token&& token) {
  return boost::asio::async_compose<Token, void(error_code)>(HandshakeOp{*this}, token, next_);
}

template <class MutableBufferSequence, class Token>
auto ServerStream::async_read_some(const MutableBufferSequence& buffers, Token&& token) {
  boost::asio::mutable_buffer first;
  for (auto it = boost::asio::buffer_sequence_begin(buffers);
       it != boost::asio::buffer_sequence_end(buffers); ++it) {
    if (boost::asio::mutable_buffer b(*it); b.size() > 0) {
      first = b;
      break;
    }
  }
  return boost::asio::async_compose<Token, void(error_code, std::size_t)>(ReadOp{*this, first},
                                                                          token, next_);
}

template <class ConstBufferSequence, class Token>
auto ServerStream::async_write_some(const ConstBufferSequence& buffers, Token&& token) {
  // The operation encrypts before this call returns, so the gathered copy lives on the stack.
  char gathered[kMaxRecordPlaintext];
  boost::asio::const_buffer chunk;
  size_t n = 0;
  bool gathering = false;
  for (auto it = boost::asio::buffer_sequence_begin(buffers);
       it != boost::asio::buffer_sequence_end(buffers); ++it) {
    boost::asio::const_buffer b(*it);
    if (b.size() == 0) continue;
    if (!gathering) {
      if (chunk.size() == 0) {
        chunk = b;
        if (b.size() >= kMaxRecordPlaintext) break;
        continue;
      }
      gathering = true;
      std::memcpy(gathered, chunk.data(), chunk.size());
      n = chunk.size();
    }
    size_t take = std::min(b.size(), kMaxRecordPlaintext - n);
    std::memcpy(gathered + n, b.data(), take);
    n += take;
    if (n == kMaxRecordPlaintext) break;
  }
  if (gathering) chunk = boost::asio::const_buffer(gathered, n);
  return boost::asio::async_compose<Token, void(error_code, std::size_t)>(WriteOp{*this, chunk},
                                                                          token, next_);
}

}  // namespace tidegate::dataplane::tls
