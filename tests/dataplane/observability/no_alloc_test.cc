// The request path's observability calls never allocate: WorkerMetrics::record_* and, once its
// line buffer has grown, AccessLogProducer::log. Proved with a counting global operator new that
// counts only on the calling thread while a test asks it to (it forwards to malloc/free
// otherwise, so the rest of the test binary is unaffected).

#include <cstdlib>
#include <new>

#include <gtest/gtest.h>

#include "observability/access_log.h"
#include "observability/metrics.h"

// Under AddressSanitizer the runtime supplies every operator new/delete form itself (nothrow and
// array forms included, which would then not forward to a replacement here), so the counting
// allocator and these tests exist only in ordinary builds, where libstdc++ forwards every form
// to the two replaced below.
#if defined(__SANITIZE_ADDRESS__)
#define TIDEGATE_COUNTING_NEW 0
#else
#define TIDEGATE_COUNTING_NEW 1
#endif

namespace {
thread_local bool counting = false;
thread_local unsigned long allocations = 0;
}  // namespace

#if TIDEGATE_COUNTING_NEW
namespace {
// Out of line so that GCC does not pair an inlined malloc with a delete expression and warn
// (-Wmismatched-new-delete).
[[gnu::noinline]] void* counted_malloc(std::size_t n) {
  if (counting) ++allocations;
  return std::malloc(n == 0 ? 1 : n);
}
[[gnu::noinline]] void plain_free(void* p) { std::free(p); }
}  // namespace

void* operator new(std::size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { plain_free(p); }
void operator delete(void* p, std::size_t) noexcept { plain_free(p); }
#endif

namespace tidegate::dataplane::observability {
namespace {

using namespace std::chrono_literals;
namespace http = boost::beast::http;

// Counts operator new calls made by `f` on this thread.
template <class F>
unsigned long allocations_in(F&& f) {
  allocations = 0;
  counting = true;
  f();
  counting = false;
  return allocations;
}

TEST(NoAllocationTest, TheCounterSeesAllocations) {
  if (!TIDEGATE_COUNTING_NEW) GTEST_SKIP() << "no counting allocator under AddressSanitizer";
  // The instrument works: a std::string past the small-string buffer allocates.
  EXPECT_GT(allocations_in([] { std::string s(100, 'x'); }), 0u);
}

TEST(NoAllocationTest, RecordingMetricsNeverAllocates) {
  if (!TIDEGATE_COUNTING_NEW) GTEST_SKIP() << "no counting allocator under AddressSanitizer";
  Metrics metrics(1);
  const LabelSetId id = metrics.intern({"web", "shop", "foo.com", "web"});
  WorkerMetrics& w = metrics.worker(0);
  EXPECT_EQ(allocations_in([&] {
              for (int i = 0; i < 10'000; ++i) {
                w.connection_opened();
                w.tls_handshake(i % 7 != 0);
                w.record_upstream_connect(id, 200us);
                w.record_request({id, http::verb::get, 200, 100, 1000, 3ms, 2ms});
                w.record_request({kNoRouteLabels, http::verb::post, 404, 1, 2, 1ms, -1ns});
                w.record_rate_limited(id);
                w.record_substitution({.labels = id,
                                       .responses = 1,
                                       .bytes_in = 10,
                                       .bytes_out = 12,
                                       .replacements = 2,
                                       .rules_skipped = 1});
                w.tunnel_opened();
                w.tunnel_closed();
                w.connection_closed();
              }
            }),
            0u);
}

// A request whose fields need escaping in both renderings (invalid UTF-8, a quote, a newline, a
// bidi override).
AccessLogRecord record_to_escape() {
  AccessLogRecord r;
  r.time = std::chrono::system_clock::now();
  r.request_id = "0123456789abcdef0123456789abcdef";
  r.client = "10.0.0.1";
  r.method = "GET";
  r.host = "foo.com";
  r.path = "/a/b/\xff\"c\n";
  r.status = 200;
  r.upstream = "10.0.0.2:80";
  r.ingress = "shop/web";
  r.service = "shop/web:80";
  r.http_version = 11;
  r.user_agent = "Mozilla/5.0 (X11; Linux x86_64) \xe2\x80\xae";
  r.referer = "https://foo.com/?q=1";
  return r;
}

TEST(NoAllocationTest, LoggingAfterWarmUpNeverAllocates) {
  if (!TIDEGATE_COUNTING_NEW) GTEST_SKIP() << "no counting allocator under AddressSanitizer";
  AccessLogOptions o;
  o.queue_bytes = 1 << 20;
  AccessLog log(1, o);  // not started: the queue fills and then drops, both without allocating
  AccessLogProducer& p = log.producer(0);
  AccessLogRecord r = record_to_escape();
  p.log(r);  // warm-up: the line buffer grows once
  EXPECT_EQ(allocations_in([&] {
              for (int i = 0; i < 10'000; ++i) {
                r.time += 1ms;
                p.log(r);
              }
            }),
            0u);
  EXPECT_GT(p.dropped(), 0u) << "the drop path was exercised too";
}

TEST(NoAllocationTest, TextLinesAfterWarmUpNeverAllocate) {
  if (!TIDEGATE_COUNTING_NEW) GTEST_SKIP() << "no counting allocator under AddressSanitizer";
  AccessLogOptions o;
  o.queue_bytes = 1 << 20;
  std::string error;
  o.layout = *AccessLogLayout::text(kDefaultTextTemplate, &error);
  AccessLog log(1, o);
  AccessLogProducer& p = log.producer(0);
  AccessLogRecord r = record_to_escape();
  p.log(r);  // warm-up
  EXPECT_EQ(allocations_in([&] {
              for (int i = 0; i < 10'000; ++i) {
                r.time += 1ms;
                p.log(r);
              }
            }),
            0u);
  EXPECT_GT(p.dropped(), 0u) << "the drop path was exercised too";
}

}  // namespace
}  // namespace tidegate::dataplane::observability
