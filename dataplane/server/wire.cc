#include "server/wire.h"

#include <charconv>
#include <string_view>

namespace tidegate::dataplane::server {

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

void append_version(std::string& out, unsigned version) {
  out += version >= 11 ? "HTTP/1.1" : "HTTP/1.0";
}

void append_fields(std::string& out, const Fields& fields) {
  for (const auto& field : fields) {
    auto name = field.name_string();
    auto value = field.value();
    out.append(name.data(), name.size());
    out += ": ";
    out.append(value.data(), value.size());
    out += "\r\n";
  }
  out += "\r\n";
}

}  // namespace

void append_head(std::string& out, const http::request_header<Fields>& req) {
  auto method = req.method_string();
  auto target = req.target();
  out.append(method.data(), method.size());
  out += ' ';
  out.append(target.data(), target.size());
  out += ' ';
  append_version(out, req.version());
  out += "\r\n";
  append_fields(out, req);
}

void append_head(std::string& out, const http::response_header<Fields>& res) {
  append_version(out, res.version());
  out += ' ';
  unsigned status = res.result_int();
  char code[4] = {static_cast<char>('0' + status / 100 % 10),
                  static_cast<char>('0' + status / 10 % 10), static_cast<char>('0' + status % 10),
                  ' '};
  out.append(code, sizeof code);
  auto reason = res.reason();
  out.append(reason.data(), reason.size());
  out += "\r\n";
  append_fields(out, res);
}

OutgoingMessage::Buffers OutgoingMessage::next(const char* data, std::size_t n, bool last) {
  static constexpr std::string_view kChunkEnd = "\r\n";
  static constexpr std::string_view kChunkEndLast = "\r\n0\r\n\r\n";
  static constexpr std::string_view kLastChunk = "0\r\n\r\n";
  std::size_t count = 0;
  if (head_pending_) buffers_[count++] = asio::buffer(head_);
  if (!chunked_) {
    if (n > 0) buffers_[count++] = asio::const_buffer(data, n);
  } else if (n > 0) {
    // chunk = chunk-size CRLF chunk-data CRLF (RFC 9112 section 7.1); the last chunk rides along.
    char* begin = chunk_size_line_.data();
    auto [end, ec] = std::to_chars(begin, begin + chunk_size_line_.size() - 2, n, 16);
    *end++ = '\r';
    *end++ = '\n';
    buffers_[count++] = asio::const_buffer(begin, static_cast<std::size_t>(end - begin));
    buffers_[count++] = asio::const_buffer(data, n);
    auto tail = last ? kChunkEndLast : kChunkEnd;
    buffers_[count++] = asio::const_buffer(tail.data(), tail.size());
  } else if (last) {
    buffers_[count++] = asio::const_buffer(kLastChunk.data(), kLastChunk.size());
  }
  if (last) done_ = true;
  return Buffers(buffers_.data(), count);
}

OutgoingMessage::Buffers OutgoingMessage::head_only() {
  done_ = true;
  std::size_t count = 0;
  if (head_pending_) buffers_[count++] = asio::buffer(head_);
  return Buffers(buffers_.data(), count);
}

}  // namespace tidegate::dataplane::server
