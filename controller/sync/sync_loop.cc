#include "sync/sync_loop.h"

#include <algorithm>

#include "log/log.h"

namespace tidegate::controller::sync {

using clock = std::chrono::steady_clock;

namespace {

long long us(clock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

// Wall-clock microseconds since the epoch, for lining log lines up with a benchmark's clock.
long long wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

SyncLoop::SyncLoop(IncrementalBuildFn build, push::Pusher& pusher, SyncOptions options)
    : build_(std::move(build)), pusher_(pusher), options_(options) {
  // The start-up build waits for the hold-off (the sources' first lists are complete by then),
  // and counts as a change that found the loop idle.
  next_build_ = first_change_ = clock::now() + options_.hold_off;
}

SyncLoop::SyncLoop(BuildFn build, push::Pusher& pusher, SyncOptions options)
    : SyncLoop(IncrementalBuildFn(), pusher, options) {
  build_ = [this, build = std::move(build)] {
    built_ = build();
    return Build{&built_, nullptr};
  };
}

void SyncLoop::notify() {
  {
    std::lock_guard lock(mu_);
    if (!dirty_) first_change_ = clock::now();
    dirty_ = true;
  }
  cv_.notify_all();
}

void SyncLoop::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

bool SyncLoop::wait_for_work(bool retry_pending, clock::time_point retry_at) {
  std::unique_lock lock(mu_);
  for (;;) {
    if (stopping_) return false;
    auto now = clock::now();
    if (dirty_) {
      // At once when the previous push is a gap behind, else when it is (see SyncOptions).
      if (now >= next_build_) {
        dirty_ = false;
        batch_first_ = first_change_;
        // It came while a gap was pending (or a build ran): changes come faster than the
        // loop pushes (see SyncOptions).
        batch_waited_ = first_change_ < next_build_;
        return true;
      }
      cv_.wait_until(lock, next_build_);
      continue;
    }
    if (retry_pending && now >= retry_at) {
      batch_first_ = now;
      batch_waited_ = false;
      return true;
    }
    auto wake = now + options_.liveness_interval;
    if (retry_pending) wake = std::min(wake, retry_at);
    cv_.wait_until(lock, wake);
    if (!dirty_ && !stopping_ && !retry_pending) {
      lock.unlock();
      bool alive = pusher_.alive();
      lock.lock();
      if (!alive) {
        TG_WARN("sync", "data plane connection lost; resyncing");
        batch_first_ = clock::now();
        batch_waited_ = false;
        return true;
      }
    }
  }
}

void SyncLoop::space_after(clock::time_point started, clock::time_point ended) {
  // The median of the last few costs: one push slowed down by a busy machine (descheduled for
  // 50 ms) does not stretch the next gaps, while builds that stay expensive do within three.
  costs_[costs_seen_++ % costs_.size()] = ended - started;
  std::array<clock::duration, kCosts> recent = costs_;
  const size_t n = std::min(costs_seen_, recent.size());
  std::nth_element(recent.begin(), recent.begin() + n / 2, recent.begin() + n);
  const auto gap = batch_waited_ ? std::clamp<clock::duration>(
                                       recent[n / 2] * options_.gap_factor, options_.hold_off,
                                       std::max(options_.hold_off, options_.max_delay))
                                 : clock::duration(options_.hold_off);
  std::lock_guard lock(mu_);
  next_build_ = ended + gap;
}

void SyncLoop::run() {
  std::optional<model::Config> nacked;  // last desired Config the data plane refused
  // Whether the previous build went to the pusher: a build's changed upstreams are relative to
  // the previous build, so they mean something to the pusher only then.
  bool previous_pushed = false;
  bool retry_pending = false;
  auto retry_at = clock::now();
  auto backoff = options_.retry_min;
  while (wait_for_work(retry_pending, retry_at)) {
    const auto woke = clock::now();
    const Build build = build_();
    const auto built = clock::now();
    const model::Config& desired = *build.config;
    if (nacked && *nacked == desired && pusher_.connected()) {
      previous_pushed = false;
      space_after(woke, clock::now());
      continue;  // refused; wait for a change
    }
    auto result = pusher_.push(desired, previous_pushed ? build.changed_upstreams : nullptr,
                               build.shared_config);
    const auto answered = clock::now();
    space_after(woke, answered);
    previous_pushed = true;
    switch (result.status) {
      case push::PushStatus::kAcked:
        acked_.fetch_add(1, std::memory_order_relaxed);
        nacked.reset();
        retry_pending = false;
        backoff = options_.retry_min;
        TG_INFO("sync", "data plane acknowledged version "
                            << result.version << (result.full_snapshot ? " (snapshot)" : " (delta)")
                            << ": " << desired.virtual_hosts.size() << " hosts, "
                            << desired.upstreams.size() << " upstreams");
        // For bench/propagation.py: where a change's time goes between the notify and the ACK.
        TG_DEBUG("sync", "version " << result.version << " acked at t=" << wall_us()
                                    << " us: batch waited " << us(woke - batch_first_)
                                    << " us, build " << us(built - woke) << " us, push "
                                    << us(answered - built) << " us");
        if (hooks_.accepted) hooks_.accepted(desired);
        break;
      case push::PushStatus::kUnchanged:
        retry_pending = false;
        if (hooks_.accepted) hooks_.accepted(desired);
        break;
      case push::PushStatus::kNacked:
        TG_ERROR("sync", "data plane refused version " << result.version << ": " << result.error
                                                       << " (it keeps serving the previous one)");
        nacked = desired;
        retry_pending = false;
        if (hooks_.nacked) hooks_.nacked(desired, result.error);
        break;
      case push::PushStatus::kDisconnected: {
        if (!retry_pending || backoff >= options_.retry_max) {
          TG_WARN("sync", "data plane unreachable: " << result.error << "; retrying");
        }
        // Exponential backoff with full jitter in [backoff/2, backoff].
        std::uniform_int_distribution<long> jitter(backoff.count() / 2, backoff.count());
        retry_at = clock::now() + std::chrono::milliseconds(jitter(rng_));
        backoff = std::min(backoff * 2, options_.retry_max);
        retry_pending = true;
        break;
      }
    }
  }
}

}  // namespace tidegate::controller::sync
