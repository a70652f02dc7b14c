// tidegate-bench-logs: how many access log lines per second one thread can log with the shipper
// on, to a local collector that reads. The producer formats a realistic record and queues it
// (AccessLogProducer::log, exactly what a worker calls); the writer thread ships frames over a
// Unix socket to a collector thread that reads and counts lines. Run by bench/logs.sh.
//
// Usage: tidegate-bench-logs [--seconds S] [--queue-bytes N] [--socket PATH] [--format json|text]
// (text: the default template, kDefaultTextTemplate)

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "observability/access_log.h"

using namespace tidegate::dataplane::observability;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  double seconds = 2;
  size_t queue_bytes = 1 << 20;
  std::string path = "/tmp/tidegate-bench-logs-" + std::to_string(::getpid()) + ".sock";
  std::string format = "json";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) {
      seconds = std::atof(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--queue-bytes") == 0) {
      queue_bytes = static_cast<size_t>(std::atoll(argv[i + 1]));
    } else if (std::strcmp(argv[i], "--socket") == 0) {
      path = argv[i + 1];
    } else if (std::strcmp(argv[i], "--format") == 0) {
      format = argv[i + 1];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--seconds S] [--queue-bytes N] [--socket PATH] "
                   "[--format json|text]\n",
                   argv[0]);
      return 2;
    }
  }
  std::string error;
  auto layout = access_log_layout_from_flags(format, std::nullopt, std::nullopt, &error);
  if (!layout || layout->format() == AccessLogFormat::kOff) {
    std::fprintf(stderr, "--format must be json or text\n");
    return 2;
  }

  // The collector: accepts one connection, reads everything, counts lines.
  ::unlink(path.c_str());
  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  std::snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path.c_str());
  if (::bind(listener, reinterpret_cast<sockaddr*>(&sun), sizeof sun) != 0 ||
      ::listen(listener, 1) != 0) {
    std::perror("collector");
    return 1;
  }
  std::atomic<uint64_t> received{0};
  std::atomic<int64_t> last_byte_ns{0};
  std::thread collector([&] {
    int c = ::accept(listener, nullptr, nullptr);
    static char buf[1 << 16];
    ssize_t n;
    while ((n = ::read(c, buf, sizeof buf)) > 0) {
      uint64_t lines = 0;
      for (const char* p = buf;
           (p = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(buf + n - p))));
           ++p) {
        ++lines;
      }
      received.fetch_add(lines, std::memory_order_relaxed);
      last_byte_ns.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    }
    ::close(c);
  });

  AccessLogOptions options;
  options.layout = *layout;
  options.destination = *parse_log_destination("unix:" + path, &error);
  options.queue_bytes = queue_bytes;
  AccessLog log(1, options);
  log.start();
  AccessLogProducer& producer = log.producer(0);

  // A typical request: a ~355-byte JSON line, a ~290-byte text line (the default template).
  AccessLogRecord r;
  r.client = "10.244.1.17";
  r.method = "GET";
  r.host = "shop.example.com";
  r.path = "/api/v1/products/12345/reviews";
  r.status = 200;
  r.bytes_in = 412;
  r.bytes_out = 5120;
  r.duration = std::chrono::microseconds(1840);
  r.upstream_duration = std::chrono::microseconds(1530);
  r.upstream = "10.244.2.31:8080";
  r.ingress = "shop/storefront";
  r.service = "shop/storefront:80";
  r.http_version = 11;
  r.user_agent = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
  r.referer = "https://shop.example.com/products/12345";
  char id[32];

  r.time = std::chrono::system_clock::now();
  r.request_id = "0123456789abcdef";
  std::string sample_line;
  LineFormatter(*layout).format(r, sample_line);
  const size_t line_bytes = sample_line.size();

  const auto start = Clock::now();
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  uint64_t offered = 0;
  auto now = start;
  while (now < end) {
    for (int batch = 0; batch < 256; ++batch) {  // read the clock every 256 lines
      r.time = std::chrono::system_clock::now();
      int n = std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(offered));
      r.request_id = std::string_view(id, static_cast<size_t>(n));
      producer.log(r);
      ++offered;
    }
    now = Clock::now();
  }
  const double produced_s = std::chrono::duration<double>(now - start).count();
  log.stop();  // flushes what is queued
  ::shutdown(listener, SHUT_RDWR);
  collector.join();
  ::close(listener);
  ::unlink(path.c_str());

  const auto s = log.stats();
  const double delivered_s = std::max(
      produced_s,
      std::chrono::duration<double>(Clock::time_point(Clock::duration(last_byte_ns.load())) - start)
          .count());
  const double offered_rate = static_cast<double>(offered) / produced_s;
  const double delivered_rate = static_cast<double>(received.load()) / delivered_s;
  std::printf("format %s, %zu-byte lines\n", format.c_str(), line_bytes);
  std::printf("producer: %llu lines in %.2f s = %.0f lines/s offered (%.0f ns per log call)\n",
              static_cast<unsigned long long>(offered), produced_s, offered_rate,
              1e9 / offered_rate);
  std::printf(
      "collector: %llu lines received = %.0f lines/s delivered; dropped (queue full) %llu "
      "(%.2f%%), %llu frames, %.1f MB\n",
      static_cast<unsigned long long>(received.load()), delivered_rate,
      static_cast<unsigned long long>(s.dropped_queue_full),
      100.0 * static_cast<double>(s.dropped_queue_full) / static_cast<double>(offered),
      static_cast<unsigned long long>(s.frames_written),
      static_cast<double>(s.bytes_written) / 1e6);
  std::printf("lines/s logged and delivered by one thread: %.0f (target 200000)\n", delivered_rate);
  return received.load() == s.lines_written ? 0 : 1;
}
