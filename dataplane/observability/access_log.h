#pragma once
// Access logs (issue #6): one line per request (JSON by default, or a text template), formatted by
// the worker that served it into a reused buffer and queued in that worker's bounded
// single-producer/single-consumer byte ring. One background writer thread drains every ring into
// frames of whole lines (at most 64 KiB) and writes them to stdout or ships them to a collector
// over a Unix or TCP stream socket.
//
// The request path never blocks and never waits for the writer: when a worker's ring is full
// the line is dropped and counted (tidegate_access_log_dropped_lines_total{reason="queue_full"}).
// A collector that goes away is reconnected with exponential backoff; lines queued meanwhile
// wait in the rings (and overflow them, counted); a frame cut short by a broken connection is
// counted as reason="connection_lost". Frame format and fields: docs/observability.md.
//
// Usage:
//   AccessLog log(workers, options);  log.start();              // main
//   log.producer(worker_id).log(record);                        // request path, at the end
//   log.stop();                                                 // shutdown: flush, join

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <prometheus/metric_family.h>
#include <boost/asio/ip/tcp.hpp>

#include "observability/log_format.h"

namespace tidegate::dataplane::observability {

// Records and line layouts (AccessLogRecord, AccessLogLayout, LineFormatter, the caps and
// kMaxLineBytes): observability/log_format.h.

// "10.0.0.1:8080" / "[::1]:8080" into `buf`, without allocating.
std::string_view format_endpoint(const boost::asio::ip::tcp::endpoint& e, char (&buf)[64]);

// ---- Destination ----

struct LogDestination {
  enum class Kind { kStdout, kUnix, kTcp };
  Kind kind = Kind::kStdout;
  std::string path;  // kUnix
  std::string host;  // kTcp: IP literal or name (resolved by the writer at each connect)
  uint16_t port = 0;
};
// "stdout", "unix:/path/to.sock", "tcp:HOST:PORT" ("tcp:[::1]:5170"). nullopt + *error on
// anything else.
std::optional<LogDestination> parse_log_destination(std::string_view text, std::string* error);

// ---- Queue ----

// A single-producer single-consumer ring of bytes. Pushes are all or nothing. Capacity is a
// power of two. The producer caches the consumer's position and rereads it only when the ring
// looks full, so a push is a memcpy and one release store.
class SpscByteRing {
 public:
  explicit SpscByteRing(size_t capacity);
  size_t capacity() const { return mask_ + 1; }

  // Producer.
  bool try_push(std::string_view bytes) noexcept;

  // Consumer: the readable bytes as up to two spans; then consume(n) releases n of them.
  size_t readable(const char** first, size_t* first_size, const char** second,
                  size_t* second_size) const noexcept;
  void consume(size_t n) noexcept;

 private:
  std::unique_ptr<char[]> data_;
  size_t mask_;
  alignas(64) std::atomic<uint64_t> head_{0};  // written by the producer
  uint64_t cached_tail_ = 0;                   // producer's copy of tail_
  alignas(64) std::atomic<uint64_t> tail_{0};  // written by the consumer
};

// ---- The log ----

struct AccessLogOptions {
  AccessLogLayout layout = AccessLogLayout::json();  // AccessLogLayout::off(): no log
  LogDestination destination;
  // Per worker; rounded up to a power of two, at least 2 * kMaxLineBytes. About a second of
  // lines at 4,000 requests/s per worker, or 5 ms at 200,000 lines/s.
  size_t queue_bytes = 1 << 20;
  size_t frame_bytes = kMaxFrameBytes;  // clamped to [kMaxLineBytes, kMaxFrameBytes]
  // Writer polling when every ring was empty: starts at the minimum, doubles up to the maximum,
  // back to the minimum as soon as a line shows up. The maximum bounds the delay of a line. The
  // minimum sets how often the writer wakes while lines keep coming (at most 1,000 times a
  // second): each wake-up may preempt a worker on the same CPU, so it batches rather than
  // chasing every line (200 us cost ~0.2 wake-ups per request at 30,000 requests/s).
  std::chrono::microseconds idle_min{1'000};
  std::chrono::microseconds idle_max{10'000};
  // Reconnect backoff: doubles from initial to max, reset by a successful connect.
  std::chrono::milliseconds reconnect_initial{100};
  std::chrono::milliseconds reconnect_max{5'000};
  std::chrono::milliseconds connect_timeout{1'000};
  // A collector that takes no byte for this long is disconnected (its frame counted as lost) and
  // reconnected; 0 waits forever.
  std::chrono::milliseconds write_timeout{30'000};
  // stop(): how long the writer keeps flushing what is queued before it gives up.
  std::chrono::milliseconds stop_timeout{2'000};
  // Where kStdout writes (tests use a pipe). A pipe or terminal is reopened through
  // /proc/self/fd with O_NONBLOCK (a file description of our own: the process's fd 1, perhaps
  // shared with stderr, stays blocking); a socket is written with MSG_DONTWAIT; a regular file
  // is written as is. So a stalled reader of stdout cannot hold the writer past write_timeout
  // or stop() past stop_timeout either.
  int stdout_fd = 1;
};

// One worker's handle. log() is for that worker's thread only.
class AccessLogProducer {
 public:
  AccessLogProducer(const AccessLogLayout& layout, size_t queue_bytes);
  bool enabled() const noexcept { return formatter_.layout().format() != AccessLogFormat::kOff; }
  // Whether lines show `f`: the session looks up the headers behind a field (User-Agent,
  // Referer) only when they are logged.
  bool wants(LogField f) const noexcept { return formatter_.layout().uses(f); }
  // Formats `record` and queues it. Never blocks: returns false (and counts) when the queue is
  // full. The line buffer, sized for the layout's longest line, is allocated once here, so
  // logging never allocates.
  bool log(const AccessLogRecord& record);
  uint64_t queued() const { return queued_.load(std::memory_order_relaxed); }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  friend class AccessLog;
  LineFormatter formatter_;
  std::unique_ptr<char[]> line_;  // layout().max_line_bytes()
  SpscByteRing ring_;
  std::atomic<uint64_t> queued_{0};   // written by the producer only
  std::atomic<uint64_t> dropped_{0};  // written by the producer only
};

class AccessLog {
 public:
  AccessLog(size_t workers, AccessLogOptions options);
  ~AccessLog();  // stop()
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  bool enabled() const { return options_.layout.format() != AccessLogFormat::kOff; }
  AccessLogProducer& producer(size_t worker) { return *producers_.at(worker); }

  void start();  // starts the writer thread (nothing when the layout is off)
  // Flushes what is queued (up to stop_timeout) and joins the writer. Idempotent.
  void stop();

  struct Stats {
    uint64_t lines_queued = 0;
    uint64_t dropped_queue_full = 0;
    uint64_t dropped_connection_lost = 0;
    uint64_t dropped_at_stop = 0;  // still queued when stop() gave up (collector unreachable)
    uint64_t lines_written = 0;
    uint64_t frames_written = 0;
    uint64_t bytes_written = 0;
    uint64_t connects = 0;
    uint64_t connect_failures = 0;
    uint64_t disconnects = 0;
    bool connected = false;
  };
  Stats stats() const;  // any thread
  // tidegate_access_log_* families, for Metrics::add_source.
  void append_metrics(std::vector<prometheus::MetricFamily>& out) const;

 private:
  void run();
  bool fill_frame();  // moves whole lines from the rings into frame_; true if any
  // Writes frame_ out; false when the connection broke (frame_ then counted lost).
  bool write_frame();
  bool ensure_connected(std::chrono::steady_clock::time_point now);
  void open_stdout();
  bool peer_closed();
  void disconnect();
  bool stopping() const { return stop_.load(std::memory_order_acquire); }
  // True once stop() was called more than stop_timeout ago.
  bool past_stop_deadline(std::chrono::steady_clock::time_point now);
  void sleep_for(std::chrono::microseconds d);

  AccessLogOptions options_;
  std::vector<std::unique_ptr<AccessLogProducer>> producers_;
  std::thread writer_;
  std::atomic<bool> stop_{false};
  std::mutex sleep_mutex_;  // writer's sleeps only, so that stop() can cut them short
  std::condition_variable sleep_cv_;

  // Writer thread state.
  std::string frame_;
  size_t frame_lines_ = 0;
  int fd_ = -1;
  std::chrono::milliseconds backoff_{0};
  bool fd_is_socket_ = false;
  int owned_stdout_fd_ = -1;  // the non-blocking reopening of stdout_fd, if any
  std::chrono::steady_clock::time_point next_connect_{};
  std::optional<std::chrono::steady_clock::time_point> stop_deadline_;

  // Written by the writer, read by stats().
  std::atomic<uint64_t> dropped_connection_lost_{0};
  std::atomic<uint64_t> dropped_at_stop_{0};
  std::atomic<uint64_t> lines_written_{0};
  std::atomic<uint64_t> frames_written_{0};
  std::atomic<uint64_t> bytes_written_{0};
  std::atomic<uint64_t> connects_{0};
  std::atomic<uint64_t> connect_failures_{0};
  std::atomic<uint64_t> disconnects_{0};
  std::atomic<bool> connected_{false};
};

}  // namespace tidegate::dataplane::observability
