#include "tls/server_stream.h"

#include <openssl/err.h>

#include <boost/system/system_error.hpp>

namespace tidegate::dataplane::tls {

namespace {

boost::system::error_code ssl_error() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return boost::asio::ssl::error::unspecified_system_error;
  return {static_cast<int>(e), boost::asio::error::get_ssl_category()};
}

}  // namespace

ServerStream::ServerStream(runtime::Stream&& next, SSL_CTX* ctx)
    : next_(std::move(next)),
      ssl_(SSL_new(ctx)),
      peer_certificate_(ssl_),
      in_(new char[kInitialInputBytes]) {
  if (ssl_ == nullptr) {
    throw boost::system::system_error(ssl_error(), "SSL_new");
  }
  BIO* bio = BIO_new(bio_method());
  if (bio == nullptr) {
    SSL_free(ssl_);
    throw boost::system::system_error(ssl_error(), "BIO_new");
  }
  BIO_set_data(bio, this);
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl_, bio, bio);  // the SSL object owns the BIO
  SSL_set_accept_state(ssl_);
  // The client-hello callback records here whether a client certificate was asked for.
  SSL_set_ex_data(ssl_, peer_certificate_ex_index(), &peer_certificate_);
}

ServerStream::~ServerStream() { SSL_free(ssl_); }

boost::asio::mutable_buffer ServerStream::input_space() {
  if (grow_input_ && in_capacity_ < kInputBytes) {
    // Large records are arriving (an upload, a tunnel): read a whole one at a time.
    std::unique_ptr<char[]> bigger(new char[kInputBytes]);
    std::memcpy(bigger.get(), in_.get() + in_begin_, in_end_ - in_begin_);
    in_ = std::move(bigger);
    in_capacity_ = kInputBytes;
  } else if (in_begin_ > 0) {
    std::memmove(in_.get(), in_.get() + in_begin_, in_end_ - in_begin_);
  }
  in_end_ -= in_begin_;
  in_begin_ = 0;
  return boost::asio::buffer(in_.get() + in_end_, in_capacity_ - in_end_);
}

namespace {

// The outcome of an SSL call that did not succeed.
template <class Result, class Step>
Result outcome(SSL* ssl, int ret) {
  switch (SSL_get_error(ssl, ret)) {
    case SSL_ERROR_WANT_READ:
      return {Step::kWantInput};
    case SSL_ERROR_ZERO_RETURN:  // close_notify from the peer
      return {Step::kClosed};
    default:  // SSL_ERROR_WANT_WRITE cannot happen: our BIO takes every write
      return {Step::kFailed, 0, ssl_error()};
  }
}

}  // namespace

// Each call starts with an empty error queue, or SSL_get_error may report a stale error.
ServerStream::Result ServerStream::handshake_step() {
  ERR_clear_error();
  int ret = SSL_do_handshake(ssl_);
  if (ret == 1) return {Step::kDone};
  return outcome<Result, Step>(ssl_, ret);
}

ServerStream::Result ServerStream::read_step(void* data, size_t size) {
  ERR_clear_error();
  size_t n = 0;
  if (SSL_read_ex(ssl_, data, size, &n) == 1) return {Step::kDone, n};
  return outcome<Result, Step>(ssl_, 0);
}

ServerStream::Result ServerStream::write_step(const void* data, size_t size) {
  ERR_clear_error();
  size_t n = 0;
  if (SSL_write_ex(ssl_, data, std::min(size, kMaxRecordPlaintext), &n) == 1) {
    return {Step::kDone, n};
  }
  return outcome<Result, Step>(ssl_, 0);
}

// --- The BIO: OpenSSL reads records from in_ and appends what it writes to pending_. -------

int ServerStream::bio_read(BIO* bio, char* out, size_t len, size_t* read) {
  auto* s = static_cast<ServerStream*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  size_t available = s->in_end_ - s->in_begin_;
  if (available == 0) {
    // More must come from the socket (the operation then reads it); an end of stream is
    // reported by the operation, not through OpenSSL.
    BIO_set_retry_read(bio);
    *read = 0;
    return 0;
  }
  size_t n = std::min(len, available);
  std::memcpy(out, s->in_.get() + s->in_begin_, n);
  s->in_begin_ += n;
  if (s->in_begin_ == s->in_end_) s->in_begin_ = s->in_end_ = 0;
  *read = n;
  return 1;
}

int ServerStream::bio_write(BIO* bio, const char* in, size_t len, size_t* written) {
  auto* s = static_cast<ServerStream*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  s->pending_.append(in, len);
  *written = len;
  return 1;
}

long ServerStream::bio_ctrl(BIO*, int cmd, long, void*) {
  // A flush succeeds (the operation sends pending_ when it needs to); everything else (kTLS,
  // pending counts, datagram controls) is not supported.
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

BIO_METHOD* ServerStream::bio_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m =
        BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tidegate server stream");
    BIO_meth_set_read_ex(m, bio_read);
    BIO_meth_set_write_ex(m, bio_write);
    BIO_meth_set_ctrl(m, bio_ctrl);
    return m;
  }();
  return method;
}

}  // namespace tidegate::dataplane::tls
