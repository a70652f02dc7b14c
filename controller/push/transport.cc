#include "push/transport.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "log/log.h"

namespace tidegate::controller::push {

bool UnixTransport::connect(std::string* error) {
  close();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof(addr.sun_path)) {
    *error = "socket path too long: " + path_;
    return false;
  }
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *error = "connect " + path_ + ": " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  fd_ = fd;
  reader_ = protocol::FrameReader{};
  return true;
}

void UnixTransport::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool UnixTransport::alive() {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return true;
  if (p.revents & (POLLHUP | POLLERR)) {
    close();
    return false;
  }
  char c;
  ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
    close();
    return false;
  }
  return true;
}

std::optional<protocol::Message> UnixTransport::call(const protocol::Message& m,
                                                     std::chrono::milliseconds timeout,
                                                     std::string* error) {
  if (fd_ < 0) {
    *error = "not connected";
    return std::nullopt;
  }
  const auto started = std::chrono::steady_clock::now();
  return exchange(protocol::encode_frame(m), std::holds_alternative<protocol::Snapshot>(m), started,
                  timeout, error);
}

std::optional<protocol::Message> UnixTransport::call_snapshot(uint64_t version,
                                                              const model::Config& config,
                                                              std::chrono::milliseconds timeout,
                                                              std::string* error) {
  if (fd_ < 0) {
    *error = "not connected";
    return std::nullopt;
  }
  const auto started = std::chrono::steady_clock::now();
  return exchange(protocol::encode_snapshot_frame(version, config), true, started, timeout, error);
}

std::optional<protocol::Message> UnixTransport::exchange(
    std::string frame, bool snapshot, std::chrono::steady_clock::time_point started,
    std::chrono::milliseconds timeout, std::string* error) {
  const auto encoded = std::chrono::steady_clock::now();
  size_t off = 0;
  while (off < frame.size()) {
    ssize_t n = ::send(fd_, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = std::string("send: ") + std::strerror(errno);
      close();
      return std::nullopt;
    }
    off += static_cast<size_t>(n);
  }
  const size_t frame_bytes = frame.size();
  std::string().swap(frame);  // sent: its memory goes back while the data plane works
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[64 * 1024];
  for (;;) {
    if (auto payload = reader_.next()) {
      if (snapshot) {
        // For bench/propagation.py (a start at scale): encoding vs. the data plane's part.
        auto ms = [](std::chrono::steady_clock::duration d) {
          return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
        };
        TG_DEBUG("push", "snapshot of " << frame_bytes << " bytes: encoded in "
                                        << ms(encoded - started) << " ms, sent and answered in "
                                        << ms(std::chrono::steady_clock::now() - encoded) << " ms");
      }
      auto decoded = protocol::decode_json(*payload);
      if (!decoded.message) {
        *error = "bad answer from data plane: " + decoded.error;
        close();
        return std::nullopt;
      }
      return decoded.message;
    }
    if (!reader_.error().empty()) {
      *error = reader_.error();
      close();
      return std::nullopt;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      *error = "no answer from data plane within " + std::to_string(timeout.count()) + " ms";
      close();
      return std::nullopt;
    }
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = n == 0 ? "data plane closed the connection"
                      : std::string("recv: ") + std::strerror(errno);
      close();
      return std::nullopt;
    }
    reader_.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace tidegate::controller::push
