// The cost of the EndpointSlice path (runtime::update_upstreams) as the number of upstreams
// grows: a snapshot of N upstreams (three endpoints each) receives 200 deltas that each change
// one upstream's endpoints. Disabled by default (it takes seconds); run each size in a process
// of its own (the memory figure is the process's RSS growth), e.g.
//   build/bin/tidegate-unit-tests --gtest_also_run_disabled_tests
//     --gtest_filter='SnapshotUpdateBench.*100k'
// It prints the median and p99 of one application (update_upstreams, then dropping the previous
// snapshot, as the data plane does once every worker has the new one), the cost of an upstream
// lookup (the request path's Snapshot::upstream) and the memory a snapshot takes.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include "model/model.h"
#include "runtime/snapshot.h"

namespace tidegate::dataplane::runtime {
namespace {

constexpr size_t kWorkers = 2;
constexpr int kDeltas = 200;

std::string name_of(size_t i) { return "ns/app-" + std::to_string(i) + ":80"; }

model::Upstream make_upstream(size_t i, int generation) {
  model::Upstream u;
  u.name = name_of(i);
  const std::string address = "10." + std::to_string((i >> 16) & 255) + "." +
                              std::to_string((i >> 8) & 255) + "." + std::to_string(i & 255);
  for (int p = 0; p < 3; ++p) {
    u.endpoints.push_back({address, static_cast<uint16_t>(8000 + generation * 3 + p)});
  }
  return u;
}

long rss_kib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// This thread's CPU time: on a loaded machine the wall clock also counts the time others ran.
double cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void run(size_t n) {
  malloc_trim(0);
  const long rss_before = rss_kib();
  std::shared_ptr<const Snapshot> cur;
  {
    model::Config config;
    for (size_t i = 0; i < n; ++i) config.upstreams.emplace(name_of(i), make_upstream(i, 0));
    std::string error;
    cur = build_snapshot(1, std::move(config), kWorkers, &error);
    ASSERT_NE(cur, nullptr) << error;
  }
  malloc_trim(0);
  const long rss_snapshot = rss_kib() - rss_before;

  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  std::vector<double> apply_us, update_us, apply_cpu_us;
  uint64_t version = 1;
  for (int k = 0; k < kDeltas; ++k) {
    std::vector<model::Upstream> upsert = {make_upstream(pick(rng), k + 1)};
    std::string error;
    const double c0 = cpu_us();
    const auto t0 = std::chrono::steady_clock::now();
    auto next = update_upstreams(version + 1, *cur, upsert, {}, kWorkers, &error);
    const auto t1 = std::chrono::steady_clock::now();
    ASSERT_NE(next, nullptr) << error;
    cur = std::move(next);  // the previous snapshot goes
    const auto t2 = std::chrono::steady_clock::now();
    apply_cpu_us.push_back(cpu_us() - c0);
    ++version;
    update_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    apply_us.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count());
  }

  // The request path: one lookup by name per request. Thread CPU time, the best of 5 rounds.
  std::vector<std::string> names;
  for (int k = 0; k < 4096; ++k) names.push_back(name_of(pick(rng)));
  size_t found = 0;
  double lookup_ns = 0;
  constexpr int kRounds = 20;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const double l0 = cpu_us();
    for (int r = 0; r < kRounds; ++r) {
      for (const auto& name : names) found += cur->upstream(name) != nullptr ? 1 : 0;
    }
    const double ns = (cpu_us() - l0) * 1e3 / static_cast<double>(names.size() * kRounds);
    lookup_ns = attempt == 0 ? ns : std::min(lookup_ns, ns);
  }
  ASSERT_EQ(found, names.size() * kRounds * 5);

  std::printf(
      "N=%zu: update_upstreams median %.1f us p99 %.1f us; with the previous snapshot dropped "
      "median %.1f us p99 %.1f us (CPU time: median %.1f us p99 %.1f us); lookup %.1f ns (CPU); "
      "snapshot RSS %.1f MiB\n",
      n, percentile(update_us, 0.5), percentile(update_us, 0.99), percentile(apply_us, 0.5),
      percentile(apply_us, 0.99), percentile(apply_cpu_us, 0.5), percentile(apply_cpu_us, 0.99),
      lookup_ns, static_cast<double>(rss_snapshot) / 1024.0);
}

TEST(SnapshotUpdateBench, DISABLED_OneUpstreamDelta10k) { run(10'000); }
TEST(SnapshotUpdateBench, DISABLED_OneUpstreamDelta100k) { run(100'000); }

}  // namespace
}  // namespace tidegate::dataplane::runtime
