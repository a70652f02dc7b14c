#pragma once
// A watch stream for fake API clients: its scripted lines, then the end of the stream, or (with
// `block`) no end until cancel(), as an idle watch.

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "kube/client.h"

namespace tidegate::controller::kube {

class ScriptedStream : public LineStream {
 public:
  explicit ScriptedStream(std::vector<std::string> lines, bool block)
      : lines_(std::move(lines)), block_(block) {}
  bool next_line(std::string* line, std::string* error) override {
    error->clear();
    if (next_ < lines_.size()) {
      *line = lines_[next_++];
      return true;
    }
    std::unique_lock lock(mu_);
    if (block_) cv_.wait(lock, [this] { return cancelled_; });
    return false;
  }
  void cancel() override {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }

 private:
  std::vector<std::string> lines_;
  size_t next_ = 0;
  bool block_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
};

}  // namespace tidegate::controller::kube
