#include "observability/access_log.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cli/flags.h"

namespace tidegate::dataplane::observability {

using Clock = std::chrono::steady_clock;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

namespace {

// Lines in [p, p + n): memchr is vectorised, a byte loop is not at -O2.
size_t count_lines(const char* p, size_t n) {
  size_t lines = 0;
  const char* end = p + n;
  while (p < end) {
    const void* nl = std::memchr(p, '\n', static_cast<size_t>(end - p));
    if (nl == nullptr) break;
    ++lines;
    p = static_cast<const char*>(nl) + 1;
  }
  return lines;
}

}  // namespace

std::string_view format_endpoint(const boost::asio::ip::tcp::endpoint& e, char (&buf)[64]) {
  const auto* sa = e.data();
  char addr[INET6_ADDRSTRLEN] = {};
  size_t n = 0;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, addr, sizeof addr);
    n = static_cast<size_t>(std::snprintf(buf, sizeof buf, "%s:%u", addr, e.port()));
  } else if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof addr);
    n = static_cast<size_t>(std::snprintf(buf, sizeof buf, "[%s]:%u", addr, e.port()));
  }
  return std::string_view(buf, std::min(n, sizeof buf - 1));
}

std::optional<LogDestination> parse_log_destination(std::string_view text, std::string* error) {
  LogDestination d;
  if (text == "stdout" || text == "-") return d;
  if (text.starts_with("unix:")) {
    d.kind = LogDestination::Kind::kUnix;
    d.path = std::string(text.substr(5));
    if (d.path.empty() || d.path.size() >= sizeof(sockaddr_un::sun_path)) {
      *error = "unix socket path must have 1 to " +
               std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes";
      return std::nullopt;
    }
    return d;
  }
  if (text.starts_with("tcp:")) {
    auto hp = cli::parse_host_port(std::string(text.substr(4)));
    if (!hp || hp->port == 0) {
      *error = "expected tcp:HOST:PORT with a port above 0";
      return std::nullopt;
    }
    d.kind = LogDestination::Kind::kTcp;
    d.host = hp->host;
    d.port = hp->port;
    return d;
  }
  *error = "expected stdout, unix:/path or tcp:HOST:PORT";
  return std::nullopt;
}

// ---- SpscByteRing ----

SpscByteRing::SpscByteRing(size_t capacity) {
  size_t c = 64;
  while (c < capacity) c <<= 1;
  data_ = std::make_unique<char[]>(c);
  mask_ = c - 1;
}

bool SpscByteRing::try_push(std::string_view bytes) noexcept {
  const size_t n = bytes.size();
  const uint64_t head = head_.load(std::memory_order_relaxed);
  const size_t cap = mask_ + 1;
  if (cap - (head - cached_tail_) < n) {
    cached_tail_ = tail_.load(std::memory_order_acquire);
    if (cap - (head - cached_tail_) < n) return false;
  }
  const size_t at = head & mask_;
  const size_t first = std::min(n, cap - at);
  std::memcpy(data_.get() + at, bytes.data(), first);
  std::memcpy(data_.get(), bytes.data() + first, n - first);
  head_.store(head + n, std::memory_order_release);
  return true;
}

size_t SpscByteRing::readable(const char** first, size_t* first_size, const char** second,
                              size_t* second_size) const noexcept {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  const uint64_t head = head_.load(std::memory_order_acquire);
  const size_t n = head - tail;
  const size_t at = tail & mask_;
  const size_t a = std::min(n, mask_ + 1 - at);
  *first = data_.get() + at;
  *first_size = a;
  *second = data_.get();
  *second_size = n - a;
  return n;
}

void SpscByteRing::consume(size_t n) noexcept {
  tail_.store(tail_.load(std::memory_order_relaxed) + n, std::memory_order_release);
}

// ---- AccessLogProducer ----

namespace {
void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {  // single writer
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
}  // namespace

AccessLogProducer::AccessLogProducer(const AccessLogLayout& layout, size_t queue_bytes)
    : formatter_(layout), ring_(layout.format() == AccessLogFormat::kOff ? 64 : queue_bytes) {
  if (enabled()) line_ = std::make_unique<char[]>(layout.max_line_bytes());
}

bool AccessLogProducer::log(const AccessLogRecord& record) {
  if (!enabled()) return false;
  const size_t n = formatter_.format(record, line_.get());
  if (ring_.try_push(std::string_view(line_.get(), n))) {
    bump(queued_);
    return true;
  }
  bump(dropped_);
  return false;
}

// ---- AccessLog ----

AccessLog::AccessLog(size_t workers, AccessLogOptions options) : options_(std::move(options)) {
  options_.queue_bytes = std::max(options_.queue_bytes, 2 * kMaxLineBytes);
  options_.frame_bytes = std::clamp(options_.frame_bytes, kMaxLineBytes, kMaxFrameBytes);
  for (size_t i = 0; i < std::max<size_t>(workers, 1); ++i) {
    producers_.push_back(
        std::make_unique<AccessLogProducer>(options_.layout, options_.queue_bytes));
  }
}

AccessLog::~AccessLog() { stop(); }

void AccessLog::start() {
  if (!enabled() || writer_.joinable()) return;
  frame_.reserve(options_.frame_bytes);
  writer_ = std::thread([this] { run(); });
}

void AccessLog::stop() {
  {
    std::lock_guard lock(sleep_mutex_);
    stop_.store(true, std::memory_order_release);
  }
  sleep_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

void AccessLog::sleep_for(std::chrono::microseconds d) {
  std::unique_lock lock(sleep_mutex_);
  sleep_cv_.wait_for(lock, d, [this] { return stopping(); });
}

bool AccessLog::fill_frame() {
  bool any = false;
  for (auto& p : producers_) {
    const char *a, *b;
    size_t an, bn;
    const size_t avail = p->ring_.readable(&a, &an, &b, &bn);
    if (avail == 0) continue;
    const size_t space = options_.frame_bytes - frame_.size();
    size_t take = std::min(avail, space);
    if (take < avail) {
      // Cut after the last '\n' that fits: frames hold whole lines only.
      size_t cut = 0;
      if (take > an) {
        const void* nl = memrchr(b, '\n', take - an);
        if (nl != nullptr) cut = an + static_cast<size_t>(static_cast<const char*>(nl) - b) + 1;
      }
      if (cut == 0) {
        const void* nl = memrchr(a, '\n', std::min(take, an));
        if (nl != nullptr) cut = static_cast<size_t>(static_cast<const char*>(nl) - a) + 1;
      }
      take = cut;
    }
    if (take == 0) continue;
    const size_t from_a = std::min(take, an);
    frame_.append(a, from_a);
    frame_.append(b, take - from_a);
    frame_lines_ += count_lines(frame_.data() + frame_.size() - take, take);
    p->ring_.consume(take);
    any = true;
  }
  return any;
}

namespace {

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Non-blocking connect, finished within `timeout`. Returns the socket or -1.
int connect_socket(int family, const sockaddr* sa, socklen_t len,
                   std::chrono::milliseconds timeout) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  set_nonblocking(fd);
  if (::connect(fd, sa, len) == 0) return fd;
  if (errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  pollfd pfd{fd, POLLOUT, 0};
  int err = 0;
  socklen_t err_len = sizeof err;
  if (::poll(&pfd, 1, static_cast<int>(timeout.count())) != 1 ||
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0 || err != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

void AccessLog::open_stdout() {
  fd_ = options_.stdout_fd;
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return;
  if (S_ISSOCK(st.st_mode)) {
    fd_is_socket_ = true;  // send(MSG_DONTWAIT)
  } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    const std::string self = "/proc/self/fd/" + std::to_string(options_.stdout_fd);
    int fd = ::open(self.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) fd_ = owned_stdout_fd_ = fd;  // else: blocking writes to stdout_fd
  }
}

bool AccessLog::ensure_connected(Clock::time_point now) {
  if (options_.destination.kind == LogDestination::Kind::kStdout) {
    if (fd_ < 0) open_stdout();
    return true;
  }
  if (fd_ >= 0) return true;
  if (now < next_connect_) return false;
  const auto& d = options_.destination;
  int fd = -1;
  if (d.kind == LogDestination::Kind::kUnix) {
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::memcpy(sun.sun_path, d.path.data(), std::min(d.path.size(), sizeof sun.sun_path - 1));
    fd = connect_socket(AF_UNIX, reinterpret_cast<const sockaddr*>(&sun), sizeof sun,
                        options_.connect_timeout);
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string port = std::to_string(d.port);
    if (::getaddrinfo(d.host.c_str(), port.c_str(), &hints, &res) == 0) {
      for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
        fd = connect_socket(ai->ai_family, ai->ai_addr, ai->ai_addrlen, options_.connect_timeout);
      }
      ::freeaddrinfo(res);
    }
  }
  if (fd < 0) {
    bump(connect_failures_);
    backoff_ = backoff_.count() == 0 ? options_.reconnect_initial
                                     : std::min(backoff_ * 2, options_.reconnect_max);
    next_connect_ = now + backoff_;
    return false;
  }
  fd_ = fd;
  fd_is_socket_ = true;
  backoff_ = std::chrono::milliseconds(0);
  bump(connects_);
  connected_.store(true, std::memory_order_relaxed);
  return true;
}

bool AccessLog::peer_closed() {
  // A collector never sends: readable means closed (or stray bytes, which are discarded).
  pollfd pfd{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&pfd, 1, 0) != 1) return false;
  if (pfd.revents & (POLLHUP | POLLERR | POLLRDHUP)) return true;
  char scratch[512];
  ssize_t n = ::recv(fd_, scratch, sizeof scratch, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void AccessLog::disconnect() {
  if (options_.destination.kind == LogDestination::Kind::kStdout || fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  bump(disconnects_);
  connected_.store(false, std::memory_order_relaxed);
  // The first reconnect is immediate; failures back off from there.
  next_connect_ = Clock::now();
}

bool AccessLog::write_frame() {
  size_t off = 0;
  auto last_progress = Clock::now();
  auto give_up = [&] {
    // Lines whose every byte went out were delivered; the rest are lost with the connection.
    const size_t written = count_lines(frame_.data(), off);
    bump(lines_written_, written);
    bump(dropped_connection_lost_, frame_lines_ - written);
    bump(bytes_written_, off);
    frame_.clear();
    frame_lines_ = 0;
    disconnect();
    return false;
  };
  while (off < frame_.size()) {
    ssize_t n = fd_is_socket_ ? ::send(fd_, frame_.data() + off, frame_.size() - off,
                                       MSG_NOSIGNAL | MSG_DONTWAIT)
                              : ::write(fd_, frame_.data() + off, frame_.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
      last_progress = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd_, POLLOUT, 0};
      ::poll(&pfd, 1, 50);
      const auto now = Clock::now();
      if (past_stop_deadline(now)) return give_up();
      if (options_.write_timeout.count() > 0 && now - last_progress >= options_.write_timeout) {
        return give_up();
      }
      continue;
    }
    return give_up();
  }
  bump(lines_written_, frame_lines_);
  bump(frames_written_);
  bump(bytes_written_, frame_.size());
  frame_.clear();
  frame_lines_ = 0;
  return true;
}

bool AccessLog::past_stop_deadline(Clock::time_point now) {
  if (!stopping()) return false;
  if (!stop_deadline_) stop_deadline_ = now + options_.stop_timeout;
  return now >= *stop_deadline_;
}

void AccessLog::run() {
  auto idle = options_.idle_min;
  for (;;) {
    const auto now = Clock::now();
    if (past_stop_deadline(now)) break;
    if (!ensure_connected(now)) {
      if (stopping()) break;  // nowhere to flush to
      sleep_for(std::min<std::chrono::microseconds>(
          std::chrono::duration_cast<std::chrono::microseconds>(next_connect_ - now),
          std::chrono::milliseconds(50)));
      continue;
    }
    if (frame_.empty() && !fill_frame()) {
      if (stopping()) break;  // everything queued went out
      // Notice a collector that went away while there was nothing to send, so that the
      // reconnection starts now rather than with the next line.
      if (options_.destination.kind != LogDestination::Kind::kStdout && peer_closed()) {
        disconnect();
        continue;
      }
      sleep_for(idle);
      idle = std::min(idle * 2, options_.idle_max);
      continue;
    }
    idle = options_.idle_min;
    // Fill the frame before sending when more is already queued.
    if (frame_.size() < options_.frame_bytes) fill_frame();
    if (options_.destination.kind != LogDestination::Kind::kStdout && peer_closed()) {
      disconnect();  // the frame is kept for the next connection
      continue;
    }
    write_frame();
  }
  // Whatever could not be flushed in time is counted, so that every queued line is accounted
  // for: written, lost with a connection, or dropped here.
  uint64_t left = frame_lines_;
  frame_.clear();
  frame_lines_ = 0;
  for (auto& p : producers_) {
    const char *a, *b;
    size_t an, bn;
    const size_t n = p->ring_.readable(&a, &an, &b, &bn);
    left += count_lines(a, an) + count_lines(b, bn);
    p->ring_.consume(n);
  }
  bump(dropped_at_stop_, left);
  disconnect();
  if (owned_stdout_fd_ >= 0) ::close(owned_stdout_fd_);
  owned_stdout_fd_ = fd_ = -1;
}

AccessLog::Stats AccessLog::stats() const {
  Stats s;
  for (const auto& p : producers_) {
    s.lines_queued += p->queued();
    s.dropped_queue_full += p->dropped();
  }
  s.dropped_connection_lost = dropped_connection_lost_.load(std::memory_order_relaxed);
  s.dropped_at_stop = dropped_at_stop_.load(std::memory_order_relaxed);
  s.lines_written = lines_written_.load(std::memory_order_relaxed);
  s.frames_written = frames_written_.load(std::memory_order_relaxed);
  s.bytes_written = bytes_written_.load(std::memory_order_relaxed);
  s.connects = connects_.load(std::memory_order_relaxed);
  s.connect_failures = connect_failures_.load(std::memory_order_relaxed);
  s.disconnects = disconnects_.load(std::memory_order_relaxed);
  s.connected = connected_.load(std::memory_order_relaxed);
  return s;
}

void AccessLog::append_metrics(std::vector<MetricFamily>& out) const {
  const Stats s = stats();
  auto add = [&out](std::string name, std::string help, MetricType type,
                    std::vector<std::pair<std::vector<ClientMetric::Label>, double>> values) {
    MetricFamily f;
    f.name = std::move(name);
    f.help = std::move(help);
    f.type = type;
    for (auto& [labels, v] : values) {
      ClientMetric m;
      m.label = std::move(labels);
      (type == MetricType::Gauge ? m.gauge.value : m.counter.value) = v;
      f.metric.push_back(std::move(m));
    }
    out.push_back(std::move(f));
  };
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  add("tidegate_access_log_lines_total", "Access log lines queued by the workers.",
      MetricType::Counter, {{{}, d(s.lines_queued)}});
  add("tidegate_access_log_dropped_lines_total",
      "Access log lines dropped: the worker's queue was full, the connection to the collector "
      "broke before the line was written, or the line was still queued at shutdown.",
      MetricType::Counter,
      {{{{"reason", "queue_full"}}, d(s.dropped_queue_full)},
       {{{"reason", "connection_lost"}}, d(s.dropped_connection_lost)},
       {{{"reason", "stopped"}}, d(s.dropped_at_stop)}});
  add("tidegate_access_log_written_lines_total", "Access log lines written out.",
      MetricType::Counter, {{{}, d(s.lines_written)}});
  add("tidegate_access_log_frames_total", "Frames (batches of whole lines) written out.",
      MetricType::Counter, {{{}, d(s.frames_written)}});
  add("tidegate_access_log_written_bytes_total", "Access log bytes written out.",
      MetricType::Counter, {{{}, d(s.bytes_written)}});
  add("tidegate_access_log_connects_total", "Connections made to the log collector.",
      MetricType::Counter, {{{}, d(s.connects)}});
  add("tidegate_access_log_connect_failures_total", "Failed attempts to reach the collector.",
      MetricType::Counter, {{{}, d(s.connect_failures)}});
  add("tidegate_access_log_disconnects_total", "Collector connections closed or broken.",
      MetricType::Counter, {{{}, d(s.disconnects)}});
  const bool shipping = options_.destination.kind != LogDestination::Kind::kStdout;
  add("tidegate_access_log_collector_connected",
      "1 while connected to the log collector (always 1 for stdout).", MetricType::Gauge,
      {{{}, shipping ? (s.connected ? 1.0 : 0.0) : 1.0}});
}

}  // namespace tidegate::dataplane::observability
