#include "server/compression_filter.h"

#include <brotli/encode.h>
#include <openssl/rand.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include <boost/beast/core/string.hpp>

#include "text/text.h"

namespace tidegate::dataplane::server {

namespace http = boost::beast::http;

struct CompressionFilter::Coders {
  z_stream zs{};
  bool zs_ready = false;
  BrotliEncoderState* br = nullptr;
  ZSTD_CCtx* zstd = nullptr;
  ~Coders() {
    if (zs_ready) deflateEnd(&zs);
    if (br != nullptr) BrotliEncoderDestroyInstance(br);
    if (zstd != nullptr) ZSTD_freeCCtx(zstd);
  }
};

const char* to_string(ContentCoding c) {
  switch (c) {
    case ContentCoding::kGzip:
      return "gzip";
    case ContentCoding::kBrotli:
      return "br";
    case ContentCoding::kZstd:
      return "zstd";
    case ContentCoding::kNone:
      break;
  }
  return "";
}

namespace {

// q-value in thousandths: "q=0.5" -> 500; a malformed one: -1 (the element is skipped).
int parse_q(std::string_view params) {
  int q = 1000;
  while (!params.empty()) {
    const size_t semi = params.find(';');
    std::string_view p = text::trim_ows(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view() : params.substr(semi + 1);
    if (p.size() < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=') continue;
    std::string_view v = p.substr(2);
    if (v.empty() || (v[0] != '0' && v[0] != '1')) return -1;
    int value = (v[0] - '0') * 1000;
    if (v.size() > 1) {
      if (v[1] != '.' || v.size() > 5) return -1;
      int scale = 100;
      for (char c : v.substr(2)) {
        if (c < '0' || c > '9') return -1;
        value += (c - '0') * scale;
        scale /= 10;
      }
    }
    if (value > 1000) return -1;
    q = value;
  }
  return q;
}

}  // namespace

ContentCoding negotiate_coding(std::string_view accept) {
  int br = -1, zstd = -1, gzip = -1, any = -1;  // -1: not named
  while (!accept.empty()) {
    const size_t comma = accept.find(',');
    std::string_view item = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    const size_t semi = item.find(';');
    std::string_view name = text::trim_ows(item.substr(0, semi));
    const int q =
        parse_q(semi == std::string_view::npos ? std::string_view() : item.substr(semi + 1));
    if (q < 0) continue;
    if (boost::beast::iequals(name, "br")) {
      br = q;
    } else if (boost::beast::iequals(name, "zstd")) {
      zstd = q;
    } else if (boost::beast::iequals(name, "gzip") || boost::beast::iequals(name, "x-gzip")) {
      gzip = q;
    } else if (name == "*") {
      any = q;
    }
  }
  // "*" stands for br and gzip, not for zstd: only a client that names zstd gets it (a generic
  // client's "*" predates it more often than not).
  if (br < 0) br = any;
  if (gzip < 0) gzip = any;
  if (br <= 0 && zstd <= 0 && gzip <= 0) return ContentCoding::kNone;
  if (br >= zstd && br >= gzip) return ContentCoding::kBrotli;
  return zstd >= gzip ? ContentCoding::kZstd : ContentCoding::kGzip;
}

CompressionFilter::CompressionFilter() : coders_(std::make_unique<Coders>()) {}
CompressionFilter::~CompressionFilter() = default;

void CompressionFilter::configure(const model::Compression* config,
                                  std::string_view accept_encoding, bool credentials) {
  config_ = config;
  wanted_ = config != nullptr ? negotiate_coding(accept_encoding) : ContentCoding::kNone;
  if (credentials && config != nullptr &&
      config->breach == model::BreachMitigation::kNoCredentials) {
    wanted_ = ContentCoding::kNone;  // the response still says Vary: Accept-Encoding
  }
}

bool CompressionFilter::on_headers(http::response_header<Fields>& head,
                                   const ResponseFilterContext& context) {
  if (config_ == nullptr || !context.body_expected || context.client_version < 11) return false;
  // As nginx's gzip: 200, 403 and 404 only (a 206 is a range of the identity body).
  if (context.status != 200 && context.status != 403 && context.status != 404) return false;
  if (auto ce = head[http::field::content_encoding];
      !ce.empty() && !boost::beast::iequals(ce, "identity")) {
    return false;
  }
  if (head.find(http::field::content_range) != head.end()) return false;
  if (text::has_token(head[http::field::cache_control], "no-transform")) return false;
  const auto content_type = head[http::field::content_type];
  const std::string type = text::ascii_lower(
      std::string(text::trim_ows(content_type.substr(0, content_type.find(';')))));
  const auto& types = config_->types.empty() ? model::default_compression_types() : config_->types;
  if (type.empty() || std::find(types.begin(), types.end(), type) == types.end()) return false;
  if (context.content_length && *context.content_length < config_->min_length) return false;
  // The response could be compressed: caches must keep versions per Accept-Encoding, whether
  // this client gets one or not.
  auto vary = head[http::field::vary];
  if (vary.empty()) {
    head.set(http::field::vary, "Accept-Encoding");
  } else if (vary != "*" && !text::has_token(vary, "Accept-Encoding")) {
    std::string joined(vary);
    joined += ", Accept-Encoding";
    head.set(http::field::vary, joined);
  }
  if (wanted_ == ContentCoding::kNone) return false;
  head.set(http::field::content_encoding, to_string(wanted_));
  if (config_->breach == model::BreachMitigation::kPadding) {
    // Random length and content (a CSPRNG: the length must not be predictable), letters and
    // digits so that it is a plain field value.
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char random[257];
    if (RAND_bytes(random, sizeof random) == 1) {
      const size_t n = 1 + random[0];
      std::string padding(n, 'x');
      for (size_t i = 0; i < n; ++i) padding[i] = kAlphabet[random[1 + i] % 62];
      head.set(kPaddingField, padding);
    }
  }
  // The compressed length is unknown until the end: chunked to HTTP/1.1 clients (HTTP/2 frames
  // its own; compression never runs for HTTP/1.0 clients).
  head.erase(http::field::content_length);
  head.erase(http::field::transfer_encoding);
  if (context.client_version == 11) head.set(http::field::transfer_encoding, "chunked");
  // The compressed body is another representation: a strong validator would claim byte
  // equality with the identity one.
  if (auto etag = head[http::field::etag]; !etag.empty() && !etag.starts_with("W/")) {
    head.set(http::field::etag, "W/" + std::string(etag));
  }
  active_ = wanted_;
  in_.clear();
  in_used_ = 0;
  last_ = false;
  finished_ = false;
  out_.clear();
  auto& c = *coders_;
  if (active_ == ContentCoding::kGzip) {
    if (!c.zs_ready) {
      // windowBits 15 + 16: the gzip wrapper; memLevel 8.
      if (deflateInit2(&c.zs, kGzipLevel, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        active_ = ContentCoding::kNone;
        return false;
      }
      c.zs_ready = true;
    } else {
      deflateReset(&c.zs);
    }
  } else if (active_ == ContentCoding::kZstd) {
    if (c.zstd == nullptr) c.zstd = ZSTD_createCCtx();
    if (c.zstd == nullptr ||
        ZSTD_isError(ZSTD_CCtx_reset(c.zstd, ZSTD_reset_session_and_parameters)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c.zstd, ZSTD_c_compressionLevel, kZstdLevel)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c.zstd, ZSTD_c_windowLog, kZstdWindowLog))) {
      active_ = ContentCoding::kNone;
      return false;
    }
  } else {
    if (c.br != nullptr) BrotliEncoderDestroyInstance(c.br);
    c.br = BrotliEncoderCreateInstance(nullptr, nullptr, nullptr);
    if (c.br == nullptr) {
      active_ = ContentCoding::kNone;
      return false;
    }
    BrotliEncoderSetParameter(c.br, BROTLI_PARAM_QUALITY, kBrotliQuality);
    BrotliEncoderSetParameter(c.br, BROTLI_PARAM_LGWIN, kBrotliWindowBits);
  }
  return true;
}

void CompressionFilter::on_data(std::string_view data, bool last) {
  if (in_used_ == in_.size()) {
    in_.clear();
    in_used_ = 0;
  }
  in_.append(data.data(), data.size());
  if (last) last_ = true;
}

bool CompressionFilter::process() {
  if (finished_) return false;
  const std::size_t n = std::min(in_.size() - in_used_, kTurnBytes);
  const bool finish = last_ && in_used_ + n == in_.size();
  compress(in_.data() + in_used_, n, finish);
  in_used_ += n;
  if (finish) finished_ = true;
  return in_used_ < in_.size();
}

void CompressionFilter::compress(const char* data, std::size_t n, bool finish) {
  auto& c = *coders_;
  constexpr std::size_t kChunk = 16 * 1024;
  if (active_ == ContentCoding::kGzip) {
    c.zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    c.zs.avail_in = static_cast<uInt>(n);
    const int flush = finish ? Z_FINISH : Z_NO_FLUSH;
    for (;;) {
      const std::size_t at = out_.size();
      out_.resize(at + kChunk);
      c.zs.next_out = reinterpret_cast<Bytef*>(out_.data() + at);
      c.zs.avail_out = static_cast<uInt>(kChunk);
      const int rv = deflate(&c.zs, flush);
      out_.resize(at + kChunk - c.zs.avail_out);
      if (rv == Z_STREAM_END || rv == Z_STREAM_ERROR) break;
      if (c.zs.avail_out != 0 && c.zs.avail_in == 0 && !finish) break;
    }
    return;
  }
  if (active_ == ContentCoding::kZstd) {
    ZSTD_inBuffer in{data, n, 0};
    const ZSTD_EndDirective mode = finish ? ZSTD_e_end : ZSTD_e_continue;
    for (;;) {
      const std::size_t at = out_.size();
      out_.resize(at + kChunk);
      ZSTD_outBuffer out{out_.data() + at, kChunk, 0};
      const std::size_t left = ZSTD_compressStream2(c.zstd, &out, &in, mode);
      out_.resize(at + out.pos);
      if (ZSTD_isError(left)) break;
      // Done when the input is taken and, at the end, the frame is flushed (left == 0).
      if (finish ? left == 0 : in.pos == in.size) break;
    }
    return;
  }
  if (active_ != ContentCoding::kBrotli) return;
  const uint8_t* next_in = reinterpret_cast<const uint8_t*>(data);
  std::size_t avail_in = n;
  const BrotliEncoderOperation op = finish ? BROTLI_OPERATION_FINISH : BROTLI_OPERATION_PROCESS;
  for (;;) {
    const std::size_t at = out_.size();
    out_.resize(at + kChunk);
    uint8_t* next_out = reinterpret_cast<uint8_t*>(out_.data() + at);
    std::size_t avail_out = kChunk;
    const bool ok =
        BrotliEncoderCompressStream(c.br, op, &avail_in, &next_in, &avail_out, &next_out, nullptr);
    out_.resize(at + kChunk - avail_out);
    if (!ok) break;
    if (finish ? BrotliEncoderIsFinished(c.br) != 0
               : avail_in == 0 && BrotliEncoderHasMoreOutput(c.br) == 0) {
      break;
    }
  }
}

void CompressionFilter::on_end() { reset(); }

void CompressionFilter::reset() {
  active_ = ContentCoding::kNone;
  in_.clear();
  in_used_ = 0;
  last_ = false;
  finished_ = false;
  out_.clear();
}

}  // namespace tidegate::dataplane::server
