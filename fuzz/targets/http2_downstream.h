#pragma once
// Fuzz target http2_downstream: the client side's HTTP/2 codec (server/http2_connection.h) as a
// client drives it. Input: the bytes a client sends after the connection preface (frames, or
// anything). The session runs on a worker's io_context with its socket replaced by memory; the
// exchanges answer from a worker without configuration (503), so every stream gets a real answer
// through the same Downstream calls as in production.
//
// The first input byte chooses where the rest is split into two reads.
//
// Invariants, whatever the input:
//   - no crash, no sanitizer report, no escaping exception; the session ends (closing, or idle
//     with every handler run) within a bounded number of event loop turns;
//   - what the data plane writes is a sequence of well-formed frames: it starts with a SETTINGS
//     frame; every frame is at most 16 KiB; SETTINGS, PING, GOAWAY on stream 0 with their
//     lengths (a multiple of 6, 8, at least 8), WINDOW_UPDATE of 4 bytes and a non-zero
//     increment, RST_STREAM of 4 bytes on a stream; HEADERS, CONTINUATION and DATA only on odd
//     (client-opened) streams, never PUSH_PROMISE or PRIORITY; nothing on a stream after it ended;
//   - every header block decodes (HPACK) into ":status" (three digits) first and then lower-case
//     names, none of them connection-specific (Connection, Keep-Alive, Transfer-Encoding, ...).

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "common.h"
#include "server/http2_connection.h"
#include "server/limits.h"
#include "server/worker.h"
#include "tls/tls_context.h"

namespace tidegate::fuzz {

namespace http2_detail {

using dataplane::server::Http2Session;

// The session with its socket replaced by memory.
class MemorySession final : public Http2Session,
                            public std::enable_shared_from_this<MemorySession> {
 public:
  explicit MemorySession(dataplane::server::Worker& worker)
      : Http2Session(worker, "127.0.0.1", dataplane::ratelimit::IpAddress::v4(0x7f000001), false),
        worker_(worker) {
    worker.active_connections.fetch_add(1, std::memory_order_relaxed);
  }
  bool start(std::string_view received) { return begin(received); }
  bool feed(std::string_view bytes) { return on_received(bytes.data(), bytes.size()); }
  void end() { close_now(); }
  dataplane::runtime::Executor executor() override { return worker_.io().get_executor(); }
  dataplane::tls::PeerCertificate* peer_certificate() override { return nullptr; }  // plain

  std::string written;
  bool socket_closed = false;

 private:
  std::shared_ptr<Http2Session> self() override { return shared_from_this(); }
  void write_out(const std::string& bytes) override {
    written += bytes;
    boost::asio::post(worker_.io(), [self = shared_from_this()] { self->on_written({}); });
  }
  void close_socket() override { socket_closed = true; }

  dataplane::server::Worker& worker_;
};

inline dataplane::server::Worker& fuzz_worker() {
  static dataplane::tls::ServerSettings settings;
  static dataplane::server::Limits limits;
  static dataplane::server::Worker worker(0, limits, nullptr, settings);
  return worker;
}

// Runs the worker's handlers until none is ready (or a bound on turns is reached).
inline bool run_ready(dataplane::server::Worker& worker) {
  auto& io = worker.io();
  for (int turn = 0; turn < 10'000; ++turn) {
    io.restart();
    if (io.poll() == 0) return true;
  }
  return false;
}

inline bool connection_specific(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
         name == "transfer-encoding" || name == "upgrade" || name == "te";
}

// Checks one decoded header block; returns a failure or "".
inline std::string check_header_block(nghttp2_hd_inflater* inflater, const std::string& block,
                                      std::string* status) {
  const auto* in = reinterpret_cast<const uint8_t*>(block.data());
  size_t left = block.size();
  bool first = true;
  for (;;) {
    nghttp2_nv nv;
    int flags = 0;
    const ssize_t n = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, in, left, 1);
    if (n < 0) return "a header block the data plane sent does not decode";
    in += n;
    left -= static_cast<size_t>(n);
    if (flags & NGHTTP2_HD_INFLATE_EMIT) {
      const std::string_view name(reinterpret_cast<const char*>(nv.name), nv.namelen);
      const std::string_view value(reinterpret_cast<const char*>(nv.value), nv.valuelen);
      if (first) {
        if (name != ":status" || value.size() != 3 || value[0] < '1' || value[0] > '5') {
          return "a header block does not start with :status: " + escape(name);
        }
        *status = std::string(value);
        first = false;
      } else {
        if (!name.empty() && name[0] == ':') return "a second pseudo-header " + escape(name);
        for (char c : name) {
          if (c >= 'A' && c <= 'Z') return "an upper-case field name " + escape(name);
        }
        if (connection_specific(name)) return "a connection-specific field " + escape(name);
      }
    }
    if (flags & NGHTTP2_HD_INFLATE_FINAL) {
      nghttp2_hd_inflate_end_headers(inflater);
      break;
    }
    if (n == 0 && left == 0) return "a header block ends in the middle";
  }
  if (first) return "an empty header block";
  return {};
}

struct Observed {
  size_t frames = 0;
  std::map<int32_t, std::string> final_status;  // per stream
  bool goaway = false;
};

// Checks the bytes the data plane wrote; returns a failure or "".
inline std::string check_output(const std::string& out, Observed* seen) {
  nghttp2_hd_inflater* inflater = nullptr;
  if (nghttp2_hd_inflate_new(&inflater) != 0) return "no inflater";
  std::unique_ptr<nghttp2_hd_inflater, void (*)(nghttp2_hd_inflater*)> own(inflater,
                                                                           nghttp2_hd_inflate_del);
  std::set<int32_t> ended;
  std::string block;
  int32_t block_stream = 0;
  bool block_ends_stream = false;
  size_t at = 0;
  while (at < out.size()) {
    if (out.size() - at < 9) return "a frame header cut short";
    const auto* p = reinterpret_cast<const uint8_t*>(out.data() + at);
    const uint32_t length = (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2];
    const uint8_t type = p[3], flags = p[4];
    const int32_t stream = static_cast<int32_t>(
        ((uint32_t{p[5]} << 24) | (uint32_t{p[6]} << 16) | (uint32_t{p[7]} << 8) | p[8]) &
        0x7fffffffu);
    if (length > 16384) return "a frame over 16 KiB";
    if (out.size() - at - 9 < length) return "a frame cut short";
    const std::string payload = out.substr(at + 9, length);
    at += 9 + length;
    if (seen->frames++ == 0 && (type != NGHTTP2_SETTINGS || (flags & NGHTTP2_FLAG_ACK))) {
      return "the first frame is not the server's SETTINGS";
    }
    if (!block.empty() || block_stream != 0) {
      if (type != NGHTTP2_CONTINUATION || stream != block_stream) {
        return "a header block interrupted";
      }
    }
    switch (type) {
      case NGHTTP2_SETTINGS:
        if (stream != 0 || length % 6 != 0 || ((flags & NGHTTP2_FLAG_ACK) && length != 0)) {
          return "a malformed SETTINGS frame";
        }
        break;
      case NGHTTP2_PING:
        if (stream != 0 || length != 8) return "a malformed PING frame";
        break;
      case NGHTTP2_GOAWAY:
        if (stream != 0 || length < 8) return "a malformed GOAWAY frame";
        seen->goaway = true;
        break;
      case NGHTTP2_WINDOW_UPDATE: {
        if (length != 4) return "a malformed WINDOW_UPDATE frame";
        const auto* q = reinterpret_cast<const uint8_t*>(payload.data());
        const uint32_t increment =
            ((uint32_t{q[0]} << 24) | (uint32_t{q[1]} << 16) | (uint32_t{q[2]} << 8) | q[3]) &
            0x7fffffffu;
        if (increment == 0) return "a WINDOW_UPDATE of zero";
        break;
      }
      case NGHTTP2_RST_STREAM:
        if (stream == 0 || length != 4) return "a malformed RST_STREAM frame";
        ended.insert(stream);
        break;
      case NGHTTP2_HEADERS:
      case NGHTTP2_CONTINUATION:
      case NGHTTP2_DATA: {
        if (stream == 0 || (stream & 1) == 0) return "a stream frame on a stream no client opened";
        if (ended.count(stream) != 0) return "a frame on a stream after its end";
        if (type == NGHTTP2_DATA) {
          if (flags & NGHTTP2_FLAG_END_STREAM) ended.insert(stream);
          break;
        }
        if (type == NGHTTP2_HEADERS) {
          block_stream = stream;
          block_ends_stream = (flags & NGHTTP2_FLAG_END_STREAM) != 0;
          block = payload;
          if (flags & NGHTTP2_FLAG_PADDED) return "padding the data plane does not send";
          if (flags & NGHTTP2_FLAG_PRIORITY) return "priority the data plane does not send";
        } else {
          block += payload;
        }
        if (flags & NGHTTP2_FLAG_END_HEADERS) {
          std::string status;
          std::string failure = check_header_block(inflater, block, &status);
          if (!failure.empty()) return failure;
          if (status[0] != '1') seen->final_status[block_stream] = status;
          if (block_ends_stream) ended.insert(block_stream);
          block.clear();
          block_stream = 0;
        }
        break;
      }
      default:
        return "a frame type the data plane never sends: " + std::to_string(type);
    }
  }
  if (!block.empty()) return "a header block without END_HEADERS";
  return {};
}

}  // namespace http2_detail

inline std::string run_http2_downstream(const uint8_t* data, size_t size,
                                        http2_detail::Observed* observed = nullptr) {
  using namespace http2_detail;
  auto& worker = fuzz_worker();
  Observed local;
  Observed* seen = observed ? observed : &local;
  std::string failure;
  {
    auto session = std::make_shared<MemorySession>(worker);
    // The first byte says where the rest is split into two reads (frames cut between reads).
    const std::string_view rest =
        size > 0 ? std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1)
                 : std::string_view();
    const size_t split = size > 0 ? data[0] % (rest.size() + 1) : 0;
    std::string input(dataplane::server::kHttp2Preface);
    input.append(rest.substr(0, split));
    if (session->start(input)) {
      run_ready(worker);
      if (!session->socket_closed && split < rest.size()) session->feed(rest.substr(split));
    }
    if (!run_ready(worker)) failure = "the session did not settle";
    session->end();
    run_ready(worker);
    if (failure.empty()) failure = check_output(session->written, seen);
  }
  run_ready(worker);
  return failure;
}

}  // namespace tidegate::fuzz
