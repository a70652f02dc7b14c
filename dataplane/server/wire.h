#pragma once
// The write side of one outgoing HTTP/1.x message (a request to an upstream or a response to a
// client): the start line and fields serialized into one contiguous, reused buffer, and body
// pieces framed (chunked or as they are) behind it, so that a small exchange leaves in one
// write of a few buffers. Beast's own serializer hands the kernel one iovec per field name,
// separator and value, and walking that buffer sequence showed at the top of the profile.

#include <array>
#include <cstddef>
#include <span>
#include <string>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/message.hpp>

#include "server/headers.h"

namespace tidegate::dataplane::server {

// Appends "METHOD target HTTP/1.x\r\n" / "HTTP/1.x code reason\r\n", each field and the empty
// line that ends the header block.
void append_head(std::string& out, const boost::beast::http::request_header<Fields>& req);
void append_head(std::string& out, const boost::beast::http::response_header<Fields>& res);

class OutgoingMessage {
 public:
  using Buffers = std::span<const boost::asio::const_buffer>;

  // Serializes `header`. `chunked`: the body is sent with chunked framing (the header must say
  // so); otherwise body bytes are sent as they are (Content-Length or close-delimited).
  template <class Header>
  void start(const Header& header, bool chunked) {
    head_.clear();  // keeps its capacity between exchanges
    append_head(head_, header);
    head_pending_ = true;
    chunked_ = chunked;
    done_ = false;
  }

  // The buffers of the next write: the header if not sent yet, then `n` bytes at `data` with
  // their framing; `last` ends the body (the last chunk when chunked). The buffers stay valid
  // until the next call; call `written()` once they are on the wire.
  Buffers next(const char* data, std::size_t n, bool last);
  // Only the header: for messages without a body (HEAD, 204, 304, 101).
  Buffers head_only();
  void written() { head_pending_ = false; }
  bool done() const { return done_; }
  bool chunked() const { return chunked_; }

 private:
  std::string head_;
  bool head_pending_ = false;
  bool chunked_ = false;
  bool done_ = false;
  std::array<char, 24> chunk_size_line_{};
  std::array<boost::asio::const_buffer, 4> buffers_;
};

}  // namespace tidegate::dataplane::server
