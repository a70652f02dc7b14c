#pragma once
// Response compression as a response filter (docs/annotations.md, "Compression"): the link after
// substitution in the exchange's filter chain (server/response_filter.h). From the route's
// model::Compression and the request's Accept-Encoding it picks brotli, zstd or gzip, decides from
// the response head whether the body qualifies (status, type, length, not already encoded, no
// no-transform, no range), rewrites the head (Content-Encoding, no Content-Length, Vary, a weak
// ETag) and compresses in bounded turns. Memory per response: the coder's state (zlib level 1:
// about 270 KiB; brotli quality 4 with a 256 KiB window: about 1 MiB; zstd level 3 with the same
// window: about 1.3 MiB), the queued input (at most
// one relay buffer or one substitution slice) and one turn's output; the coder is kept between
// responses and reset, not made again.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "model/compression.h"
#include "server/response_filter.h"

namespace tidegate::dataplane::server {

enum class ContentCoding { kNone, kGzip, kBrotli, kZstd };
const char* to_string(ContentCoding c);  // "", "gzip", "br", "zstd"

// The coding for an Accept-Encoding value (RFC 9110 section 12.5.3): the highest q-value among
// br, zstd, gzip and "*" (which stands for br and gzip, not zstd), ties going to br, then zstd;
// q=0 refuses a coding; none acceptable: kNone.
ContentCoding negotiate_coding(std::string_view accept_encoding);

class CompressionFilter final : public ResponseFilter {
 public:
  static constexpr int kGzipLevel = 1;      // ingress-nginx's gzip-level
  static constexpr int kBrotliQuality = 4;  // Caddy's and Thruster's default for dynamic content
  static constexpr int kBrotliWindowBits = 18;
  // zstd level 3 (its default, what Caddy uses for dynamic content) with a 256 KiB window: about
  // 1.3 MiB of coder state, within what every browser's decoder accepts (RFC 8878: at most 8 MiB
  // for HTTP).
  static constexpr int kZstdLevel = 3;
  static constexpr int kZstdWindowLog = 18;
  static constexpr std::size_t kTurnBytes = 64 * 1024;  // input compressed per turn

  CompressionFilter();
  ~CompressionFilter() override;
  CompressionFilter(const CompressionFilter&) = delete;
  CompressionFilter& operator=(const CompressionFilter&) = delete;

  // Per exchange, before the request goes upstream: the route's settings (null: off), the
  // request's Accept-Encoding (read now; the request may lose the field on its way up) and
  // whether it carries credentials (Cookie or Authorization: compression-breach-mitigation).
  void configure(const model::Compression* config, std::string_view accept_encoding,
                 bool credentials = false);
  // compression-breach-mitigation: padding: the field that carries it, 1-256 random bytes.
  static constexpr std::string_view kPaddingField = "X-Compression-Padding";

  bool on_headers(boost::beast::http::response_header<Fields>& head,
                  const ResponseFilterContext& context) override;
  void on_data(std::string_view data, bool last) override;
  bool process() override;
  std::string& output() override { return out_; }
  bool done() const override { return finished_; }
  // This response is being compressed (on_headers took it).
  bool compressing() const { return active_ != ContentCoding::kNone; }
  // A compressed body is written in pieces of at least this much (the end excepted): deflate
  // emits a few KiB per 16 KiB read, and a write per read cost a syscall each.
  static constexpr std::size_t kMinWriteBytes = 16 * 1024;
  void on_end() override;
  void reset() override;

 private:
  struct Coders;
  // Compresses [data, data + n); `finish` ends the stream.
  void compress(const char* data, std::size_t n, bool finish);

  const model::Compression* config_ = nullptr;
  ContentCoding wanted_ = ContentCoding::kNone;
  ContentCoding active_ = ContentCoding::kNone;
  std::string in_;
  std::size_t in_used_ = 0;
  bool last_ = false;
  bool finished_ = false;
  std::string out_;
  std::unique_ptr<Coders> coders_;
};

}  // namespace tidegate::dataplane::server
