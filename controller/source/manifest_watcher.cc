#include "source/manifest_watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "log/log.h"

namespace tidegate::controller::source {

ManifestWatcher::~ManifestWatcher() { stop(); }

bool ManifestWatcher::start(std::function<void()> on_change, std::string* error) {
  on_change_ = std::move(on_change);
  inotify_fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (inotify_fd_ < 0) {
    *error = std::string("inotify_init1: ") + std::strerror(errno);
    return false;
  }
  // Writes in place (CLOSE_WRITE), atomic replacement by rename (MOVED_TO), deletions, and the
  // symlink swap Kubernetes uses for mounted ConfigMaps (CREATE/MOVED_TO of "..data").
  uint32_t mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE |
                  IN_DELETE_SELF | IN_MOVE_SELF;
  if (::inotify_add_watch(inotify_fd_, dir_.c_str(), mask) < 0) {
    *error = "watch " + dir_ + ": " + std::strerror(errno);
    ::close(inotify_fd_);
    inotify_fd_ = -1;
    return false;
  }
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] { run(); });
  return true;
}

void ManifestWatcher::stop() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    ssize_t unused = ::write(stop_fd_, &one, sizeof one);
    (void)unused;
    thread_.join();
  }
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
  inotify_fd_ = stop_fd_ = -1;
}

void ManifestWatcher::run() {
  alignas(inotify_event) char buf[16 * 1024];
  for (;;) {
    pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    int r = ::poll(fds, 2, -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      TG_ERROR("manifests", "poll: " << std::strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    bool changed = false;
    for (;;) {
      ssize_t n = ::read(inotify_fd_, buf, sizeof buf);
      if (n <= 0) break;
      for (char* p = buf; p < buf + n;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
          TG_ERROR("manifests", dir_ << " was removed or moved; keeping the last configuration");
        }
        changed = true;
        p += sizeof(inotify_event) + ev->len;
      }
    }
    if (changed) on_change_();
  }
}

}  // namespace tidegate::controller::source
