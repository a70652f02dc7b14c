// Where the time of one EndpointSlice change goes at N = 10,000 Ingresses, without an API server:
// the controller's fast path, the pusher's diff, the protocol's encoding and decoding and the
// data plane's publication of a one-upstream delta. Disabled: a measurement, not a test. Run with
//   build/bin/tidegate-unit-tests --gtest_also_run_disabled_tests --gtest_filter='Propagation*'
// (PROPAGATION_BENCH_N overrides N). Figures are in docs/benchmarks.md, "Propagation".

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/model.h"
#include "objects/objects.h"
#include "protocol/protocol.h"
#include "push/pusher.h"
#include "runtime/publisher.h"
#include "store/store.h"
#include "translate/incremental.h"

namespace tidegate {
namespace {

using namespace tidegate::controller;
using dataplane::runtime::Publisher;

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Median of `runs` timings of f(run) in milliseconds.
template <class F>
double median_ms(int runs, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto start = Clock::now();
    f(i);
    t.push_back(ms_since(start));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

objects::Service service(int i) {
  objects::Service s;
  s.metadata.namespace_ = "bench";
  s.metadata.name = "app" + std::to_string(i);
  s.spec.type = "ClusterIP";
  s.spec.ports = {{"", 80, objects::PortRef{8080, ""}, "TCP"}};
  return s;
}

objects::EndpointSlice slice(int i, const std::string& address) {
  objects::EndpointSlice s;
  s.metadata.namespace_ = "bench";
  s.metadata.name = "app" + std::to_string(i) + "-1";
  s.metadata.labels[std::string(objects::kServiceNameLabel)] = "app" + std::to_string(i);
  s.address_type = "IPv4";
  objects::SliceEndpoint e;
  e.addresses = {address};
  e.conditions.ready = true;
  s.endpoints = {e};
  objects::EndpointPort p;
  p.port = 8080;
  s.ports = {p};
  return s;
}

objects::Ingress ingress(int i) {
  objects::Ingress in;
  in.metadata.namespace_ = "bench";
  in.metadata.name = "app" + std::to_string(i);
  in.spec.ingress_class_name = "tidegate";
  objects::HTTPIngressPath path;
  path.path = "/";
  path.path_type = objects::PathType::kPrefix;
  path.backend.service =
      objects::IngressServiceBackend{"app" + std::to_string(i), objects::PortRef{80, ""}};
  in.spec.rules.push_back(objects::IngressRule{"h" + std::to_string(i) + ".example", {path}});
  return in;
}

TEST(PropagationBench, DISABLED_EndpointChangeAtScale) {
  const int n =
      std::getenv("PROPAGATION_BENCH_N") ? std::atoi(std::getenv("PROPAGATION_BENCH_N")) : 10'000;
  const int runs = 21;
  store::Store store;
  for (int i = 0; i < n; ++i) {
    store.insert(service(i));
    store.insert(slice(i, "192.0.2.1"));
    store.insert(ingress(i));
  }
  translate::IncrementalTranslator inc;
  auto start = Clock::now();
  model::Config acked = inc.update(store, store.take_changes()).config;
  const double full_ms = ms_since(start);
  ASSERT_EQ(acked.virtual_hosts.size(), static_cast<size_t>(n));

  Publisher publisher(2);
  start = Clock::now();
  ASSERT_EQ(publisher.apply_snapshot(protocol::Snapshot{1, acked}), "");
  const double snapshot_ms = ms_since(start);

  // Each run moves one Service's only endpoint between two addresses, as bench/propagation.py.
  auto change = [&](int run) {
    store.insert(slice((run * 7919) % n, run % 2 == 0 ? "192.0.2.2" : "192.0.2.1"));
  };
  double fast_ms = median_ms(runs, [&](int run) {
    change(run);
    inc.update(store, store.take_changes());
  });
  const model::Config& current = inc.update(store, {}).config;
  // Before: the build copied the Config out, the pusher diffed the whole of it and, on ACK,
  // copied it again as the acknowledged Config.
  model::Config desired;
  double copy_ms = median_ms(runs, [&](int) { desired = current; });
  model::Delta delta;
  double diff_ms = median_ms(runs, [&](int) { delta = model::diff(acked, current); });
  ASSERT_FALSE(delta.empty());
  // After: the delta from the fast path's changed upstreams.
  std::vector<std::string> changed;
  for (const auto& up : delta.upsert_upstreams) changed.push_back(up.name);
  model::Delta hinted;
  double hinted_ms =
      median_ms(runs, [&](int) { hinted = push::upstream_delta(acked, current, changed); });
  ASSERT_EQ(hinted, delta);

  // One upstream, as one EndpointSlice change sends.
  model::Delta one;
  one.upsert_upstreams = {delta.upsert_upstreams.front()};
  std::string frame;
  double encode_ms = median_ms(runs, [&](int) {
    frame = protocol::encode_json(protocol::DeltaMsg{2, 1, one});
  });
  double decode_ms =
      median_ms(runs, [&](int) { ASSERT_TRUE(protocol::decode_json(frame).message); });

  auto one_upstream = [&](int run) {
    model::Delta d;
    const auto& name = "bench/app" + std::to_string((run * 7919) % n) + ":80";
    d.upsert_upstreams.push_back(
        model::Upstream{name, {{run % 2 == 0 ? "192.0.2.2" : "192.0.2.1", 8080}}});
    return d;
  };
  // Before: model::apply to a copy of the whole Config, then a full build_snapshot.
  double rebuild_ms = median_ms(runs, [&](int run) {
    auto result = model::apply(publisher.current()->config(), one_upstream(run));
    std::string error;
    ASSERT_TRUE(dataplane::runtime::build_snapshot(99, std::move(result.config), 2, &error,
                                                   publisher.current().get()));
  });
  // After: Publisher::apply_delta's upstream-only path.
  uint64_t version = 1;
  double apply_ms = median_ms(runs, [&](int run) {
    ASSERT_EQ(publisher.apply_delta(protocol::DeltaMsg{version + 1, version, one_upstream(run)}),
              "");
    ++version;
  });

  std::printf("N=%d: full translation %.1f ms, first snapshot publish %.1f ms\n", n, full_ms,
              snapshot_ms);
  std::printf(
      "per endpoint change, median of %d runs:\n"
      "  controller fast path (IncrementalTranslator::update)  %8.3f ms\n"
      "  copy of the Config out of the translator (before)     %8.3f ms\n"
      "  model::diff of the whole Config (before)              %8.3f ms\n"
      "  push::upstream_delta of the changed upstreams (after) %8.3f ms\n"
      "  protocol encode_json, one-upstream delta (%zu bytes)  %8.3f ms\n"
      "  protocol decode_json                                  %8.3f ms\n"
      "  data plane: apply to a Config copy + build_snapshot (before) %8.3f ms\n"
      "  data plane: Publisher::apply_delta, upstreams only (after)   %8.3f ms\n",
      runs, fast_ms, copy_ms, diff_ms, hinted_ms, frame.size(), encode_ms, decode_ms, rebuild_ms,
      apply_ms);
}

}  // namespace
}  // namespace tidegate
