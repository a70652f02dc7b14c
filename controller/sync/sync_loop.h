#pragma once
// The one thread that turns changes into pushes. Sources call notify() from any thread; the loop
// batches notifications (a hold-off after the last one, bounded by a maximum delay after the
// first), rebuilds the desired Config with a pure build function, and pushes it. Failed pushes are
// retried with exponential backoff and jitter; a data plane that restarts is resynced.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>

#include "model/model.h"
#include "push/pusher.h"

namespace tidegate::controller::sync {

struct SyncOptions {
  std::chrono::milliseconds hold_off{20};
  std::chrono::milliseconds max_delay{200};
  std::chrono::milliseconds retry_min{100};
  std::chrono::milliseconds retry_max{5'000};
  std::chrono::milliseconds liveness_interval{500};
};

// Called on the loop's thread after each push's answer (Events on NACKed Ingresses use them).
struct SyncHooks {
  // The data plane refused `refused` and keeps serving what it had.
  std::function<void(const model::Config& refused, const std::string& reason)> nacked;
  // The data plane serves `serving` (acknowledged now, or already).
  std::function<void(const model::Config& serving)> accepted;
};

class SyncLoop {
 public:
  using BuildFn = std::function<model::Config()>;
  SyncLoop(BuildFn build, push::Pusher& pusher, SyncOptions options = {});
  void set_hooks(SyncHooks hooks) { hooks_ = std::move(hooks); }  // before run()

  void notify();  // any thread
  void stop();    // any thread
  void run();     // blocks until stop()

  uint64_t pushes_acked() const { return acked_; }

 private:
  // Waits for a batch of changes, a retry deadline, a liveness check or stop. Returns false on
  // stop.
  bool wait_for_work(bool retry_pending, std::chrono::steady_clock::time_point retry_at);

  BuildFn build_;
  SyncHooks hooks_;
  push::Pusher& pusher_;
  SyncOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool dirty_ = true;  // build once at start
  bool stopping_ = false;
  std::chrono::steady_clock::time_point first_change_{};
  std::chrono::steady_clock::time_point last_change_{};
  uint64_t acked_ = 0;
  std::mt19937 rng_{std::random_device{}()};
};

}  // namespace tidegate::controller::sync
