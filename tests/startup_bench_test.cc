// Where the CPU time of a controller's start goes at N = 10,000 Ingresses (each with its Service
// and EndpointSlice), without an API server: reading the list pages the API server sends (JSON, in
// pages of 500, with the managedFields it adds), storing them, the first translation, encoding
// the first snapshot, and the data plane's decoding and first snapshot build, in CPU time of
// this thread (all of it runs here) so that the figures hold on a loaded machine. Disabled: a
// measurement, not a test. Run with
//   build/bin/tidegate-unit-tests --gtest_also_run_disabled_tests --gtest_filter='StartupBench*'
// (STARTUP_BENCH_N overrides N; STARTUP_BENCH_YAML=0 leaves out the YAML::Load comparison, for a
// profile of the rest). Figures are in docs/benchmarks.md, "Start-up at scale".

#include <malloc.h>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "kube/api.h"
#include "kube/kube_source.h"
#include "model/model.h"
#include "objects/objects.h"
#include "protocol/protocol.h"
#include "runtime/publisher.h"
#include "store/store.h"
#include "translate/incremental.h"

namespace tidegate {
namespace {

using namespace tidegate::controller;
// The thread's CPU time, not the wall clock: the figures hold on a shared, loaded machine (the
// work measured here is all on this thread).
struct Clock {
  using time_point = double;  // ms
  static time_point now() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
  }
};

double ms_since(Clock::time_point start) { return Clock::now() - start; }

// Every thread's CPU time so far, in ms.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// Items as kube-apiserver 1.36 lists them for bench/propagation.py's objects (compact JSON).
std::string service_json(int i) {
  const std::string n = std::to_string(i);
  return R"({"metadata":{"name":"app)" + n +
         R"(","namespace":"bench","uid":"75739341-6b4b-47be-ab98-3ad8fc72d8dc","resourceVersion":")" +
         std::to_string(1000 + 3 * i) +
         R"(","creationTimestamp":"2026-12-04T17:02:41Z","managedFields":[{"manager":"Python-urllib","operation":"Update","apiVersion":"v1","time":"2026-12-04T17:02:41Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:internalTrafficPolicy":{},"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:sessionAffinity":{},"f:type":{}}}}]},"spec":{"ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":80}],"clusterIP":"10.96.216.91","clusterIPs":["10.96.216.91"],"type":"ClusterIP","sessionAffinity":"None","ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack","internalTrafficPolicy":"Cluster"},"status":{"loadBalancer":{}}})";
}

std::string slice_json(int i) {
  const std::string n = std::to_string(i);
  return R"({"metadata":{"name":"app)" + n +
         R"(-1","namespace":"bench","uid":"0b6a4c1e-2b8a-4d6f-9a51-5c1d2e3f4a5b","resourceVersion":")" +
         std::to_string(1001 + 3 * i) +
         R"(","generation":1,"creationTimestamp":"2026-12-04T17:02:41Z","labels":{"kubernetes.io/service-name":"app)" +
         n +
         R"("},"managedFields":[{"manager":"Python-urllib","operation":"Update","apiVersion":"discovery.k8s.io/v1","time":"2026-12-04T17:02:41Z","fieldsType":"FieldsV1","fieldsV1":{"f:addressType":{},"f:endpoints":{},"f:metadata":{"f:labels":{".":{},"f:kubernetes.io/service-name":{}}},"f:ports":{}}}]},"addressType":"IPv4","endpoints":[{"addresses":["192.0.2.1"],"conditions":{"ready":true}}],"ports":[{"name":"http","protocol":"TCP","port":8080}]})";
}

std::string ingress_json(int i) {
  const std::string n = std::to_string(i);
  return R"({"metadata":{"name":"app)" + n +
         R"(","namespace":"bench","uid":"9f8e7d6c-5b4a-4321-8fed-cba987654321","resourceVersion":")" +
         std::to_string(1002 + 3 * i) +
         R"(","generation":1,"creationTimestamp":"2026-12-04T17:02:41Z","managedFields":[{"manager":"Python-urllib","operation":"Update","apiVersion":"networking.k8s.io/v1","time":"2026-12-04T17:02:41Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:ingressClassName":{},"f:rules":{}}}}]},"spec":{"ingressClassName":"tidegate","rules":[{"host":"h)" +
         n +
         R"(.example","http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"app)" +
         n + R"(","port":{"number":80}}}}]}}]},"status":{"loadBalancer":{}}})";
}

// The list pages of one kind: `n` items, `page` per page.
std::vector<std::string> pages(const std::string& list_kind, int n, int page,
                               std::string (*item)(int)) {
  std::vector<std::string> out;
  for (int start = 0; start < n; start += page) {
    std::string body = R"({"kind":")" + list_kind + R"(","metadata":{"resourceVersion":"99999")";
    if (start + page < n) body += R"(,"continue":"token)" + std::to_string(start + page) + R"(")";
    body += R"(},"items":[)";
    for (int i = start; i < std::min(n, start + page); ++i) {
      if (i > start) body += ',';
      body += item(i);
    }
    body += "]}";
    out.push_back(std::move(body));
  }
  return out;
}

class NoClient : public kube::ApiClient {
 public:
  kube::Response get(const std::string&) override { return {404, "", ""}; }
  std::unique_ptr<kube::LineStream> stream(const std::string&, kube::Response* failed) override {
    failed->status = 404;
    return nullptr;
  }
  kube::Response send(const std::string&, const std::string&, const std::string&,
                      const std::string&) override {
    return {404, "", ""};
  }
};

// The heap in use (glibc's malloc: the unit tests are not linked with mimalloc), in MB: what
// each stage keeps alive.
double heap_mb() {
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<double>(mi.uordblks + mi.hblkhd) / 1e6;
}

TEST(StartupBench, DISABLED_FirstPushAtScale) {
  const int n = std::getenv("STARTUP_BENCH_N") ? std::atoi(std::getenv("STARTUP_BENCH_N")) : 10'000;
  const bool with_yaml = std::getenv("STARTUP_BENCH_YAML") == nullptr ||
                         std::string_view(std::getenv("STARTUP_BENCH_YAML")) != "0";
  struct KindPages {
    objects::Kind kind;
    std::vector<std::string> pages;
  };
  std::vector<KindPages> kinds = {
      {objects::Kind::kIngress, pages("IngressList", n, 500, ingress_json)},
      {objects::Kind::kService, pages("ServiceList", n, 500, service_json)},
      {objects::Kind::kEndpointSlice, pages("EndpointSliceList", n, 500, slice_json)},
  };
  const double heap_pages = heap_mb();
  kube::KubeSource source(std::make_unique<NoClient>(), store::ClassOptions{}, {},
                          [](objects::Kind) {});
  for (auto& k : kinds) {
    size_t bytes = 0;
    for (const auto& p : k.pages) bytes += p.size();
    double parse_ms = 0, convert_ms = 0, yaml_ms = 0;
    std::vector<objects::Object> all;
    for (const auto& body : k.pages) {
      // For comparison: what reading the page cost before kube/json_reader.h.
      auto start = Clock::now();
      if (with_yaml) {
        ASSERT_TRUE(YAML::Load(body).IsMap());
        yaml_ms += ms_since(start);
        start = Clock::now();
      }
      std::string error;
      auto page = kube::parse_list(body, &error);
      ASSERT_TRUE(page) << error;
      parse_ms += ms_since(start);
      start = Clock::now();
      for (const auto& node : page->items) {
        switch (k.kind) {
          case objects::Kind::kIngress:
            all.emplace_back(std::move(*objects::parse_ingress(node).value));
            break;
          case objects::Kind::kService:
            all.emplace_back(std::move(*objects::parse_service(node).value));
            break;
          default:
            all.emplace_back(std::move(*objects::parse_endpoint_slice(node).value));
            break;
        }
      }
      convert_ms += ms_since(start);
    }
    auto start = Clock::now();
    source.replace(k.kind, std::move(all));
    const double store_ms = ms_since(start);
    std::printf(
        "%-14s %zu pages, %.1f MB: parse_list %.0f ms (YAML::Load of the same pages: %.0f ms), "
        "convert %.0f ms, store %.0f ms; heap in use beyond the pages: %.0f MB\n",
        objects::to_string(k.kind), k.pages.size(), bytes / 1e6, parse_ms, yaml_ms, convert_ms,
        store_ms, heap_mb() - heap_pages);
  }
  const double heap_before_translate = heap_mb();
  // STARTUP_BENCH_ONE_THREAD=1: the translation's upstreams on this thread (to compare).
  translate::TranslateOptions translate_options;
  if (std::getenv("STARTUP_BENCH_ONE_THREAD") != nullptr) {
    translate_options.upstreams_beside_from = std::numeric_limits<size_t>::max();
  }
  translate::IncrementalTranslator translator(translate_options);
  auto start = Clock::now();
  const model::Config* config =
      source.with_store_and_changes([&](const store::Store& s, const store::Changes& changes) {
        return &translator.update(s, changes).config;
      });
  const double translate_ms = ms_since(start);
  const double heap_translated = heap_mb();
  ASSERT_EQ(config->virtual_hosts.size(), static_cast<size_t>(n));
  start = Clock::now();
  std::string frame = protocol::encode_snapshot_frame(1, *config);  // as the controller writes it
  const double encode_ms = ms_since(start);
  const double heap_encoded = heap_mb();
  start = Clock::now();
  auto decoded = protocol::decode_json(std::string_view(frame).substr(4));
  const double decode_ms = ms_since(start);
  const double heap_decoded = heap_mb();
  ASSERT_TRUE(decoded.message) << decoded.error;
  dataplane::runtime::Publisher publisher(2);
  // The snapshot's upstreams are built on a second thread (runtime/snapshot.cc): its CPU time is
  // the process's, and its wall time what a start waits for.
  const double publish_process_start = process_cpu_ms();
  const auto publish_wall_start = std::chrono::steady_clock::now();
  start = Clock::now();
  // As the control server does: the decoded message's configuration is taken, not copied.
  ASSERT_EQ(publisher.apply_snapshot(std::move(std::get<protocol::Snapshot>(*decoded.message))),
            "");
  const double publish_ms = ms_since(start);
  const double publish_process_ms = process_cpu_ms() - publish_process_start;
  const double publish_wall_ms = std::chrono::duration<double, std::milli>(
                                     std::chrono::steady_clock::now() - publish_wall_start)
                                     .count();
  std::printf(
      "N=%d: translation %.0f ms; snapshot frame %.1f MB: encode %.0f ms; data plane decode %.0f "
      "ms, apply_snapshot %.0f ms on this thread (%.0f ms of the process's CPU, %.0f ms of wall "
      "time)\n",
      n, translate_ms, frame.size() / 1e6, encode_ms, decode_ms, publish_ms, publish_process_ms,
      publish_wall_ms);
  const double heap_published = heap_mb();
  decoded = {};
  const double heap_decoded_dropped = heap_mb();
  std::printf(
      "heap in use (MB, beyond the pages): after the store %.0f; translation +%.0f; the encoded "
      "frame +%.0f; decoded +%.0f; published %+.0f; the decoded message dropped %+.0f: the data "
      "plane's snapshot ~%.0f MB (%.0f bytes per host)\n",
      heap_before_translate - heap_pages, heap_translated - heap_before_translate,
      heap_encoded - heap_translated, heap_decoded - heap_encoded, heap_published - heap_decoded,
      heap_decoded_dropped - heap_published, heap_decoded_dropped - heap_encoded,
      (heap_decoded_dropped - heap_encoded) * 1e6 / n);
}

}  // namespace
}  // namespace tidegate
