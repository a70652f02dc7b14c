// Tests for access logs: JSON escaping (a table, each output checked by a JSON parser), the line
// format, the SPSC ring, and the shipper against real collectors on a Unix socket and on
// loopback TCP: delivery in order, a stalled collector (the producer never blocks, lines are
// dropped and counted), and reconnection after the collector restarts.

#include "observability/access_log.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tidegate::dataplane::observability {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

// ---- JSON escaping ----

struct EscapeCase {
  const char* name;
  std::string input;
  std::string want;  // without the surrounding quotes
};

TEST(AccessLogJsonTest, EscapingTable) {
  const std::vector<EscapeCase> cases = {
      {"empty", "", ""},
      {"plain", "/index.html?a=b", "/index.html?a=b"},
      {"quote", "a\"b", "a\\\"b"},
      {"backslash", "a\\b", "a\\\\b"},
      {"short escapes", "\b\f\n\r\t", "\\b\\f\\n\\r\\t"},
      {"nul", std::string("a\0b", 3), "a\\u0000b"},
      {"other controls", "\x01\x1f", "\\u0001\\u001f"},
      {"del", "\x7f", "\\u007f"},
      {"slash is not escaped", "/a/b", "/a/b"},
      {"2-byte utf8", "caf\xc3\xa9", "caf\xc3\xa9"},
      {"3-byte utf8", "\xe2\x82\xac", "\xe2\x82\xac"},
      {"4-byte utf8", "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
      {"highest code point", "\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf"},
      {"lone continuation", "a\x80z", "a\\ufffdz"},
      {"invalid lead bytes", "\xff\xfe\xf5", "\\ufffd\\ufffd\\ufffd"},
      {"overlong 2-byte (C0 AF)", "\xc0\xaf", "\\ufffd\\ufffd"},
      {"overlong 3-byte (E0 80 AF)", "\xe0\x80\xaf", "\\ufffd\\ufffd\\ufffd"},
      {"surrogate (ED A0 80)", "\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd"},
      {"above U+10FFFF (F4 90 80 80)", "\xf4\x90\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd"},
      {"truncated 3-byte then ASCII",
       "\xe2\x82"
       "A",
       "\\ufffdA"},
      {"truncated 4-byte at the end", "x\xf0\x9f\x98", "x\\ufffd"},
      {"lead then quote", "\xc3\"", "\\ufffd\\\""},
      {"mixed", "\"\xc3\xa9\n\xff", "\\\"\xc3\xa9\\n\\ufffd"},
  };
  for (const auto& c : cases) {
    std::string out;
    append_json_string(out, c.input);
    EXPECT_EQ(out, "\"" + c.want + "\"") << c.name;
    // Whatever the input, the output is one valid JSON string.
    auto parsed = json::parse(out, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(parsed.is_discarded()) << c.name << ": " << out;
    ASSERT_TRUE(parsed.is_string()) << c.name;
  }
}

TEST(AccessLogJsonTest, ValidUtf8RoundTripsThroughAParser) {
  std::string all;
  for (int c = 1; c < 0x80; ++c) all.push_back(static_cast<char>(c));
  all += "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbd";
  std::string out;
  append_json_string(out, all);
  EXPECT_EQ(json::parse(out).get<std::string>(), all);
}

TEST(AccessLogJsonTest, RandomBytesAlwaysGiveValidJson) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string in(rng() % 40, '\0');
    for (auto& ch : in) ch = static_cast<char>(rng() % 256);
    std::string out;
    append_json_string(out, in);
    auto parsed = json::parse(out, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << out;
  }
}

TEST(AccessLogJsonTest, InputIsCutAtTheCap) {
  std::string out;
  append_json_string(out, "abcdef", 3);
  EXPECT_EQ(out, "\"abc\"");
  out.clear();
  append_json_string(out, "\xe2\x82\xac", 2);  // a sequence cut by the cap is ill-formed
  EXPECT_EQ(out, "\"\\ufffd\"");
}

// ---- Line format ----

AccessLogRecord sample(std::string_view request_id = "abc123") {
  AccessLogRecord r;
  r.time = std::chrono::system_clock::time_point(1'764'495'541'123ms);  // 2025-11-30T09:39:01.123Z
  r.request_id = request_id;
  r.client = "10.1.2.3";
  r.method = "GET";
  r.host = "foo.com";
  r.path = "/a\"b";
  r.status = 200;
  r.bytes_in = 120;
  r.bytes_out = 5000;
  r.duration = 12'345'678ns;
  r.upstream_duration = 1'500us;
  r.upstream = "10.0.0.7:8080";
  r.ingress = "shop/web";
  r.service = "shop/web:80";
  return r;
}

TEST(AccessLogFormatTest, OneJsonLinePerRecord) {
  LineFormatter f;
  std::string line;
  f.format(sample(), line);
  EXPECT_EQ(line, R"({"time":"2025-11-30T09:39:01.123Z","request_id":"abc123","client":"10.1.2.3",)"
                  R"("method":"GET","host":"foo.com","path":"/a\"b","status":200,"bytes_in":120,)"
                  R"("bytes_out":5000,"duration_ms":12.345,"upstream_duration_ms":1.500,)"
                  R"("upstream":"10.0.0.7:8080","ingress":"shop/web","service":"shop/web:80"})"
                  "\n");
  auto j = json::parse(line);
  EXPECT_EQ(j["path"], "/a\"b");
  EXPECT_EQ(j["status"], 200);
}

TEST(AccessLogFormatTest, MissingUpstreamIsNullAndTheSecondCacheFollowsTime) {
  LineFormatter f;
  AccessLogRecord r = sample();
  r.upstream_duration = -1ns;
  r.upstream = {};
  r.ingress = {};
  r.service = {};
  r.status = 404;
  std::string line;
  f.format(r, line);
  auto j = json::parse(line);
  EXPECT_TRUE(j["upstream_duration_ms"].is_null());
  EXPECT_TRUE(j["upstream"].is_null());
  EXPECT_TRUE(j["ingress"].is_null());
  EXPECT_TRUE(j["service"].is_null());

  r.time += 1s + 877ms;  // crosses two second boundaries
  line.clear();
  f.format(r, line);
  EXPECT_EQ(json::parse(line)["time"], "2025-11-30T09:39:03.000Z");
  r.time = std::chrono::system_clock::time_point(0ms);
  line.clear();
  f.format(r, line);
  EXPECT_EQ(json::parse(line)["time"], "1970-01-01T00:00:00.000Z");
}

TEST(AccessLogFormatTest, TheWorstLineFitsOneFrame) {
  const std::string controls(100'000, '\x01');  // every byte becomes a 6-byte escape
  AccessLogRecord r = sample();
  r.request_id = r.client = r.method = r.upstream = r.ingress = r.service = controls;
  r.host = r.path = controls;
  LineFormatter f;
  std::string line;
  f.format(r, line);
  EXPECT_LE(line.size(), kMaxLineBytes);
  auto j = json::parse(line);
  EXPECT_EQ(j["path"].get<std::string>().size(), kMaxLoggedPath);
  EXPECT_EQ(j["host"].get<std::string>().size(), kMaxLoggedHost);
}

TEST(AccessLogFormatTest, EndpointsFormatWithoutAllocating) {
  char buf[64];
  boost::asio::ip::tcp::endpoint v4(boost::asio::ip::make_address("10.0.0.7"), 8080);
  boost::asio::ip::tcp::endpoint v6(boost::asio::ip::make_address("::1"), 443);
  EXPECT_EQ(format_endpoint(v4, buf), "10.0.0.7:8080");
  EXPECT_EQ(format_endpoint(v6, buf), "[::1]:443");
}

TEST(AccessLogOptionsTest, FormatsAndDestinations) {
  EXPECT_EQ(parse_access_log_format("json"), AccessLogFormat::kJson);
  EXPECT_EQ(parse_access_log_format("off"), AccessLogFormat::kOff);
  EXPECT_EQ(parse_access_log_format("text"), AccessLogFormat::kText);
  EXPECT_EQ(parse_access_log_format("xml"), std::nullopt);
  std::string error;
  auto d = parse_log_destination("stdout", &error);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->kind, LogDestination::Kind::kStdout);
  d = parse_log_destination("unix:/run/collector.sock", &error);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->kind, LogDestination::Kind::kUnix);
  EXPECT_EQ(d->path, "/run/collector.sock");
  d = parse_log_destination("tcp:127.0.0.1:5170", &error);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->kind, LogDestination::Kind::kTcp);
  EXPECT_EQ(d->host, "127.0.0.1");
  EXPECT_EQ(d->port, 5170);
  d = parse_log_destination("tcp:[::1]:5170", &error);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->host, "::1");
  for (const char* bad : {"", "unix:", "tcp:host", "tcp:host:0", "udp:1.2.3.4:5", "file:/x"}) {
    EXPECT_FALSE(parse_log_destination(bad, &error)) << bad;
    EXPECT_FALSE(error.empty());
  }
  EXPECT_FALSE(parse_log_destination("unix:/" + std::string(200, 'x'), &error));
}

// ---- Ring ----

TEST(SpscByteRingTest, WrapsAroundAndRefusesWhatDoesNotFit) {
  SpscByteRing ring(64);
  ASSERT_EQ(ring.capacity(), 64u);
  EXPECT_TRUE(ring.try_push(std::string(40, 'a')));
  EXPECT_FALSE(ring.try_push(std::string(25, 'b'))) << "all or nothing";
  EXPECT_TRUE(ring.try_push(std::string(24, 'b')));
  EXPECT_FALSE(ring.try_push("c"));
  const char *a, *b;
  size_t an, bn;
  EXPECT_EQ(ring.readable(&a, &an, &b, &bn), 64u);
  ring.consume(40);
  EXPECT_TRUE(ring.try_push(std::string(30, 'c')));  // wraps
  EXPECT_EQ(ring.readable(&a, &an, &b, &bn), 54u);
  EXPECT_EQ(std::string(a, an), std::string(24, 'b'));
  EXPECT_EQ(std::string(b, bn), std::string(30, 'c'));
}

TEST(SpscByteRingTest, AProducerAndAConsumerThreadKeepTheByteStream) {
  SpscByteRing ring(256);
  constexpr int kRecords = 100'000;
  std::thread producer([&] {
    for (int i = 0; i < kRecords;) {
      std::string rec = std::to_string(i) + ";";
      if (ring.try_push(rec)) ++i;
    }
  });
  std::string got;
  int next = 0;
  while (next < kRecords) {
    const char *a, *b;
    size_t an, bn;
    size_t n = ring.readable(&a, &an, &b, &bn);
    got.append(a, an);
    got.append(b, bn);
    ring.consume(n);
    size_t semi;
    while ((semi = got.find(';')) != std::string::npos) {
      ASSERT_EQ(got.substr(0, semi), std::to_string(next));
      got.erase(0, semi + 1);
      ++next;
    }
  }
  producer.join();
}

// ---- Shipper ----

// A log collector for tests: listens on a Unix socket (or TCP on loopback), accepts one
// connection at a time and reads everything into `data`, unless `stall` (accept, never read).
class Collector {
 public:
  static std::string temp_path() {
    static std::atomic<int> n{0};
    return "/tmp/tg-obs-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".sock";
  }

  explicit Collector(std::string unix_path, bool stall = false)
      : path_(std::move(unix_path)), stall_(stall) {
    ::unlink(path_.c_str());
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path_.c_str());
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&sun), sizeof sun), 0);
    EXPECT_EQ(::listen(listener_, 8), 0);
    thread_ = std::thread([this] { run(); });
  }

  // TCP on 127.0.0.1, port 0.
  Collector() : stall_(false) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
    EXPECT_EQ(::listen(listener_, 8), 0);
    socklen_t len = sizeof sin;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&sin), &len);
    port_ = ntohs(sin.sin_port);
    thread_ = std::thread([this] { run(); });
  }

  ~Collector() { stop(); }

  // Closes the connection and the listener (and removes the socket file).
  void stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    thread_.join();  // run() closes the listener, then the connection
  }

  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }

  std::vector<std::string> lines() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    size_t start = 0, nl;
    while ((nl = data_.find('\n', start)) != std::string::npos) {
      out.push_back(data_.substr(start, nl - start));
      start = nl + 1;
    }
    return out;
  }

  // Waits (up to 20 s) until at least n whole lines arrived.
  bool wait_lines(size_t n) {
    for (int i = 0; i < 2000; ++i) {
      if (lines().size() >= n) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

 private:
  void run() {
    int conn = -1;
    char buf[65536];
    while (!stop_) {
      pollfd pfd{conn >= 0 ? conn : listener_, POLLIN, 0};
      if (conn >= 0 && stall_) pfd.fd = listener_;  // never read the connection
      if (::poll(&pfd, 1, 10) != 1) continue;
      if (pfd.fd == listener_) {
        int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        if (conn >= 0) ::close(conn);
        conn = c;
        accepted_++;
        continue;
      }
      ssize_t n = ::read(conn, buf, sizeof buf);
      if (n <= 0) {
        ::close(conn);
        conn = -1;
        continue;
      }
      std::lock_guard lock(mutex_);
      data_.append(buf, static_cast<size_t>(n));
    }
    // The listener first: the writer reconnects as soon as it sees its connection close, and
    // must then find nobody listening — not a backlog that accepts it and is reset a moment
    // later (a second disconnect the reconnection test does not expect).
    ::close(listener_);
    if (!path_.empty()) ::unlink(path_.c_str());
    if (conn >= 0) ::close(conn);
  }

  std::string path_;
  bool stall_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::mutex mutex_;
  std::string data_;
};

AccessLogOptions unix_options(const std::string& path) {
  AccessLogOptions o;
  std::string error;
  o.destination = *parse_log_destination("unix:" + path, &error);
  o.reconnect_initial = 10ms;
  o.reconnect_max = 50ms;
  return o;
}

// Logs lines with request ids "<prefix><i>" from `from` to `to` - 1 on producer `p`.
void log_range(AccessLogProducer& p, const std::string& prefix, int from, int to) {
  for (int i = from; i < to; ++i) {
    std::string id = prefix + std::to_string(i);
    p.log(sample(id));
  }
}

TEST(AccessLogShipperTest, DeliversEveryLineInOrderToAUnixCollector) {
  const std::string path = Collector::temp_path();
  Collector collector(path);
  AccessLogOptions o = unix_options(path);
  o.queue_bytes = 4 << 20;  // holds every line: this test is about delivery, not drops
  AccessLog log(2, o);
  log.start();
  constexpr int kLines = 5000;
  std::thread other([&] { log_range(log.producer(1), "b", 0, kLines); });
  log_range(log.producer(0), "a", 0, kLines);
  other.join();
  ASSERT_TRUE(collector.wait_lines(2 * kLines));
  int next_a = 0, next_b = 0;
  for (const auto& line : collector.lines()) {
    auto j = json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    const std::string id = j["request_id"];
    // Each worker's lines arrive in the order it logged them.
    if (id[0] == 'a') {
      EXPECT_EQ(id, "a" + std::to_string(next_a++));
    } else {
      EXPECT_EQ(id, "b" + std::to_string(next_b++));
    }
  }
  EXPECT_EQ(next_a, kLines);
  EXPECT_EQ(next_b, kLines);
  log.stop();
  auto s = log.stats();
  EXPECT_EQ(s.lines_queued, 2u * kLines);
  EXPECT_EQ(s.lines_written, 2u * kLines);
  EXPECT_EQ(s.dropped_queue_full + s.dropped_connection_lost + s.dropped_at_stop, 0u);
  EXPECT_EQ(s.connects, 1u);
  EXPECT_GE(s.frames_written, 1u);
  // Frames hold whole lines, at most 64 KiB each: at least bytes / 64 KiB frames.
  EXPECT_GE(s.frames_written * kMaxFrameBytes, s.bytes_written);
}

TEST(AccessLogShipperTest, ShipsOverLoopbackTcp) {
  Collector collector;  // TCP
  AccessLogOptions o;
  std::string error;
  o.destination =
      *parse_log_destination("tcp:127.0.0.1:" + std::to_string(collector.port()), &error);
  AccessLog log(1, o);
  log.start();
  log_range(log.producer(0), "t", 0, 100);
  ASSERT_TRUE(collector.wait_lines(100));
  EXPECT_EQ(json::parse(collector.lines()[99])["request_id"], "t99");
}

TEST(AccessLogShipperTest, StdoutDestinationWritesToTheGivenDescriptor) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  AccessLogOptions o;
  o.stdout_fd = fds[1];
  {
    AccessLog log(1, o);
    log.start();
    log_range(log.producer(0), "s", 0, 3);
    log.stop();  // flushes
    EXPECT_EQ(log.stats().lines_written, 3u);
  }
  ::close(fds[1]);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  EXPECT_EQ(std::count(got.begin(), got.end(), '\n'), 3);
  EXPECT_NE(got.find("\"request_id\":\"s2\""), std::string::npos);
}

TEST(AccessLogShipperTest, AStalledStdoutPipeHoldsNeitherTheWorkerNorStop) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);  // nobody reads fds[0]: a container runtime that stopped reading
  AccessLogOptions o;
  o.stdout_fd = fds[1];
  o.queue_bytes = 128 * 1024;
  o.write_timeout = 0ms;
  o.stop_timeout = 200ms;
  {
    AccessLog log(1, o);
    log.start();
    constexpr uint64_t kLines = 50'000;  // ~18 MB, the pipe holds 64 KiB
    for (uint64_t i = 0; i < kLines; ++i) log.producer(0).log(sample("p"));
    auto s = log.stats();
    EXPECT_EQ(s.lines_queued + s.dropped_queue_full, kLines);
    EXPECT_GT(s.dropped_queue_full, 0u);
    // stop() returns although the pipe stays full (a blocking write would never return), and
    // every queued line is accounted for.
    auto stopped = std::async(std::launch::async, [&log] { log.stop(); });
    if (stopped.wait_for(60s) != std::future_status::ready) {
      std::fprintf(stderr, "FAILED: AccessLog::stop() blocked on a stalled stdout pipe\n");
      std::abort();
    }
    s = log.stats();
    EXPECT_EQ(s.lines_written + s.dropped_connection_lost + s.dropped_at_stop, s.lines_queued);
    EXPECT_GT(s.dropped_connection_lost + s.dropped_at_stop, 0u);
  }
  // The process's own descriptor was left blocking: only the writer's reopening is not.
  EXPECT_EQ(::fcntl(fds[1], F_GETFL) & O_NONBLOCK, 0);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(AccessLogShipperTest, OffLogsNothingAndStartsNoWriter) {
  AccessLogOptions o;
  o.layout = AccessLogLayout::off();
  AccessLog log(1, o);
  log.start();
  EXPECT_FALSE(log.enabled());
  EXPECT_FALSE(log.producer(0).enabled());
  EXPECT_FALSE(log.producer(0).log(sample()));
  EXPECT_EQ(log.stats().lines_queued, 0u);
  EXPECT_EQ(log.stats().dropped_queue_full, 0u);
}

TEST(AccessLogShipperTest, AStalledCollectorMakesTheWorkerDropAndCountNeverWait) {
  const std::string path = Collector::temp_path();
  Collector collector(path, /*stall=*/true);
  AccessLogOptions o = unix_options(path);
  o.queue_bytes = 128 * 1024;
  o.write_timeout = 0ms;  // wait for the collector forever: only the queue protects the worker
  o.stop_timeout = 200ms;
  AccessLog log(1, o);
  log.start();

  // Far more than the socket buffers and the queue hold (~80 MB of lines). If log() ever waited
  // for the writer, this would never finish: the collector never reads.
  constexpr uint64_t kLines = 200'000;
  auto producer = std::async(std::launch::async, [&] {
    uint64_t accepted = 0;
    for (uint64_t i = 0; i < kLines; ++i) accepted += log.producer(0).log(sample("x")) ? 1 : 0;
    return accepted;
  });
  if (producer.wait_for(60s) != std::future_status::ready) {
    // The future's destructor would wait for the blocked producer forever: fail loudly instead.
    std::fprintf(stderr, "FAILED: AccessLogProducer::log() blocked on a stalled collector\n");
    std::abort();
  }
  const uint64_t accepted = producer.get();

  auto s = log.stats();
  EXPECT_EQ(collector.accepted(), 1);
  EXPECT_EQ(s.lines_queued, accepted);
  EXPECT_EQ(s.lines_queued + s.dropped_queue_full, kLines) << "every line queued or counted";
  EXPECT_GT(s.dropped_queue_full, kLines / 2);
  // What went out is bounded by the socket buffers: the writer is stuck, not draining.
  EXPECT_LT(s.lines_written, 10'000u);

  std::vector<prometheus::MetricFamily> families;
  log.append_metrics(families);
  bool found = false;
  for (const auto& f : families) {
    if (f.name != "tidegate_access_log_dropped_lines_total") continue;
    for (const auto& m : f.metric) {
      if (m.label.at(0).value == "queue_full") {
        EXPECT_EQ(m.counter.value, static_cast<double>(s.dropped_queue_full));
        found = true;
      }
    }
  }
  EXPECT_TRUE(found);

  // stop() gives up on the stalled frame after stop_timeout and accounts for every line.
  log.stop();
  s = log.stats();
  EXPECT_EQ(s.lines_written + s.dropped_connection_lost + s.dropped_at_stop, s.lines_queued);
  EXPECT_GT(s.dropped_connection_lost + s.dropped_at_stop, 0u);
}

TEST(AccessLogShipperTest, AWriteTimeoutDisconnectsAStalledCollector) {
  const std::string path = Collector::temp_path();
  Collector collector(path, /*stall=*/true);
  AccessLogOptions o = unix_options(path);
  o.write_timeout = 100ms;
  AccessLog log(1, o);
  log.start();
  for (int i = 0; i < 20'000 && log.stats().disconnects == 0; ++i) {
    log_range(log.producer(0), "w", 0, 100);
    std::this_thread::sleep_for(1ms);
  }
  auto s = log.stats();
  EXPECT_GE(s.disconnects, 1u);
  EXPECT_GT(s.dropped_connection_lost, 0u);
  // ...and reconnects: the collector accepts again.
  for (int i = 0; i < 500 && collector.accepted() < 2; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GE(collector.accepted(), 2);
}

TEST(AccessLogShipperTest, ReconnectsWhenTheCollectorRestarts) {
  const std::string path = Collector::temp_path();
  AccessLog log(1, unix_options(path));
  auto first = std::make_unique<Collector>(path);
  log.start();
  log_range(log.producer(0), "first", 0, 100);
  ASSERT_TRUE(first->wait_lines(100));
  first->stop();
  first.reset();

  // Collector down: the writer notices, fails to reconnect and backs off; lines wait queued.
  for (int i = 0; i < 500 && log.stats().connect_failures < 2; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  auto s = log.stats();
  EXPECT_EQ(s.disconnects, 1u);
  EXPECT_GE(s.connect_failures, 2u);
  EXPECT_FALSE(s.connected);
  log_range(log.producer(0), "during", 0, 50);

  Collector second(path);
  log_range(log.producer(0), "after", 0, 50);
  ASSERT_TRUE(second.wait_lines(100));
  auto lines = second.lines();
  EXPECT_EQ(json::parse(lines.front())["request_id"], "during0");
  EXPECT_EQ(json::parse(lines.back())["request_id"], "after49");
  s = log.stats();
  EXPECT_EQ(s.connects, 2u);
  EXPECT_TRUE(s.connected);
  EXPECT_EQ(s.lines_written, 200u);
  EXPECT_EQ(s.dropped_queue_full + s.dropped_connection_lost, 0u);
}

}  // namespace
}  // namespace tidegate::dataplane::observability
