#pragma once
// Watches a manifest folder with inotify and calls back on every change of a file in it. The
// callback runs on the watcher's own thread; it only signals the sync loop.

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace tidegate::controller::source {

class ManifestWatcher {
 public:
  explicit ManifestWatcher(std::string dir) : dir_(std::move(dir)) {}
  ~ManifestWatcher();
  // Starts watching; returns false and sets *error if the folder cannot be watched.
  bool start(std::function<void()> on_change, std::string* error);
  void stop();

 private:
  void run();

  std::string dir_;
  std::function<void()> on_change_;
  int inotify_fd_ = -1;
  int stop_fd_ = -1;  // eventfd that wakes the thread on stop()
  std::thread thread_;
};

}  // namespace tidegate::controller::source
