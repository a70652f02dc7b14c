// Response compression (server/compression_filter.h): the Accept-Encoding negotiation, the
// decisions on the response head, and a differential round trip (the output decompressed by
// zlib's inflate and brotli's decoder equals the input, whatever the chunking and turn sizes).
#include "server/compression_filter.h"

#include <brotli/decode.h>
#include <zlib.h>
#include <zstd.h>

#include <random>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace tidegate::dataplane::server {
namespace {

namespace http = boost::beast::http;

TEST(Compression, AcceptEncodingIsNegotiatedByQValues) {
  struct Case {
    std::string_view accept;
    ContentCoding want;
  };
  const Case cases[] = {
      {"gzip", ContentCoding::kGzip},
      {"gzip, deflate, br", ContentCoding::kBrotli},  // equal q: br
      {"br;q=0.5, gzip", ContentCoding::kGzip},
      {"br;q=1.0, gzip;q=0.8", ContentCoding::kBrotli},
      {"GZIP;Q=0.3", ContentCoding::kGzip},
      {"x-gzip", ContentCoding::kGzip},
      {"*", ContentCoding::kBrotli},
      {"*;q=0.5, br;q=0", ContentCoding::kGzip},  // br refused, gzip through *
      {"gzip;q=0", ContentCoding::kNone},
      {"identity", ContentCoding::kNone},
      {"deflate", ContentCoding::kNone},
      {"", ContentCoding::kNone},
      {"gzip;q=2", ContentCoding::kNone},  // malformed q: the element is skipped
      {"gzip;q=0.0001", ContentCoding::kNone},
      {" br ; q=0.9 ,gzip;q=0.95", ContentCoding::kGzip},
      {"gzip, deflate, br, zstd", ContentCoding::kBrotli},  // equal q: br, then zstd
      {"gzip, zstd", ContentCoding::kZstd},
      {"ZSTD;q=0.9, gzip;q=0.8, br;q=0.5", ContentCoding::kZstd},
      {"zstd;q=0.5, gzip", ContentCoding::kGzip},
      {"zstd;q=0, gzip;q=0", ContentCoding::kNone},
      {"*;q=0.5, zstd;q=0.4, br;q=0", ContentCoding::kGzip},
      {"*, br;q=0, gzip;q=0", ContentCoding::kNone},  // "*" never means zstd
  };
  for (const auto& c : cases) EXPECT_EQ(negotiate_coding(c.accept), c.want) << c.accept;
}

struct Head {
  unsigned status = 200;
  std::string type = "text/html; charset=utf-8";
  std::string encoding;
  std::string cache_control;
  std::string etag = "\"v1\"";
  std::string vary;
  std::optional<uint64_t> length = 1000;
  bool range = false;
  unsigned version = 11;
  bool body = true;
};

// Whether the filter takes the response, and the head it leaves.
std::pair<bool, http::response_header<Fields>> decide(const model::Compression& config,
                                                      std::string_view accept, const Head& h) {
  CompressionFilter f;
  f.configure(&config, accept);
  http::response_header<Fields> head;
  head.result(h.status);
  head.set(http::field::content_type, h.type);
  if (!h.encoding.empty()) head.set(http::field::content_encoding, h.encoding);
  if (!h.cache_control.empty()) head.set(http::field::cache_control, h.cache_control);
  if (!h.etag.empty()) head.set(http::field::etag, h.etag);
  if (!h.vary.empty()) head.set(http::field::vary, h.vary);
  if (h.length) head.set(http::field::content_length, std::to_string(*h.length));
  if (h.range) head.set(http::field::content_range, "bytes 0-9/100");
  ResponseFilterContext ctx;
  ctx.status = h.status;
  ctx.content_length = h.length;
  ctx.client_version = h.version;
  ctx.body_expected = h.body;
  const bool took = f.on_headers(head, ctx);
  return {took, head};
}

TEST(Compression, WhichResponsesAreCompressed) {
  const model::Compression config;
  struct Case {
    std::string name;
    Head head;
    bool want;
  };
  auto with = [](auto edit) {
    Head h;
    edit(h);
    return h;
  };
  const Case cases[] = {
      {"html", Head{}, true},
      {"css", with([](Head& h) { h.type = "text/css"; }), true},
      {"json, upper case type", with([](Head& h) { h.type = "Application/JSON"; }), true},
      {"404 page", with([](Head& h) { h.status = 404; }), true},
      {"a png", with([](Head& h) { h.type = "image/png"; }), false},
      {"no type", with([](Head& h) { h.type = ""; }), false},
      {"already gzip", with([](Head& h) { h.encoding = "gzip"; }), false},
      {"identity is not an encoding", with([](Head& h) { h.encoding = "identity"; }), true},
      {"no-transform", with([](Head& h) { h.cache_control = "public, no-transform"; }), false},
      {"a range", with([](Head& h) { h.range = true; }), false},
      {"206", with([](Head& h) { h.status = 206; }), false},
      {"301", with([](Head& h) { h.status = 301; }), false},
      {"shorter than 256", with([](Head& h) { h.length = 255; }), false},
      {"256", with([](Head& h) { h.length = 256; }), true},
      {"length unknown (chunked)", with([](Head& h) { h.length.reset(); }), true},
      {"HTTP/1.0 client", with([](Head& h) { h.version = 10; }), false},
      {"HTTP/2 client", with([](Head& h) { h.version = 20; }), true},
      {"no body (HEAD)", with([](Head& h) { h.body = false; }), false},
  };
  for (const auto& c : cases) {
    auto [took, head] = decide(config, "gzip, br", c.head);
    EXPECT_EQ(took, c.want) << c.name;
    if (!took) continue;
    EXPECT_EQ(head[http::field::content_encoding], "br") << c.name;
    EXPECT_EQ(head.find(http::field::content_length), head.end()) << c.name;
    EXPECT_EQ(head[http::field::vary], "Accept-Encoding") << c.name;
    EXPECT_EQ(head[http::field::etag], "W/\"v1\"") << c.name;
  }
  // Vary is merged, a weak ETag stays as it is; a client without gzip or br gets the identity
  // body, with Vary all the same (caches must keep both versions).
  auto [took, head] = decide(config, "gzip", with([](Head& h) {
                               h.vary = "Origin";
                               h.etag = "W/\"x\"";
                             }));
  EXPECT_TRUE(took);
  EXPECT_EQ(head[http::field::vary], "Origin, Accept-Encoding");
  EXPECT_EQ(head[http::field::etag], "W/\"x\"");
  EXPECT_EQ(head[http::field::content_encoding], "gzip");
  auto [plain_took, plain] = decide(config, "identity", Head{});
  EXPECT_FALSE(plain_took);
  EXPECT_EQ(plain[http::field::vary], "Accept-Encoding");
  EXPECT_EQ(plain[http::field::content_length], "1000");
  // A route's own type list replaces the default; min_length 0 takes any length.
  model::Compression own;
  own.types = {"application/wasm"};
  own.min_length = 0;
  EXPECT_TRUE(decide(own, "br", with([](Head& h) {
                       h.type = "application/wasm";
                       h.length = 1;
                     }))
                  .first);
  EXPECT_FALSE(decide(own, "br", Head{}).first);
}

std::string gunzip(const std::string& in) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  std::string out;
  int rv = Z_OK;
  while (rv == Z_OK) {
    char buf[16384];
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rv = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - zs.avail_out);
    if (rv == Z_BUF_ERROR && zs.avail_in == 0) break;
  }
  EXPECT_EQ(rv, Z_STREAM_END) << "the gzip stream must end";
  inflateEnd(&zs);
  return out;
}

std::string unzstd(const std::string& in) {
  ZSTD_DCtx* d = ZSTD_createDCtx();
  ZSTD_inBuffer input{in.data(), in.size(), 0};
  std::string out;
  size_t rv = 1;
  while (input.pos < input.size) {
    char buf[16384];
    ZSTD_outBuffer output{buf, sizeof(buf), 0};
    rv = ZSTD_decompressStream(d, &output, &input);
    out.append(buf, output.pos);
    if (ZSTD_isError(rv)) break;
  }
  EXPECT_EQ(rv, 0u) << "the zstd frame must end";
  ZSTD_freeDCtx(d);
  return out;
}

std::string unbrotli(const std::string& in) {
  BrotliDecoderState* s = BrotliDecoderCreateInstance(nullptr, nullptr, nullptr);
  const uint8_t* next_in = reinterpret_cast<const uint8_t*>(in.data());
  size_t avail_in = in.size();
  std::string out;
  BrotliDecoderResult rv = BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT;
  while (rv == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT) {
    uint8_t buf[16384];
    uint8_t* next_out = buf;
    size_t avail_out = sizeof(buf);
    rv = BrotliDecoderDecompressStream(s, &avail_in, &next_in, &avail_out, &next_out, nullptr);
    out.append(reinterpret_cast<char*>(buf), sizeof(buf) - avail_out);
  }
  EXPECT_EQ(rv, BROTLI_DECODER_RESULT_SUCCESS) << "the brotli stream must end";
  BrotliDecoderDestroyInstance(s);
  return out;
}

TEST(Compression, BreachMitigation) {
  model::Compression no_credentials;
  no_credentials.breach = model::BreachMitigation::kNoCredentials;
  model::Compression padding;
  padding.breach = model::BreachMitigation::kPadding;
  CompressionFilter f;
  ResponseFilterContext ctx;
  // on_headers() of a text/html head; the head is handed to `check`.
  auto decide = [&](const model::Compression& config, std::string_view accept, bool credentials,
                    auto check) {
    f.configure(&config, accept, credentials);
    http::response_header<Fields> h;
    h.set(http::field::content_type, "text/html");
    const bool took = f.on_headers(h, ctx);
    check(took, h);
    f.on_end();
  };
  // no-credentials: a request with a Cookie or Authorization gets the identity body (with Vary).
  decide(no_credentials, "gzip", true, [](bool took, auto& h) {
    EXPECT_FALSE(took);
    EXPECT_EQ(h[http::field::vary], "Accept-Encoding");
  });
  decide(no_credentials, "gzip", false, [](bool took, auto&) { EXPECT_TRUE(took); });
  // padding: a field of random length on every compressed response, none on others.
  std::set<size_t> lengths;
  for (int i = 0; i < 40; ++i) {
    decide(padding, "br", true, [&](bool took, auto& h) {
      ASSERT_TRUE(took);
      const auto pad = h[CompressionFilter::kPaddingField];
      EXPECT_GE(pad.size(), 1u);
      EXPECT_LE(pad.size(), 256u);
      lengths.insert(pad.size());
    });
  }
  EXPECT_GT(lengths.size(), 10u) << "the lengths must vary";
  decide(padding, "identity", false, [](bool took, auto& h) {
    EXPECT_FALSE(took);
    EXPECT_EQ(h.find(CompressionFilter::kPaddingField), h.end());
  });
}

TEST(Compression, OutputDecompressesToTheInputWhateverTheChunks) {
  std::mt19937 rng(20261202);
  const model::Compression config;
  CompressionFilter f;  // one filter for every response: its coders are reused
  for (int trial = 0; trial < 24; ++trial) {
    // Text-like input (compressible) of 0..300 KiB, some trials with random bytes.
    const size_t size = trial == 0 ? 0 : rng() % (300 * 1024);
    // Random bytes (incompressible) in some trials; words of a small vocabulary otherwise.
    const bool random_bytes = trial % 5 == 4;
    static const char* const kWords[] = {"<p>",    "shop",    "colour", "pencil", "the", "a",
                                         "</p>\n", "example", "price",  "of",     "and", "sale"};
    std::string body;
    while (body.size() < size) {
      if (random_bytes) {
        body += static_cast<char>(rng());
      } else {
        body += kWords[rng() % 12];
        body += ' ';
      }
    }
    body.resize(size);
    static constexpr const char* kCodings[] = {"gzip", "br", "zstd"};
    const std::string_view coding = kCodings[trial % 3];
    f.configure(&config, coding);
    http::response_header<Fields> head;
    head.set(http::field::content_type, "text/plain");
    ResponseFilterContext ctx;
    ASSERT_TRUE(f.on_headers(head, ctx));
    std::string out;
    size_t at = 0;
    do {
      const size_t n = std::min<size_t>(body.size() - at, 1 + rng() % 40000);
      const bool last = at + n == body.size();
      f.on_data(std::string_view(body).substr(at, n), last);
      at += n;
      bool more = true;
      while (more) {
        more = f.process();
        out += f.output();
        f.output().clear();
      }
    } while (at < body.size());
    ASSERT_TRUE(f.done()) << trial;
    f.on_end();
    EXPECT_EQ(coding == "gzip" ? gunzip(out)
              : coding == "br" ? unbrotli(out)
                               : unzstd(out),
              body)
        << "trial " << trial << " " << coding;
    if (!random_bytes && size > 10000) {
      EXPECT_LT(out.size(), size / 3) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace tidegate::dataplane::server
