// The sync loop hands the pusher the upstreams an incremental build says it changed, and only
// when they are relative to what was pushed last; it batches by spacing (a change after the gap
// that follows a push is pushed at once, the changes within it are gathered into one more push,
// and the gap follows the cost of a push).

#include "sync/sync_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/model.h"
#include "protocol/protocol.h"
#include "push/pusher.h"
#include "push/transport.h"

namespace tidegate::controller::sync {
namespace {

using protocol::Message;

// Answers like a data plane that accepts everything; records what it was sent.
struct Recorder {
  std::mutex mu;
  std::vector<Message> sent;
  std::optional<model::Config> served;
  uint64_t served_version = 0;
};

class RecordingTransport : public push::Transport {
 public:
  explicit RecordingTransport(Recorder& r) : r_(r) {}
  bool connected() const override { return connected_; }
  bool connect(std::string*) override { return connected_ = true; }
  void close() override { connected_ = false; }
  bool alive() override { return connected_; }
  std::optional<Message> call(const Message& m, std::chrono::milliseconds, std::string*) override {
    std::lock_guard lock(r_.mu);
    r_.sent.push_back(m);
    if (std::holds_alternative<protocol::Hello>(m)) return protocol::HelloReply{1, 0};
    if (auto* s = std::get_if<protocol::Snapshot>(&m)) {
      r_.served = s->config;
      r_.served_version = s->version;
      return protocol::Ack{s->version};
    }
    auto& d = std::get<protocol::DeltaMsg>(m);
    auto applied = model::apply(*r_.served, d.delta);
    r_.served = applied.config;
    r_.served_version = d.version;
    return protocol::Ack{d.version};
  }

 private:
  Recorder& r_;
  bool connected_ = false;
};

model::Config config(const std::vector<std::string>& hosts, const std::string& address) {
  model::Config c;
  c.upstreams["ns/web:80"] = {"ns/web:80", {{address, 8080}}};
  for (const auto& h : hosts) {
    c.virtual_hosts[h] = {h, {{"/", model::PathMatch::kPrefix, "ns/web:80", "ns/in"}}};
  }
  return c;
}

// Runs the loop over `builds` (one per notify) and returns what was sent.
std::vector<Message> run(std::vector<model::Config> configs,
                         std::vector<std::optional<std::vector<std::string>>> changed) {
  Recorder recorder;
  push::Pusher pusher(std::make_unique<RecordingTransport>(recorder));
  size_t next = 0;
  SyncLoop* loop_ptr = nullptr;
  SyncLoop loop(SyncLoop::IncrementalBuildFn([&]() {
                  size_t i = std::min(next, configs.size() - 1);
                  ++next;
                  return Build{&configs[i], changed[i] ? &*changed[i] : nullptr};
                }),
                pusher,
                SyncOptions{std::chrono::milliseconds(1), std::chrono::milliseconds(2),
                            std::chrono::milliseconds(100), std::chrono::milliseconds(100),
                            std::chrono::milliseconds(50)});
  loop_ptr = &loop;
  std::thread t([&] { loop_ptr->run(); });
  for (size_t i = 1; i < configs.size(); ++i) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (loop.pushes_acked() < i && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    loop.notify();
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (loop.pushes_acked() < configs.size() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  loop.stop();
  t.join();
  EXPECT_EQ(recorder.served, configs.back());
  return recorder.sent;
}

TEST(SyncLoopTest, ChangedUpstreamsOfABuildReachThePusher) {
  // The second build adds a host but says only ns/web:80 changed: the delta carries the upstream
  // alone, which shows the names were used (a whole diff would carry the host).
  auto sent = run({config({"a.com"}, "10.0.0.1"), config({"a.com", "b.com"}, "10.0.0.2"),
                   config({"a.com", "b.com"}, "10.0.0.3")},
                  {std::nullopt, std::vector<std::string>{"ns/web:80"}, std::nullopt});
  ASSERT_EQ(sent.size(), 4u);  // hello, snapshot, delta, delta
  ASSERT_TRUE(std::holds_alternative<protocol::Snapshot>(sent[1]));
  const auto& hinted = std::get<protocol::DeltaMsg>(sent[2]).delta;
  EXPECT_TRUE(hinted.upsert_virtual_hosts.empty());
  ASSERT_EQ(hinted.upsert_upstreams.size(), 1u);
  EXPECT_EQ(hinted.upsert_upstreams[0].endpoints[0].address, "10.0.0.2");
  // Without names, the whole Configs are compared: the host comes along.
  const auto& full = std::get<protocol::DeltaMsg>(sent[3]).delta;
  EXPECT_EQ(full.upsert_virtual_hosts.size(), 1u);
}

TEST(SyncLoopTest, ChangedUpstreamsOfTheFirstBuildAreNotUsed) {
  // Nothing was pushed before: the first push is a full snapshot whatever the build says.
  auto sent = run({config({"a.com"}, "10.0.0.1"), config({"a.com"}, "10.0.0.2")},
                  {std::vector<std::string>{}, std::vector<std::string>{"ns/web:80"}});
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(std::get<protocol::Snapshot>(sent[1]).config, config({"a.com"}, "10.0.0.1"));
  EXPECT_EQ(std::get<protocol::DeltaMsg>(sent[2]).delta.upsert_upstreams.size(), 1u);
}

// Waits until `loop` has `n` pushes acknowledged (or 10 s pass).
bool wait_acked(const SyncLoop& loop, uint64_t n) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (loop.pushes_acked() < n && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return loop.pushes_acked() >= n;
}

// A long hold-off makes the two behaviours far apart: an isolated change after a quiet period
// must not wait for it; the changes of a burst are gathered into one push after the first.
struct Batching {
  explicit Batching(SyncOptions options = {std::chrono::milliseconds(800),
                                           std::chrono::milliseconds(5'000),
                                           std::chrono::milliseconds(100),
                                           std::chrono::milliseconds(100),
                                           std::chrono::milliseconds(50)},
                    std::chrono::milliseconds build_cost = {})
      : cost_ms(static_cast<int>(build_cost.count())),
        loop{SyncLoop::BuildFn([this] {
               ++builds;
               if (cost_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(cost_ms));
               std::vector<std::string> names;
               for (int i = 0; i < hosts; ++i) names.push_back("h" + std::to_string(i) + ".com");
               return config(names, "10.0.0.1");
             }),
             pusher, options} {}
  ~Batching() {
    loop.stop();
    thread.join();
  }
  size_t served_hosts() {
    std::lock_guard lock(recorder.mu);
    return recorder.served ? recorder.served->virtual_hosts.size() : 0;
  }

  Recorder recorder;
  push::Pusher pusher{std::make_unique<RecordingTransport>(recorder)};
  std::atomic<int> builds{0};
  std::atomic<int> hosts{1};
  std::atomic<int> cost_ms;  // what a build takes
  SyncLoop loop;
  std::thread thread{[this] { loop.run(); }};
};

TEST(SyncLoopTest, AnIsolatedChangeIsPushedWithoutTheHoldOff) {
  Batching b;
  ASSERT_TRUE(wait_acked(b.loop, 1));  // the start-up build waits for the hold-off, as before
  std::this_thread::sleep_for(std::chrono::milliseconds(900));  // quiet for longer than it
  b.hosts = 2;
  auto before = std::chrono::steady_clock::now();
  b.loop.notify();
  ASSERT_TRUE(wait_acked(b.loop, 2));
  auto took = std::chrono::steady_clock::now() - before;
  EXPECT_LT(took, std::chrono::milliseconds(400)) << "the change waited for the 800 ms hold-off";
  std::lock_guard lock(b.recorder.mu);
  EXPECT_EQ(b.recorder.served->virtual_hosts.size(), 2u);
}

TEST(SyncLoopTest, ABurstIsGatheredIntoOnePushAfterItsFirstChange) {
  Batching b;
  ASSERT_TRUE(wait_acked(b.loop, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(900));
  const int builds_before = b.builds;
  for (int i = 2; i <= 21; ++i) {  // 20 changes, 2 ms apart
    b.hosts = i;
    b.loop.notify();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // The first change at once, the other 19 in one more build once the burst is quiet.
  ASSERT_TRUE(wait_acked(b.loop, 3));
  std::this_thread::sleep_for(std::chrono::milliseconds(1'000));
  EXPECT_EQ(b.builds - builds_before, 2);
  std::lock_guard lock(b.recorder.mu);
  EXPECT_EQ(b.recorder.served->virtual_hosts.size(), 21u);
}

TEST(SyncLoopTest, ChangesThatNeverPauseWaitForTheGapOnly) {
  // One change every 10 ms for a second, a 100 ms gap: the builds follow the gap (about ten),
  // rather than waiting for a pause that never comes (the 5 s maximum).
  Batching b({std::chrono::milliseconds(100), std::chrono::milliseconds(5'000),
              std::chrono::milliseconds(100), std::chrono::milliseconds(100),
              std::chrono::milliseconds(50)});
  ASSERT_TRUE(wait_acked(b.loop, 1));
  const int builds_before = b.builds;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  int hosts = 1;
  size_t served_early = 0;
  while (std::chrono::steady_clock::now() < until) {
    b.hosts = ++hosts;
    b.loop.notify();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (std::chrono::steady_clock::now() + std::chrono::milliseconds(500) < until) continue;
    if (served_early == 0) served_early = b.served_hosts();
  }
  EXPECT_GT(served_early, 1u) << "nothing after the first change was served within 500 ms";
  const auto stopped = std::chrono::steady_clock::now();
  while (b.served_hosts() < static_cast<size_t>(hosts) &&
         std::chrono::steady_clock::now() < stopped + std::chrono::seconds(3)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(b.served_hosts(), static_cast<size_t>(hosts));
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, std::chrono::milliseconds(1'000));
  EXPECT_GE(b.builds - builds_before, 4);
  EXPECT_LE(b.builds - builds_before, 13);
}

TEST(SyncLoopTest, TheGapFollowsTheCostOfABuild) {
  // Builds of 30 ms and a 1 ms hold-off: once changes keep coming, the gap after each push is
  // four times its cost (>= 120 ms), so a second of changes every 5 ms costs at most ~8 builds,
  // not ~30.
  Batching b({std::chrono::milliseconds(1), std::chrono::milliseconds(5'000),
              std::chrono::milliseconds(100), std::chrono::milliseconds(100),
              std::chrono::milliseconds(50)},
             std::chrono::milliseconds(30));
  ASSERT_TRUE(wait_acked(b.loop, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int builds_before = b.builds;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  int hosts = 1;
  while (std::chrono::steady_clock::now() < until) {
    b.hosts = ++hosts;
    b.loop.notify();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(wait_acked(b.loop, 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(b.served_hosts(), static_cast<size_t>(hosts));
  EXPECT_GE(b.builds - builds_before, 2);
  EXPECT_LE(b.builds - builds_before, 9);
}

TEST(SyncLoopTest, AnIsolatedChangeAfterAnExpensiveBuildIsPushedAtOnce) {
  // Builds of 100 ms: a change that finds the loop idle is built at once, however much the
  // previous build cost (the gap of four times the cost is for changes that keep coming).
  Batching b({std::chrono::milliseconds(1), std::chrono::milliseconds(5'000),
              std::chrono::milliseconds(100), std::chrono::milliseconds(100),
              std::chrono::milliseconds(50)},
             std::chrono::milliseconds(100));
  ASSERT_TRUE(wait_acked(b.loop, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  b.hosts = 2;
  const auto before = std::chrono::steady_clock::now();
  b.loop.notify();
  ASSERT_TRUE(wait_acked(b.loop, 2));
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(300))
      << "the change waited for a gap of four builds";
  EXPECT_EQ(b.served_hosts(), 2u);
}

TEST(SyncLoopTest, OneSlowBuildDoesNotStretchTheGap) {
  // Builds of 5 ms, then one of 150 ms (a push slowed by a busy machine), then changes every
  // 5 ms for 300 ms: the gap follows the median cost (20 ms), not the slow one (600 ms, or
  // ~160 ms for an average), so the burst gets several builds.
  Batching b({std::chrono::milliseconds(1), std::chrono::milliseconds(5'000),
              std::chrono::milliseconds(100), std::chrono::milliseconds(100),
              std::chrono::milliseconds(50)},
             std::chrono::milliseconds(5));
  ASSERT_TRUE(wait_acked(b.loop, 1));
  for (int i = 2; i <= 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    b.hosts = i;
    b.loop.notify();
    ASSERT_TRUE(wait_acked(b.loop, i));
  }
  b.cost_ms = 150;
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  b.hosts = 6;
  b.loop.notify();
  ASSERT_TRUE(wait_acked(b.loop, 6));
  b.cost_ms = 5;
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const int builds_before = b.builds;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  int hosts = 6;
  while (std::chrono::steady_clock::now() < until) {
    b.hosts = ++hosts;
    b.loop.notify();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // About 12 builds; a moving average of the costs would have made about 5.
  EXPECT_GE(b.builds - builds_before, 7);
}

}  // namespace
}  // namespace tidegate::controller::sync
