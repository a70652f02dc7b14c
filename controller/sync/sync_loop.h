#pragma once
// The one thread that turns changes into pushes. Sources call notify() from any thread; the loop
// builds the desired Config with a pure build function and pushes it, at once when the previous
// push is far enough behind, else once it is (the changes meanwhile are gathered into one
// build). Failed pushes are retried with exponential backoff and jitter; a data plane that
// restarts is resynced.

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "model/model.h"
#include "push/pusher.h"

namespace tidegate::controller::sync {

// The desired Config as an incremental build function gives it.
struct Build {
  // Never null; owned by the build function and left alone until its next call.
  const model::Config* config = nullptr;
  // When not null: `config` differs from the previous build's only in these upstreams (the
  // endpoint fast path), which lets the pusher skip the whole-Config diff. Same lifetime.
  const std::vector<std::string>* changed_upstreams = nullptr;
  // When not null: `config` itself, shared, whose parts other than the upstreams never change
  // (translate::IncrementalTranslator::shared_config): the pusher keeps it rather than a copy.
  std::shared_ptr<const model::Config> shared_config = nullptr;
};

// Batching by spacing: after a push, the next build may start once a gap has passed since the
// push's answer. A change that comes later than that (an isolated change, or the next of a
// stream slower than the loop) is built and pushed at once, and the gap after it is `hold_off`.
// Changes that come sooner (during the gap or the build: a burst, a rollout's slices a few ms
// apart) are gathered and built together when the gap ends, and the gap after that build is
// `gap_factor` times what a build and its push take (the median of the last five), at least
// `hold_off` and at most `max_delay`: under sustained change the loop spends at most about
// 1 / (1 + gap_factor) of its time building and pushing, and no change waits longer than the
// gap, which follows the cost of a push (an endpoint change at 10,000 Ingresses costs a few ms,
// a full translation there ~100 ms). An expensive build does not delay the isolated change that
// follows it.
struct SyncOptions {
  std::chrono::milliseconds hold_off{5};
  std::chrono::milliseconds max_delay{200};
  std::chrono::milliseconds retry_min{100};
  std::chrono::milliseconds retry_max{5'000};
  std::chrono::milliseconds liveness_interval{500};
  int gap_factor = 4;
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
  using IncrementalBuildFn = std::function<Build()>;
  SyncLoop(BuildFn build, push::Pusher& pusher, SyncOptions options = {});
  SyncLoop(IncrementalBuildFn build, push::Pusher& pusher, SyncOptions options = {});
  void set_hooks(SyncHooks hooks) { hooks_ = std::move(hooks); }  // before run()

  void notify();  // any thread
  void stop();    // any thread
  void run();     // blocks until stop()

  // Any thread (tests watch it while run() goes on).
  uint64_t pushes_acked() const { return acked_.load(std::memory_order_relaxed); }

 private:
  // Waits for a batch of changes, a retry deadline, a liveness check or stop. Returns false on
  // stop.
  bool wait_for_work(bool retry_pending, std::chrono::steady_clock::time_point retry_at);
  // A build began at `started` and its push was answered at `ended`: the next build waits for the
  // gap (see SyncOptions).
  void space_after(std::chrono::steady_clock::time_point started,
                   std::chrono::steady_clock::time_point ended);

  IncrementalBuildFn build_;
  model::Config built_;  // what a BuildFn returned
  SyncHooks hooks_;
  push::Pusher& pusher_;
  SyncOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool dirty_ = true;  // build once at start
  bool stopping_ = false;
  // The first change since the last build began (for the debug log's timings).
  std::chrono::steady_clock::time_point first_change_{};
  // The earliest time the next build may start (see SyncOptions); the loop's thread writes it.
  std::chrono::steady_clock::time_point next_build_{};
  // The first change of the batch being built (for the debug log's timings).
  std::chrono::steady_clock::time_point batch_first_{};
  // The batch being built came while a gap was pending (see SyncOptions).
  bool batch_waited_ = false;
  // What the last builds and their pushes took (see space_after()).
  static constexpr size_t kCosts = 5;
  std::array<std::chrono::steady_clock::duration, kCosts> costs_{};
  size_t costs_seen_ = 0;
  std::atomic<uint64_t> acked_{0};
  std::mt19937 rng_{std::random_device{}()};
};

}  // namespace tidegate::controller::sync
