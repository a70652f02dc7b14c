#pragma once
// The one thread that turns changes into pushes. Sources call notify() from any thread; the loop
// batches notifications (at once after a quiet period, else a hold-off after the last one,
// bounded by a maximum delay after the first), rebuilds the desired Config with a pure build
// function, and pushes it. Failed pushes are retried with exponential backoff and jitter; a data
// plane that restarts is resynced.

#include <chrono>
#include <condition_variable>
#include <functional>
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
};

// Batching, leading-edge: a change that comes after a quiet period (no change for hold_off) is
// built and pushed at once; the changes that follow it within hold_off of each other (a burst: a
// rollout's slices arrive a few ms apart) are gathered and pushed once the burst has been quiet
// for hold_off, and never later than max_delay after the first of them. An isolated change thus
// pays no hold-off at all, and a burst costs one push for its first change and one for the rest.
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
  using IncrementalBuildFn = std::function<Build()>;
  SyncLoop(BuildFn build, push::Pusher& pusher, SyncOptions options = {});
  SyncLoop(IncrementalBuildFn build, push::Pusher& pusher, SyncOptions options = {});
  void set_hooks(SyncHooks hooks) { hooks_ = std::move(hooks); }  // before run()

  void notify();  // any thread
  void stop();    // any thread
  void run();     // blocks until stop()

  uint64_t pushes_acked() const { return acked_; }

 private:
  // Waits for a batch of changes, a retry deadline, a liveness check or stop. Returns false on
  // stop.
  bool wait_for_work(bool retry_pending, std::chrono::steady_clock::time_point retry_at);

  IncrementalBuildFn build_;
  model::Config built_;  // what a BuildFn returned
  SyncHooks hooks_;
  push::Pusher& pusher_;
  SyncOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool dirty_ = true;  // build once at start
  bool stopping_ = false;
  std::chrono::steady_clock::time_point first_change_{};
  std::chrono::steady_clock::time_point last_change_{};
  // The pending batch began after a quiet period: build it now (see SyncOptions).
  bool leading_ = false;
  // The first change of the batch being built (for the debug log's timings).
  std::chrono::steady_clock::time_point batch_first_{};
  uint64_t acked_ = 0;
  std::mt19937 rng_{std::random_device{}()};
};

}  // namespace tidegate::controller::sync
